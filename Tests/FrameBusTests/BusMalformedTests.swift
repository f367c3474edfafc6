import CFrameBusShims
import Foundation
import Glibc
import SystemPackage
import Testing
import TestSupport

@testable import FrameBus

/// From async code a raw peer waits on a thread of its own: its reads poll the socket in a loop for seconds, and a test
/// that did so on Swift's cooperative pool (two threads on a small machine) stalled every other test meanwhile.
extension RawPeer {
    /// ``next(timeout:)`` without holding a thread of the cooperative pool.
    func next(timeout: Double = 10) async -> WireMessage? { await waiting { $0.next(timeout: timeout) } }

    /// ``handshake(formats:)`` without holding a thread of the cooperative pool. HELLO goes out before the first
    /// suspension, so a publisher's handshake clock (it runs from the connection) is not spent waiting for a thread.
    func handshake(formats: [UInt32] = [PixelFormat.yuv420BiPlanarVideoRange8.fourCC]) async -> WireWelcome? {
        sendHello(formats: formats)
        if case .welcome(let welcome) = await next() { return welcome }
        return nil
    }

    /// ``expectError(timeout:)`` without holding a thread of the cooperative pool.
    func expectError(timeout: Double = 10) async -> (code: UInt16?, closed: Bool) {
        await waiting { $0.expectError(timeout: timeout) }
    }

    private func waiting<Result: Sendable>(_ body: @escaping @Sendable (RawPeer) -> Result) async -> Result {
        let peer = self
        // onDedicatedThread rethrows only what its body throws, and this body throws nothing.
        return try! await onDedicatedThread("raw-peer-wait") { body(peer) }
    }
}

/// Waits until `listener` has a connection to accept, at most `timeoutMilliseconds`, on a thread of its own.
func connectionWaiting(on listener: Socket, timeoutMilliseconds: Int32 = 20_000) async throws -> Bool {
    try await onDedicatedThread("listener-wait") { try listener.waitReadable(timeoutMilliseconds: timeoutMilliseconds).get() }
}

/// A hand-driven connection speaking raw datagrams, to send what a correct peer never would.
struct RawPeer {
    let socket: Socket

    init(connectingTo path: String) throws {
        socket = try Socket.connect(path: path, timeoutNanoseconds: 2_000_000_000).get()
    }

    init(socket: Socket) { self.socket = socket }

    func send(_ bytes: [UInt8], descriptors: [Int32] = []) {
        _ = socket.send(bytes, descriptors: descriptors)
    }

    /// The next message; nil at end of file or after `timeout` seconds.
    func next(timeout: Double = 10) -> WireMessage? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            _ = socket.waitReadable(timeoutMilliseconds: 100)
            switch socket.receive(maximumSize: WireProtocol.maximumMessageSize) {
            case .success(.wouldBlock): continue
            case .success(.datagram(let datagram)):
                return try? WireMessage.decode(datagram.bytes, descriptorCount: datagram.descriptors.count)
            default: return nil
            }
        }
        return nil
    }

    func handshake(formats: [UInt32] = [PixelFormat.yuv420BiPlanarVideoRange8.fourCC]) -> WireWelcome? {
        sendHello(formats: formats)
        if case .welcome(let welcome) = next() { return welcome }
        return nil
    }

    func sendHello(formats: [UInt32]) {
        send(WireMessage.hello(WireHello(version: 1, deliveryMode: 1, queueDepth: 8, formats: formats)).encoded())
    }

    /// Reads until an ERROR arrives (skipping frames); returns its code, and whether the connection then closed.
    func expectError(timeout: Double = 10) -> (code: UInt16?, closed: Bool) {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard let message = next(timeout: deadline.timeIntervalSinceNow) else { return (nil, true) }
            if case .error(let error) = message {
                return (error.code, next(timeout: 5) == nil)
            }
        }
        return (nil, false)
    }
}

