import Foundation
import Testing
import TestSupport

@testable import FrameBus

/// A real ``Subscriber`` in this process against a publisher process that breaks the protocol on purpose
/// (FrameBusTestPeer's `hostile-publisher` mode). The subscriber must report what happened and live on.
@Suite(.timeLimit(.minutes(10))) struct HostilePublisherTests {
    /// Starts the hostile publisher, subscribes, and collects every event until the stream ends for good.
    func run(
        _ scenario: String,
        accepting formats: [PixelFormat] = [.yuv420BiPlanarVideoRange8],
        delivery: Subscriber.Delivery = .queue(depth: 4),
        keepingFrames: Bool = true
    ) async throws -> (events: [SubscriberEvent], peer: ChildProcess, statistics: FrameStatistics) {
        let path = temporaryBusPath("hostile")
        let peer = try await startPeer(["hostile-publisher", path, scenario])
        try #require(await eventually { peer.output.contains("listening") }, "the hostile publisher did not start")
        var configuration = Subscriber.Configuration(path: path, acceptedFormats: formats, delivery: delivery)
        configuration.connectTimeout = .seconds(20)
        let subscriber = try Subscriber(configuration: configuration)
        let watchdog = Task {
            try await Task.sleep(for: .seconds(60))
            subscriber.cancel()
        }
        defer {
            watchdog.cancel()
            subscriber.cancel()
        }
        var events: [SubscriberEvent] = []
        for try await event in subscriber.events {
            // A consumer that does not keep frames releases each one at once.
            if case .frame = event, !keepingFrames { continue }
            events.append(event)
        }
        return (events, peer, subscriber.statistics)
    }

    func drops(_ events: [SubscriberEvent]) -> [SubscriberDrop] {
        events.compactMap { if case .dropped(let drop) = $0 { drop } else { nil } }
    }

    func frames(_ events: [SubscriberEvent]) -> [SampleBuffer] {
        events.compactMap { if case .frame(let frame) = $0 { frame } else { nil } }
    }

    func ending(_ events: [SubscriberEvent]) -> FrameBusError? {
        if case .ended(let error)? = events.last { return error }
        return nil
    }

    @Test func aDropOfEverySequenceNumberIsReportedAndTheStreamGoesOn() async throws {
        let (events, _, statistics) = try await run("drop-everything")
        #expect(drops(events) == [SubscriberDrop(reason: .outOfBuffers, sequences: 0...UInt64.max)])
        #expect(frames(events).map(\.busSequenceNumber) == [0])
        #expect(ending(events)?.code == .endOfStream, "\(events)")
        #expect(statistics.dropped[.outOfBuffers] == Int.max)
    }

    @Test func twoDropsOfTwoToTheSixtyThreeFramesSaturateTheCounters() async throws {
        let (events, _, statistics) = try await run("drop-overflow")
        let half = UInt64(Int64.max)
        // Contiguous: one report if both waited together, else two that continue each other (the consumer may take
        // the first before the second arrives). The counts are exact in UInt64; the Int statistics saturate.
        let reports = drops(events)
        #expect(
            reports == [SubscriberDrop(reason: .outOfBuffers, sequences: 0...(2 * half - 1))]
                || reports == [
                    SubscriberDrop(reason: .outOfBuffers, sequences: 0...(half - 1)),
                    SubscriberDrop(reason: .outOfBuffers, sequences: half...(2 * half - 1)),
                ],
            "\(reports)"
        )
        #expect(reports.reduce(0) { $0 + $1.frameCount } == 2 * half)
        #expect(statistics.dropped[.outOfBuffers] == Int.max)
        #expect(frames(events).map(\.busSequenceNumber) == [2 * half])
        #expect(ending(events)?.code == .endOfStream, "\(events)")
    }

    @Test(arguments: ["unsealed-surface", "no-write-seal"])
    func aSurfaceWithoutSealsIsRefusedWithInvalidSurface(_ scenario: String) async throws {
        let (events, peer, _) = try await run(scenario)
        #expect(ending(events)?.code == .surfaceRejected, "\(events)")
        // Refused for its seals, not for anything else.
        #expect(ending(events)?.message?.contains("seal") == true, "\(events)")
        #expect(frames(events).isEmpty)
        #expect(
            await eventually { peer.output.contains("error code=\(WireErrorCode.invalidSurface.rawValue)") },
            "\(peer.output)"
        )
    }

    @Test func aSurfaceIdAnnouncedTwiceWhileLiveIsMalformed() async throws {
        let (events, peer, _) = try await run("reannounce")
        #expect(ending(events)?.code == .protocolViolation, "\(events)")
        #expect(
            await eventually { peer.output.contains("error code=\(WireErrorCode.malformedMessage.rawValue)") },
            "\(peer.output)"
        )
    }

    @Test func aFloodOfSurfacesIsCutOffAtTheLimit() async throws {
        let (events, peer, _) = try await run("surface-flood")
        #expect(ending(events)?.code == .surfaceRejected, "\(events)")
        #expect(ending(events)?.message?.contains("more than 256 surfaces") == true, "\(events)")
        #expect(
            await eventually { peer.output.contains("error code=\(WireErrorCode.invalidSurface.rawValue)") },
            "\(peer.output)"
        )
    }

    @Test func aPublisherThatNeverReadsOurReleasesIsDisconnectedWithBoundedMemory() async throws {
        let (events, peer, _) = try await run("never-read", delivery: .latestOnly, keepingFrames: false)
        let error = ending(events)
        #expect(error?.code == .protocolViolation, "\(events.suffix(3))")
        #expect(error?.message?.contains("stopped reading") == true, "\(String(describing: error))")
        #expect(await eventually { peer.output.contains("closed after") }, "\(peer.output)")
    }

    @Test func aPublisherThatSendsMoreFramesThanItGrantedIsCutOff() async throws {
        let path = temporaryBusPath("over-grant")
        let peer = try await startPeer(["hostile-publisher", path, "over-grant"])
        try #require(await eventually { peer.output.contains("listening") })
        // A queue deeper than the grant, so no frame is replaced (and released) before eight are held, however
        // slowly this consumer runs.
        let subscriber = try Subscriber(
            configuration: .init(path: path, acceptedFormats: [.yuv420BiPlanarVideoRange8], delivery: .queue(depth: 16))
        )
        defer { subscriber.cancel() }
        var kept: [SampleBuffer] = []  // a consumer that keeps every frame: its holding is what the grant bounds
        var ending: FrameBusError?
        for try await event in subscriber.events {
            switch event {
            case .frame(let frame): kept.append(frame)
            case .ended(let error): ending = error
            default: break
            }
        }
        // WELCOME granted 8: the subscriber held 8 and refused the ninth frame.
        #expect(kept.count == 8)
        #expect(ending?.code == .protocolViolation, "\(String(describing: ending))")
        #expect(ending?.message?.contains("maximumHeldFrames 8") == true, "\(String(describing: ending))")
        #expect(
            await eventually { peer.output.contains("error code=\(WireErrorCode.malformedMessage.rawValue)") },
            "\(peer.output)"
        )
    }

    @Test func aTinyCompressedSurfaceClaimingSixteenThousandPixelsSquareIsRefused() async throws {
        let (events, peer, _) = try await run("huge-compressed", accepting: [.compressedYUV420BiPlanarVideoRange8])
        #expect(frames(events).map(\.busSequenceNumber) == [0])
        #expect(ending(events)?.code == .surfaceRejected, "\(events)")
        #expect(
            await eventually { peer.output.contains("error code=\(WireErrorCode.invalidSurface.rawValue)") },
            "\(peer.output)"
        )
    }

    @Test func aSurfaceWithAMemfdPerPlaneArrivesWithEachPlanesBytes() async throws {
        let (events, peer, _) = try await run("multi-descriptor")
        #expect(peer.output.contains("with 2 descriptors"), "\(peer.output)")
        let frame = try #require(frames(events).first, "\(events)")
        let image = try #require(frame.imageBuffer)
        try image.lock(.readOnly)
        defer { try? image.unlock(.readOnly) }
        for (plane, expected) in [(0, UInt8(0x11)), (1, UInt8(0x22))] {
            let bytes = try image.withUnsafeBytes(ofPlane: plane) { Array($0) }
            #expect(!bytes.isEmpty && bytes.allSatisfy { $0 == expected }, "plane \(plane)")
        }
        #expect(ending(events)?.code == .endOfStream, "\(events)")
    }

    static let hasDMABufDevice =
        FileManager.default.fileExists(atPath: "/dev/dma_heap/system")
        || FileManager.default.fileExists(atPath: "/dev/udmabuf")

    @Test(
        .enabled(
            if: hasDMABufDevice || BusDeviceRequirement.requireAll,
            "needs /dev/dma_heap/system or /dev/udmabuf (both absent on this machine)"
        ),
        .timeLimit(.minutes(3))
    )
    func aDMABufSurfaceArrivesAndIsReadBetweenSyncs() async throws {
        let (events, peer, _) = try await run("dma-buf")
        let frame = try #require(frames(events).first, "\(events) \(peer.output)")
        let image = try #require(frame.imageBuffer)
        #expect(image.surface.backing == .dmaBuf(modifier: 0))
        try image.lock(.readOnly)  // DMA_BUF_IOCTL_SYNC start
        defer { try? image.unlock(.readOnly) }  // DMA_BUF_IOCTL_SYNC end
        for (plane, expected) in [(0, UInt8(0x11)), (1, UInt8(0x22))] {
            let bytes = try image.withUnsafeBytes(ofPlane: plane) { Array($0) }
            #expect(!bytes.isEmpty && bytes.allSatisfy { $0 == expected }, "plane \(plane)")
        }
    }

    @Test func aPlaneDescriptorSmallerThanItsByteCountIsRefused() async throws {
        let (events, peer, _) = try await run("multi-descriptor-short")
        #expect(frames(events).isEmpty)
        #expect(ending(events)?.code == .surfaceRejected, "\(events)")
        #expect(
            await eventually { peer.output.contains("error code=\(WireErrorCode.invalidSurface.rawValue)") },
            "\(peer.output)"
        )
    }

    @Test func memoryRewrittenWhileReadGivesWrongPixelsOrADecodeErrorNeverACrash() async throws {
        let path = temporaryBusPath("rewrite")
        let peer = try await startPeer(["hostile-publisher", path, "rewrite"])
        try #require(await eventually { peer.output.contains("listening") })
        let subscriber = try Subscriber(
            configuration: .init(path: path, acceptedFormats: [.compressedYUV420BiPlanarVideoRange8])
        )
        defer { subscriber.cancel() }
        let output = try PixelBuffer(width: 64, height: 48, pixelFormat: .yuv420BiPlanarVideoRange8)
        var decoded = 0
        var failed = 0
        var iterator = subscriber.frames.makeAsyncIterator()
        while let frame = try await { () async throws -> SampleBuffer? in
            do { return try await iterator.next() } catch {
                Issue.record("\(error); peer: \(peer.output)")
                return nil
            }
        }() {
            let image = try #require(frame.imageBuffer)
            do {
                try SurfaceCodec.decompress(image, into: output)
                decoded += 1
            } catch {
                failed += 1
            }
            if decoded + failed >= 50 { break }
        }
        #expect(decoded + failed >= 50)
        // The scribbler overwrote the codec's header, so some decodes must have been refused.
        #expect(failed > 0)
    }
}
