import Foundation
import Glibc
import Logging
import Synchronization
import Testing
import TestSupport

@testable @_spi(Testing) import FrameBus

/// Counts log lines (thread-safe), for checking that a flood writes few.
final class LogCounter: Sendable {
    let lines = Mutex<[String]>([])

    struct Handler: LogHandler {
        let counter: LogCounter
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            counter.lines.withLock { $0.append("\(event.level) \(event.message)") }
        }
    }

    var logger: Logger { Logger(label: "test.publisher") { _ in Handler(counter: self) } }
}

/// A producer thread publishing at `fps` from `pool` until stopped; counts failed buffer requests.
final class PacedProducer: Sendable {
    let running = Atomic<Bool>(true)
    let failures = Atomic<Int>(0)
    let published = Atomic<Int>(0)

    init(publisher: Publisher, pool: PixelBufferPool, fps: Double) {
        let thread = Thread { [self] in
            let interval = 1.0 / fps
            var next = Date()
            var index = 0
            while running.load(ordering: .relaxed) {
                if let buffer = try? publisher.makePixelBuffer(from: pool) {
                    _ = try? fillFrame(buffer, index: index)
                    if (try? publisher.publish(buffer)) != nil { published.add(1, ordering: .relaxed) }
                } else {
                    failures.add(1, ordering: .relaxed)
                }
                index += 1
                next = next.addingTimeInterval(interval)
                let wait = next.timeIntervalSinceNow
                if wait > 0 { usleep(UInt32(wait * 1e6)) } else { next = Date() }
            }
        }
        thread.start()
    }

    func stop() { running.store(false, ordering: .relaxed) }
}

@Suite(.timeLimit(.minutes(10))) struct PublisherFairnessTests {
    static func pool(threshold: Int) throws -> PixelBufferPool {
        try PixelBufferPool(
            attributes: .init(
                width: 64,
                height: 48,
                pixelFormat: .yuv420BiPlanarVideoRange8,
                allocationThreshold: threshold
            )
        )
    }

    /// Item 5: a queue-64 hoarder and three latest-only hoarders that never release, and an honest subscriber at
    /// 60 fps, on a 12-buffer pool. The hoarders pin only their shares; the honest one gets ≥ 95 % of its frames.
    @Test func hoardersCostOnlyThemselvesAcrossProcesses() async throws {
        let path = temporaryBusPath("hoard")
        var configuration = Publisher.Configuration(path: path, formats: [.yuv420BiPlanarVideoRange8])
        configuration.maximumSubscribers = 5  // a 12-buffer pool minus 2 for the producer: 2 frames each
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        let pool = try Self.pool(threshold: 12)
        let producer = PacedProducer(publisher: publisher, pool: pool, fps: 60)
        defer { producer.stop() }
        let hoarders = try [
            startPeer(["bus-hoarder", path, "--queue", "64", "--timeout", "600"]),
            startPeer(["bus-hoarder", path, "--timeout", "600"]),
            startPeer(["bus-hoarder", path, "--timeout", "600", "--version", "1"]),
            startPeer(["bus-hoarder", path, "--timeout", "600"]),
        ]
        try #require(await eventually { publisher.subscriberCount == 4 })
        // Let them hoard everything they can before the honest one arrives.
        try #require(await eventually { publisher.heldFrameCount == 8 }, "held \(publisher.heldFrameCount)")
        let frames = 300
        let honest = try startPeer(["bus-subscriber", path, "--frames", "\(frames)", "--timeout", "600"])
        #expect(await honest.waitForExit(timeout: 60))
        producer.stop()
        let stats = try #require(honest.records("stats").first, "\(honest.output)")
        let delivered = Int(stats["delivered"] ?? "") ?? 0
        #expect(delivered * 100 >= frames * 95, "honest subscriber: \(stats)")
        #expect(producer.failures.load(ordering: .relaxed) == 0, "the producer always found a free buffer")
        #expect(publisher.heldFrameCount <= 10)
        for hoarder in hoarders {
            let last = hoarder.records("hoard").last
            #expect(Int(last?["frames"] ?? "") ?? 99 <= 2, "\(hoarder.output)")
            #expect(Int(last?["drops"] ?? "") ?? 0 > 0, "\(hoarder.output)")
        }
    }

    /// Item 6: thousands of connections that never say HELLO. Pending handshakes stay capped, each is closed
    /// after the timeout with a handful of log lines in all, and an honest subscriber keeps its frame rate.
    @Test func aFloodOfSilentConnectionsDoesNotStallAnHonestSubscriber() async throws {
        let path = temporaryBusPath("flood")
        let logs = LogCounter()
        var configuration = Publisher.Configuration(
            path: path,
            formats: [.yuv420BiPlanarVideoRange8],
            logger: logs.logger
        )
        configuration.handshakeTimeout = .milliseconds(500)
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        let pool = try Self.pool(threshold: 34)
        let frames = 300
        let honest = try startPeer(["bus-subscriber", path, "--frames", "\(frames)", "--timeout", "600"])
        try #require(await eventually { publisher.subscriberCount == 1 })
        let flood = try startPeer(["bus-flood", path, "--count", "3000", "--timeout", "30"])
        try #require(await eventually { publisher.pendingHandshakeCount > 0 }, "the flood did not start")
        let producer = PacedProducer(publisher: publisher, pool: pool, fps: 60)
        defer { producer.stop() }
        var maximumPending = 0
        // Sample the pending handshakes until the honest subscriber is done (it exits at its --timeout at the latest).
        let sampling = ContinuousClock.now + .seconds(180)
        while !honest.hasExited, ContinuousClock.now < sampling {
            maximumPending = max(maximumPending, publisher.pendingHandshakeCount)
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(honest.hasExited, "the honest subscriber did not finish: \(honest.output)")
        producer.stop()
        let stats = try #require(honest.records("stats").first, "\(honest.output)")
        #expect((Int(stats["delivered"] ?? "") ?? 0) * 100 >= frames * 95, "honest subscriber: \(stats)")
        #expect(maximumPending <= 64)
        let opened = flood.records("flood").compactMap { Int($0["opened"] ?? "") }.max() ?? 0
        #expect(opened > 64, "the flood opened \(opened) connections: \(flood.output)")
        let lines = logs.lines.withLock { $0 }
        #expect(lines.count <= 4, "\(lines)")
    }
}