@Suite(.timeLimit(.minutes(5))) struct BusMalformedTests {
    enum Scenario: String, CaseIterable, Sendable {
        case truncated, oversized, wrongVersion, unknownType, wrongLength, bogusSurfaceID, releaseNotHeld, secondHello
    }

    @Test func eachMalformedMessageClosesOnlyItsOwnConnection() async throws {
        let path = temporaryBusPath("malformed")
        var configuration = Publisher.Configuration(path: path, formats: [.yuv420BiPlanarVideoRange8])
        configuration.maximumSubscribers = 2  // the good one and one bad one at a time: a share of 31 frames each
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        let total = 40
        let good = try await startPeer(["bus-subscriber", path, "--queue", "64", "--frames", "\(total)", "--timeout", "600"])
        try #require(await eventually { publisher.subscriberCount == 1 })
        let pool = try PixelBufferPool(
            attributes: .init(width: 64, height: 48, pixelFormat: .yuv420BiPlanarVideoRange8, allocationThreshold: 64)
        )
        var published = 0
        func publishOne() throws {
            let buffer = try publisher.makePixelBuffer(from: pool)
            _ = try fillFrame(buffer, index: published)
            try publisher.publish(buffer)
            published += 1
        }

        for scenario in Scenario.allCases {
            try publishOne()
            let raw = try RawPeer(connectingTo: path)
            let hello = WireMessage.hello(
                WireHello(deliveryMode: 1, queueDepth: 8, formats: [PixelFormat.yuv420BiPlanarVideoRange8.fourCC])
            )
            var expected = WireErrorCode.malformedMessage
            switch scenario {
            case .truncated:
                raw.send(Array(hello.encoded().prefix(6)))
            case .oversized:
                raw.send([UInt8](repeating: 0, count: 5000))
            case .wrongVersion:
                raw.send(
                    WireMessage.hello(WireHello(version: 9, deliveryMode: 0, queueDepth: 1, formats: [1])).encoded()
                )
                expected = .unsupportedVersion
            case .unknownType:
                try #require(await raw.handshake() != nil)
                var bytes = WireMessage.goodbye(reason: 0).encoded()
                bytes[0] = 0x77
                bytes[1] = 0x77
                raw.send(bytes)
            case .wrongLength:
                try #require(await raw.handshake() != nil)
                var bytes =
                    WireMessage.release(WireRelease(sequence: 0, surfaceID: 1, flags: 0)).encoded() + [0, 0, 0, 0]
                bytes[4] = UInt8(bytes.count)
                raw.send(bytes)
            case .bogusSurfaceID:
                try #require(await raw.handshake() != nil)
                try publishOne()
                var frame: WireFrame?
                while frame == nil, let message = await raw.next() {
                    if case .frame(let received) = message { frame = received }
                }
                let received = try #require(frame)
                raw.send(
                    WireMessage.release(
                        WireRelease(sequence: received.sequence, surfaceID: received.surfaceID &+ 1, flags: 0)
                    )
                    .encoded()
                )
                expected = .invalidRequest
            case .releaseNotHeld:
                try #require(await raw.handshake() != nil)
                raw.send(WireMessage.release(WireRelease(sequence: 999_999, surfaceID: 1, flags: 0)).encoded())
                expected = .invalidRequest
            case .secondHello:
                try #require(await raw.handshake() != nil)
                raw.send(hello.encoded())
            }
            let outcome = await raw.expectError()
            #expect(outcome.code == expected.rawValue, "\(scenario)")
            #expect(outcome.closed, "\(scenario): connection not closed")
            try publishOne()
        }
        #expect(await eventually { publisher.subscriberCount == 1 })
        while published < total { try publishOne() }
        #expect(await good.waitForExit(timeout: 120))
        let stats = try #require(good.records("stats").first, "\(good.output)")
        #expect(stats["delivered"] == "\(total)")
        #expect(good.records("drop").isEmpty)
        #expect(good.records("end").isEmpty)
    }

    @Test func aSubscriberThatStopsReadingIsDisconnectedAndReleased() async throws {
        let path = temporaryBusPath("stalled")
        var configuration = Publisher.Configuration(path: path, formats: [.yuv420BiPlanarVideoRange8])
        // Held frames are bounded and drops coalesce, so only DROP flushes can pile up: make them frequent.
        configuration.dropFlushInterval = .milliseconds(1)
        configuration.maximumQueuedMessages = 8
        configuration.closeGracePeriod = .seconds(60)
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        let raw = try RawPeer(connectingTo: path)
        try #require(await raw.handshake() != nil)
        let pool = try PixelBufferPool(
            attributes: .init(width: 64, height: 48, pixelFormat: .yuv420BiPlanarVideoRange8, allocationThreshold: 32)
        )
        var published = 0
        while publisher.subscriberCount == 1, published < 50_000 {
            try publisher.publish(try publisher.makePixelBuffer(from: pool))
            published += 1
            try await Task.sleep(for: .microseconds(100))
        }
        #expect(publisher.subscriberCount == 0)
        #expect(publisher.heldFrameCount == 0)
        // Its buffers are dropped by whichever thread failed it, just after that thread unlocked (the loop thread's
        // may still be on its way): back in the pool a moment after the counts say it is gone.
        #expect(await eventually { pool.inUseBufferCount == 0 })
        // Reading again, it finds the ERROR the publisher queued before closing.
        var lastError: WireErrorMessage?
        while let message = await raw.next(timeout: 20) {
            if case .error(let error) = message { lastError = error }
        }
        #expect(lastError?.code == WireErrorCode.tooSlow.rawValue)
    }

    @Test func aConnectionThatNeverSaysHelloIsClosedAfterTheTimeout() async throws {
        let path = temporaryBusPath("silent")
        var configuration = Publisher.Configuration(path: path, formats: [.yuv420BiPlanarVideoRange8])
        configuration.handshakeTimeout = .milliseconds(200)
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        let raw = try RawPeer(connectingTo: path)
        #expect(await raw.expectError(timeout: 5).closed)
    }

    @Test func aFormatNobodyOffersIsRefusedWithAReason() async throws {
        let path = temporaryBusPath("format")
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        defer { publisher.stop() }
        let subscriber = try Subscriber(configuration: .init(path: path, acceptedFormats: [.bgra8]))
        var events: [SubscriberEvent] = []
        for try await event in subscriber.events { events.append(event) }
        guard events.count == 1, case .ended(let error) = events[0] else {
            Issue.record("expected one ended event, got \(events)")
            return
        }
        #expect(error.code == .refused)
        #expect((error.message ?? "").contains("no common format"))
    }

    enum EvilSurface: String, CaseIterable, Sendable { case unsealed, tooSmall, frameWithoutSurface }

    /// A raw publisher announces a bad surface to a real subscriber process, which must refuse it.
    @Test(arguments: EvilSurface.allCases) func aMaliciousPublishersSurfaceIsRefused(_ evil: EvilSurface) async throws {
        let path = temporaryBusPath("evil")
        let listener = try Socket.listen(path: path, mode: 0o600).get()
        defer { unlink(path) }
        // The subscriber waits 5 s for WELCOME from its connection: accept, HELLO and WELCOME happen on a thread
        // started before the subscriber is, with no wait for a thread of the (busy) cooperative pool in between.
        let welcome = WireMessage.welcome(
            WireWelcome(
                version: 2,
                deliveryMode: 0,
                queueDepth: 1,
                maximumHeldFrames: 5,
                format: PixelFormat.yuv420BiPlanarVideoRange8.fourCC,
                maximumMessageSize: 4096,
                streamID: 1,
                subscriberID: 1,
                nextSequence: 0,
                maximumAnnouncedSurfaces: 64
            )
        ).encoded()
        let publisherSide = DedicatedThreadTask("raw-publisher") { () -> RawPeer? in
            guard try listener.waitReadable(timeoutMilliseconds: 120_000).get(),
                let socket = try listener.accept().get()
            else { return nil }
            let connection = RawPeer(socket: socket)
            guard case .hello = connection.next(timeout: 60) else { return nil }
            connection.send(welcome)
            return connection
        }
        // It ends on the refusal; its own clock is long, for a loaded machine.
        let peer = try await startPeer(["bus-subscriber", path, "--timeout", "120"])
        let connection = try #require(
            try await publisherSide.value,
            "the subscriber did not connect and say HELLO: \(peer.output)"
        )

        let honest = try PixelBuffer(width: 64, height: 48, pixelFormat: .yuv420BiPlanarVideoRange8)
        let layout = honest.surface.layout
        let announcement = WireSurface(
            surfaceID: honest.surface.id.rawValue,
            pixelFormat: layout.pixelFormat,
            width: UInt32(layout.width),
            height: UInt32(layout.height),
            descriptorByteCounts: [UInt64(layout.allocationSize)],
            planes: layout.planes.map {
                WireSurfacePlane(
                    offset: UInt64($0.offset),
                    bytesPerRow: UInt32($0.bytesPerRow),
                    width: UInt32($0.width),
                    height: UInt32($0.height),
                    bytesPerElement: UInt32($0.bytesPerElement)
                )
            }
        )
        let size = honest.surface.layout.allocationSize
        switch evil {
        case .unsealed, .tooSmall:
            let fd = cfb_memfd_create("evil", CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING)
            try #require(fd >= 0)
            defer { close(fd) }
            #expect(ftruncate(fd, off_t(evil == .tooSmall ? size / 2 : size)) == 0)
            if evil == .tooSmall {
                #expect(cfb_add_seals(fd, CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW | CFB_F_SEAL_SEAL) == 0)
            }
            connection.send(WireMessage.surface(announcement).encoded(), descriptors: [fd])
        case .frameWithoutSurface:
            connection.send(
                WireMessage.frame(
                    WireFrame(
                        sequence: 0,
                        surfaceID: 4242,
                        presentationTime: .invalid,
                        duration: .invalid,
                        publishTime: 0,
                        bytesUsed: 10,
                        flags: 0
                    )
                ).encoded()
            )
        }
        let outcome = await connection.expectError()
        let expectedCode: WireErrorCode = evil == .frameWithoutSurface ? .malformedMessage : .invalidSurface
        #expect(outcome.code == expectedCode.rawValue)
        #expect(outcome.closed)
        #expect(await peer.waitForExit(timeout: 120))
        let end = try #require(peer.records("end").first, "\(peer.output)")
        let expectedEnd = evil == .frameWithoutSurface ? "protocol" : "surface"
        #expect(end["code"] == expectedEnd, "\(peer.output)")
        #expect(peer.records("frame").isEmpty)
    }
}
