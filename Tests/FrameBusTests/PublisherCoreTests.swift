import Dispatch
import Foundation
import Logging
import PixelBuffers
import Surfaces
import Synchronization
import Testing
import TestSupport

@testable import FrameBus

/// A log handler that blocks the thread writing the first line it is armed for, until the test lets it go (or a
/// minute passes): a full stderr pipe, a stuck journald.
final class BlockingLog: Sendable {
    let armed = Atomic<Bool>(false)
    let entered = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let released = Atomic<Bool>(false)
    let lines = Mutex<[String]>([])

    struct Handler: LogHandler {
        let log: BlockingLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            log.lines.withLock { $0.append("\(event.message)") }
            guard log.armed.exchange(false, ordering: .acquiringAndReleasing) else { return }
            log.entered.signal()
            _ = log.release.wait(timeout: .now() + 300)  // the test signals it on every path; long, so a starved test still finds it held
            log.released.store(true, ordering: .releasing)
        }
    }

    var logger: Logger { Logger(label: "test.blocking") { _ in Handler(log: self) } }
}

/// The publisher's IO layer (`PublisherCore`): who holds what, and what runs under its lock.
@Suite(.timeLimit(.minutes(5))) struct PublisherCoreTests {
    static let attributes = PixelBufferPool.Attributes(
        width: 64,
        height: 48,
        pixelFormat: .yuv420BiPlanarVideoRange8,
        allocationThreshold: 8
    )

    /// m3: the loop thread holds the core, not the publisher, so dropping the last reference ends the stream at
    /// once: its subscriber gets END_OF_STREAM and a new publisher can listen at the same path right away. Before, the
    /// thread held the publisher through a `poll` of up to a second and the second publisher failed with
    /// `addressInUse`.
    @Test func aNewPublisherCanListenAtThePathRightAfterTheOldOneIsDropped() async throws {
        let path = temporaryBusPath("reuse")
        let configuration = Publisher.Configuration(path: path, formats: [.yuv420BiPlanarVideoRange8])
        var publisher: Publisher? = try Publisher(configuration: configuration)
        let peer = try RawPeer(connectingTo: path)
        #expect(await peer.handshake() != nil)
        #expect(await eventually { publisher?.subscriberCount == 1 })
        publisher = nil
        let second = try Publisher(configuration: configuration)
        defer { second.stop() }
        let ended = try await onDedicatedThread { () -> Bool in
            while let message = peer.next(timeout: 30) {
                if case .endOfStream = message { return true }
            }
            return false
        }
        #expect(ended, "the dropped publisher's subscriber got no END_OF_STREAM")
        // The path is the new publisher's: a subscriber is welcomed there.
        let next = try RawPeer(connectingTo: path)
        #expect(try await onDedicatedThread { next.handshake() } != nil)
        withExtendedLifetime(publisher) {}
    }

    /// m2: log lines are written after the state lock is released. While the loop thread is stuck in a log handler
    /// (here: the line saying a malformed connection is closed), `publish` still returns and a subscriber still gets
    /// the frame; before, the line was written under the lock and `publish` waited for the handler.
    @Test func aBlockedLogHandlerStallsNeitherPublishNorSubscribers() async throws {
        let path = temporaryBusPath("blocking-log")
        let log = BlockingLog()
        let publisher = try Publisher(
            configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8], logger: log.logger)
        )
        defer { publisher.stop() }
        let subscriber = try Subscriber(configuration: .init(path: path, acceptedFormats: [.yuv420BiPlanarVideoRange8]))
        defer { subscriber.cancel() }
        var frames = subscriber.frames.makeAsyncIterator()
        try #require(await eventually { publisher.subscriberCount == 1 })
        let pool = try PixelBufferPool(attributes: Self.attributes)

        log.armed.store(true, ordering: .releasing)
        defer { log.release.signal() }
        let bad = try RawPeer(connectingTo: path)
        bad.send([0xFF, 0xFF, 0xFF, 0xFF])
        let entered = try await onDedicatedThread { log.entered.wait(timeout: .now() + 120) == .success }
        try #require(entered, "the malformed connection was never logged")

        try await onDedicatedThread {
            let buffer = try publisher.makePixelBuffer(from: pool)
            _ = try fillFrame(buffer, index: 7)
            try publisher.publish(buffer)
        }
        let releasedAfterPublish = log.released.load(ordering: .acquiring)
        #expect(!releasedAfterPublish, "publish waited for the blocked log handler")
        // The only frame published reaches the subscriber while the loop thread is still stuck in the handler.
        _ = try #require(try await frames.next())
        let releasedAfterFrame = log.released.load(ordering: .acquiring)
        #expect(!releasedAfterFrame, "the frame reached the subscriber only after the handler")
        log.release.signal()
        #expect(await eventually { log.released.load(ordering: .acquiring) })
        #expect(log.lines.withLock { $0 }.contains { $0.contains("malformed") || $0.contains("closing connection") })
    }

    /// m11: two publishers following one pool each hear of the surfaces it frees and retire them at their own
    /// subscribers, and an application's handler set on the pool afterwards still hears of them too.
    @Test func twoPublishersFollowingOnePoolBothRetireItsFreedSurfaces() async throws {
        let pool = try PixelBufferPool(attributes: Self.attributes)
        let heard = Mutex<[UInt64]>([])
        var publishers: [Publisher] = []
        var peers: [RawPeer] = []
        var surfaces: [UInt64] = []
        // The test keeps the surfaces alive, so only the pool's notification (not the publishers' sweep for surfaces
        // that went away) can retire them.
        var kept: [Surface] = []
        for index in 0..<2 {
            let path = temporaryBusPath("follow-\(index)")
            let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
            let peer = try RawPeer(connectingTo: path)
            #expect(await peer.handshake() != nil)
            #expect(await eventually { publisher.subscriberCount == 1 })
            let surface = try publishOne(publisher, pool)
            let surfaceID = surface.id.rawValue
            kept.append(surface)
            let held = try await onDedicatedThread { () -> WireFrame? in
                awaitMessage(peer) { if case .frame(let frame) = $0 { frame } else { nil } }
            }
            let frame = try #require(held)
            #expect(frame.surfaceID == surfaceID)
            peer.send(
                WireMessage.release(WireRelease(sequence: frame.sequence, surfaceID: surfaceID, flags: 0)).encoded()
            )
            #expect(await eventually { publisher.heldFrameCount == 0 })
            publishers.append(publisher)
            peers.append(peer)
            surfaces.append(surfaceID)
        }
        defer { for publisher in publishers { publisher.stop() } }
        pool.setSurfaceFreedHandler { id in heard.withLock { $0.append(id.rawValue) } }
        #expect(await eventually { pool.idleBufferCount == Set(surfaces).count })
        pool.flush(all: true)
        #expect(Set(heard.withLock { $0 }) == Set(surfaces), "the application's handler was not called")
        for (peer, surfaceID) in zip(peers, surfaces) {
            let retired = try await onDedicatedThread { () -> Bool in
                awaitMessage(peer) { if case .retireSurface(let id) = $0, id == surfaceID { true } else { nil } } ?? false
            }
            #expect(retired, "surface \(surfaceID) was not retired at one of the two publishers' subscribers")
        }
        withExtendedLifetime(kept) {}
    }

    /// A subscriber's release can drop the last reference to a published buffer: the producer dropped its buffer and
    /// its pool went away while a subscriber (a second process) held the frame. The pool then frees the surface and
    /// calls its observers, the application's handler among them, which may call back into the publisher. Here the
    /// handler asks for the publisher's statistics from another thread and waits for them: they come, because the
    /// machine hands what it lets go of to the IO layer, which drops it after unlocking. Before, the release dropped
    /// the buffer under the state lock, the handler ran inside it, and the other thread waited until the handler gave
    /// up (a handler calling the publisher itself deadlocked).
    @Test func aSurfaceFreedByASubscribersReleaseIsReportedOutsideThePublishersLock() async throws {
        let path = temporaryBusPath("release-outside-lock")
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        defer { publisher.stop() }
        let subscriber = try await startPeer(["bus-subscriber", path, "--frames", "1", "--timeout", "600"])
        try #require(await eventually(timeout: 300) { publisher.subscriberCount == 1 }, "the subscriber never came")
        /// Each freed surface, and whether the publisher answered another thread while the handler ran.
        let heard = Mutex<[(surfaceID: UInt64, publisherAnswered: Bool)]>([])
        let surfaceID: UInt64
        do {
            let pool = try PixelBufferPool(attributes: Self.attributes)
            pool.setSurfaceFreedHandler { id in
                let answered = DispatchSemaphore(value: 0)
                let other = Thread {
                    _ = publisher.statistics
                    answered.signal()
                }
                other.start()
                // Long, so that a starved machine does not fail the test; inside the lock it never comes.
                let inTime = answered.wait(timeout: .now() + 60) == .success
                heard.withLock { $0.append((id.rawValue, inTime)) }
            }
            surfaceID = try publishOne(publisher, pool).id.rawValue
            // The buffer and the pool go away here: the publisher's hold on the frame is the last reference.
        }
        #expect(await subscriber.waitForOutput("frame seq=0", timeout: 300), "the subscriber did not get the frame")
        let freed = await eventually(timeout: 300) { heard.withLock { $0.contains { $0.surfaceID == surfaceID } } }
        try #require(freed, "the released frame's surface was never freed")
        let entry = try #require(heard.withLock { $0.first { $0.surfaceID == surfaceID } })
        #expect(entry.publisherAnswered, "the surface-freed handler ran inside the publisher's state lock")
    }

    /// Publishes one buffer of `pool`; returns its surface.
    private func publishOne(_ publisher: Publisher, _ pool: PixelBufferPool) throws -> Surface {
        let buffer = try publisher.makePixelBuffer(from: pool)
        _ = try fillFrame(buffer, index: 1)
        try publisher.publish(buffer)
        return buffer.surface
    }
}

/// Reads messages from `peer` until `match` returns a value, for at most `timeout` seconds.
private func awaitMessage<T>(_ peer: RawPeer, timeout: Double = 30, _ match: (WireMessage) -> T?) -> T? {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline, let message = peer.next(timeout: deadline.timeIntervalSinceNow) {
        if let value = match(message) { return value }
    }
    return nil
}
