import Foundation
import Glibc
import Logging
import Synchronization
import Testing
import TestSupport

@testable import FrameBus

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

/// Publishes `count` frames one at a time, each once the subscriber process `pid` has released the one before (and
/// every frame it was sent is counted delivered): the pace is that subscriber's, whatever the machine's load, so what
/// the fairness tests assert is what the publisher did, not how fast a busy machine ran. Returns the failed buffer
/// requests (each retried after the next release, up to 100 times).
func publishInLockstep(
    _ count: Int,
    on publisher: Publisher,
    from pool: PixelBufferPool,
    subscriberProcess pid: Int32
) async throws -> Int {
    func record() -> SubscriberRecord? { publisher.statistics.subscribers.first { $0.processID == pid } }
    var failures = 0
    for index in 0..<count {
        var buffer: PixelBuffer?
        for _ in 0..<100 {
            buffer = try? publisher.makePixelBuffer(from: pool)
            if buffer != nil { break }
            failures += 1
            try await Task.sleep(for: .milliseconds(5))
        }
        let frame = try #require(buffer, "no buffer for frame \(index)")
        _ = try fillFrame(frame, index: index)
        try publisher.publish(frame)
        // After its last frame the subscriber process leaves (it counts its frames itself): then its record goes.
        let last = index == count - 1
        try #require(
            await eventually {
                record().map { $0.statistics.heldNow == 0 && $0.statistics.delivered > index } ?? last
            },
            "frame \(index) was not delivered and released: \(String(describing: record()))"
        )
    }
    return failures
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

    /// Item 5: a queue-64 hoarder and three latest-only hoarders that never release, and an honest subscriber, on a
    /// 12-buffer pool. The hoarders pin only their shares; the honest one gets every frame (published at its pace,
    /// so a rate on a loaded machine is not what is tested: `framebus bench` measures rates).
    @Test func hoardersCostOnlyThemselvesAcrossProcesses() async throws {
        let path = temporaryBusPath("hoard")
        var configuration = Publisher.Configuration(path: path, formats: [.yuv420BiPlanarVideoRange8])
        configuration.maximumSubscribers = 5  // a 12-buffer pool minus 2 for the producer: 2 frames each
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        let pool = try Self.pool(threshold: 12)
        let producer = PacedProducer(publisher: publisher, pool: pool, fps: 60)
        defer { producer.stop() }
        let hoarders = try await [
            startPeer(["bus-hoarder", path, "--queue", "64", "--timeout", "600"]),
            startPeer(["bus-hoarder", path, "--timeout", "600"]),
            startPeer(["bus-hoarder", path, "--timeout", "600", "--version", "1"]),
            startPeer(["bus-hoarder", path, "--timeout", "600"]),
        ]
        try #require(await eventually { publisher.subscriberCount == 4 })
        // Let them hoard everything they can before the honest one arrives.
        try #require(await eventually { publisher.heldFrameCount == 8 }, "held \(publisher.heldFrameCount)")
        producer.stop()
        let frames = 300
        let honest = try await startPeer(["bus-subscriber", path, "--frames", "\(frames)", "--timeout", "600"])
        try #require(await eventually { publisher.subscriberCount == 5 })
        let failures = try await publishInLockstep(
            frames,
            on: publisher,
            from: pool,
            subscriberProcess: honest.processIdentifier
        )
        #expect(await honest.waitForExit(timeout: 120))
        let stats = try #require(honest.records("stats").first, "\(honest.output)")
        #expect(Int(stats["delivered"] ?? "") == frames, "honest subscriber: \(stats)")
        #expect(producer.failures.load(ordering: .relaxed) == 0, "the producer always found a free buffer")
        #expect(failures == 0, "the producer always found a free buffer")
        #expect(publisher.heldFrameCount <= 10)
        for hoarder in hoarders {
            let last = hoarder.records("hoard").last
            #expect(Int(last?["frames"] ?? "") ?? 99 <= 2, "\(hoarder.output)")
            #expect(Int(last?["drops"] ?? "") ?? 0 > 0, "\(hoarder.output)")
        }
    }

    /// Item 6: thousands of connections that never say HELLO. Pending handshakes stay capped, each is closed
    /// after the timeout with a handful of log lines in all, and an honest subscriber gets every frame while the flood
    /// goes on (published at its pace: a rate on a loaded machine is `framebus bench`'s to measure, not a test's).
    @Test func aFloodOfSilentConnectionsDoesNotStallAnHonestSubscriber() async throws {
        let path = temporaryBusPath("flood")
        let logs = LogCounter()
        var configuration = Publisher.Configuration(
            path: path,
            formats: [.yuv420BiPlanarVideoRange8],
            logger: logs.logger
        )
        configuration.handshakeTimeout = .milliseconds(500)
        // The log lines counted are the flood's: system pressure, which a loaded machine changes at any time (and logs
        // on its own), is not measured here.
        configuration.systemPressurePolicy = nil
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        let pool = try Self.pool(threshold: 34)
        let frames = 300
        let honest = try await startPeer(["bus-subscriber", path, "--frames", "\(frames)", "--timeout", "600"])
        try #require(await eventually { publisher.subscriberCount == 1 })
        let flood = try await startPeer(["bus-flood", path, "--count", "3000", "--timeout", "30"])
        try #require(await eventually { publisher.pendingHandshakeCount > 0 }, "the flood did not start")
        // Sample the pending handshakes while the frames go out.
        let maximumPending = Atomic<Int>(0)
        let sampling = Task {
            while !Task.isCancelled {
                maximumPending.max(publisher.pendingHandshakeCount, ordering: .relaxed)
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        let failures = try await publishInLockstep(
            frames,
            on: publisher,
            from: pool,
            subscriberProcess: honest.processIdentifier
        )
        sampling.cancel()
        await sampling.value
        #expect(failures == 0)
        #expect(await honest.waitForExit(timeout: 120), "the honest subscriber did not finish: \(honest.output)")
        let stats = try #require(honest.records("stats").first, "\(honest.output)")
        #expect(Int(stats["delivered"] ?? "") == frames, "honest subscriber: \(stats)")
        #expect(maximumPending.load(ordering: .relaxed) <= 64)
        let opened = flood.records("flood").compactMap { Int($0["opened"] ?? "") }.max() ?? 0
        #expect(opened > 64, "the flood opened \(opened) connections: \(flood.output)")
        let lines = logs.lines.withLock { $0 }
        #expect(lines.count <= 4, "\(lines)")
    }
}
