import Foundation
import Synchronization
import TestSupport
import Testing

@testable import FrameBus

/// Deferred start and a waiting subscriber with real processes (the test peer) and real sockets: what a deferred
/// subscriber receives and when, what the producer is told, and that no work is done for it before its start.
@Suite(.timeLimit(.minutes(5))) struct DeferredStartProcessTests {
    static let size = (width: 64, height: 48)

    func makePool() throws -> PixelBufferPool {
        try PixelBufferPool(
            attributes: .init(
                width: Self.size.width,
                height: Self.size.height,
                pixelFormat: .yuv420BiPlanarVideoRange8,
                allocationThreshold: 16
            )
        )
    }

    /// Publishes one frame (a pattern that compresses: every frame is encoded for real).
    @discardableResult
    func publishOne(_ publisher: Publisher, _ pool: PixelBufferPool, index: Int) throws -> UInt64 {
        let buffer = try publisher.makePixelBuffer(from: pool)
        _ = try fillFrame(buffer, index: index)
        return try publisher.publish(buffer)
    }

    /// Publishes one frame and waits until each of `receivers` has it and released it (so that holding limits play no
    /// part here).
    func publish(
        _ publisher: Publisher,
        _ pool: PixelBufferPool,
        index: Int,
        receivers: [ChildProcess]
    ) async throws {
        let sequence = try publishOne(publisher, pool, index: index)
        for receiver in receivers {
            try #require(
                await receiver.waitForOutput("frame seq=\(sequence) ", timeout: 60),
                "frame \(sequence): \(receiver.output)"
            )
        }
        // Released everywhere before the next one (a frame still held could make the next a DROP `outOfBuffers`).
        try #require(await eventually(timeout: 60) { publisher.heldFrameCount == 0 })
    }

    /// What the producer heard, in order.
    final class Heard: Sendable {
        let events = Mutex<[Publisher.DeferredStart]>([])
        func record(_ event: Publisher.DeferredStart) { events.withLock { $0.append(event) } }
        var all: [Publisher.DeferredStart] { events.withLock { $0 } }
    }

    @Test func manualDeferredStartWaitsForTheProducerAndNothingIsEncodedBeforeIt() async throws {
        let path = temporaryBusPath("defer-manual")
        let heard = Heard()
        var configuration = Publisher.Configuration(
            path: path,
            formats: [.yuv420BiPlanarVideoRange8, .compressedYUV420BiPlanarVideoRange8]
        )
        configuration.automaticallyRunsDeferredStart = false
        configuration.deferredStartHandler = { heard.record($0) }
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        let pool = try makePool()
        let recorder = try await startPeer([
            "bus-subscriber", path, "--accept", "&8v0", "--queue", "8", "--deferred", "--frames", "3",
        ])
        try #require(await recorder.waitForOutput("welcome format=&8v0"), "\(recorder.output)")
        try #require(await eventually { publisher.subscriberCount == 1 })
        // It is connected, but while it waits nothing is encoded or sent for it.
        for index in 0..<5 { try publishOne(publisher, pool, index: index) }
        #expect(publisher.statistics.conversions == 0)
        #expect(publisher.statistics.subscribers.first?.statistics.delivered == 0)
        #expect(heard.all.isEmpty)
        publisher.runDeferredStartWhenNeeded()
        for index in 5..<8 { try await publish(publisher, pool, index: index, receivers: [recorder]) }
        #expect(await recorder.waitForExit(timeout: 120), "\(recorder.output)")
        let sequences = recorder.records("frame").compactMap { UInt64($0["seq"] ?? "") }
        #expect(sequences == [5, 6, 7], "\(recorder.output)")
        #expect(publisher.statistics.conversions == 3)
        #expect(heard.all == [.willRun(subscriberCount: 1), .didRun(subscriberCount: 1)])
    }

    @Test func aDeferredSubscriberStartsAfterThePreviewHasItsFirstFrame() async throws {
        let path = temporaryBusPath("defer-auto")
        let heard = Heard()
        var configuration = Publisher.Configuration(
            path: path,
            formats: [.yuv420BiPlanarVideoRange8, .compressedYUV420BiPlanarVideoRange8]
        )
        configuration.deferredStartHandler = { heard.record($0) }
        // Long enough never to be what starts it here.
        configuration.deferredStartTimeout = .seconds(600)
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        let pool = try makePool()
        let recorder = try await startPeer([
            "bus-subscriber", path, "--accept", "&8v0", "--queue", "8", "--deferred", "--frames", "2",
        ])
        try #require(await recorder.waitForOutput("welcome format=&8v0"), "\(recorder.output)")
        // No preview yet: a frame published now is the recorder's only with the timeout, which is far off.
        try publishOne(publisher, pool, index: 0)
        // The preview is a subscriber that knows nothing of deferral: it is served from its first frame.
        let preview = try await startPeer(["bus-subscriber", path, "--queue", "8", "--frames", "3"])
        try #require(await preview.waitForOutput("welcome format=420v"), "\(preview.output)")
        try #require(await eventually { publisher.subscriberCount == 2 })
        try await publish(publisher, pool, index: 1, receivers: [preview])
        for index in 2..<4 { try await publish(publisher, pool, index: index, receivers: [preview, recorder]) }
        #expect(await preview.waitForExit(timeout: 120), "\(preview.output)")
        #expect(await recorder.waitForExit(timeout: 120), "\(recorder.output)")
        let previewSequences = preview.records("frame").compactMap { UInt64($0["seq"] ?? "") }
        let recorderSequences = recorder.records("frame").compactMap { UInt64($0["seq"] ?? "") }
        #expect(previewSequences == [1, 2, 3], "\(preview.output)")
        #expect(recorderSequences == [2, 3], "\(recorder.output)")
        #expect(recorder.records("drop").isEmpty, "\(recorder.output)")
        #expect(heard.all == [.willRun(subscriberCount: 1), .didRun(subscriberCount: 1)])
    }

    /// With a reconnect interval far longer than the test's limit, only the directory watch can bring the waiting
    /// subscriber to a publisher that appears after it.
    @Test func aWaitingSubscriberConnectsAsSoonAsItsPublisherAppears() async throws {
        let path = temporaryBusPath("watch")
        var subscriberConfiguration = Subscriber.Configuration(
            path: path,
            acceptedFormats: [.yuv420BiPlanarVideoRange8]
        )
        subscriberConfiguration.connectTimeout = .seconds(600)
        subscriberConfiguration.reconnectInterval = .seconds(300)
        let subscriber = try Subscriber(configuration: subscriberConfiguration)
        defer { subscriber.cancel() }
        // Its first attempt failed and it waits (the connection thread is idle: the path does not exist).
        try #require(!FileManager.default.fileExists(atPath: path))
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        defer { publisher.stop() }
        #expect(await eventually(timeout: 60) { publisher.subscriberCount == 1 })
    }
}
