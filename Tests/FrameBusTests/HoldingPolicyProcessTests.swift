import Foundation
import Glibc
import Testing
import TestSupport

@testable import FrameBus

/// The holding policy across processes (docs/PROTOCOL.md §7.3): what `framebus publish` grants by default, and
/// hoarders of a converted format against an honest subscriber of it.
@Suite(.timeLimit(.minutes(10))) struct HoldingPolicyProcessTests {
    /// Starts `framebus publish` with its defaults (a small pattern, so the machine's load does not matter).
    static func defaultPublisher(_ path: String, fps: Int) async throws -> ChildProcess {
        let publisher = try await startFramebus([
            "publish", "--path", path, "--format", "420v", "--size", "64x48", "--fps", "\(fps)", "--quiet",
        ])
        try #require(
            await eventually(timeout: 300) { FileManager.default.fileExists(atPath: path) },
            "framebus publish did not listen: \(publisher.output)"
        )
        return publisher
    }

    static func subscriber(_ path: String, delivery: Subscriber.Delivery) throws -> Subscriber {
        var configuration = Subscriber.Configuration(
            path: path,
            acceptedFormats: [.yuv420BiPlanarVideoRange8],
            delivery: delivery
        )
        configuration.connectTimeout = .seconds(120)
        return try Subscriber(configuration: configuration)
    }

    /// The recorder case: one `queue(depth: 16)` subscriber on a default `framebus publish` is granted 16 and
    /// holds a burst of 16 frames (none released yet) without a drop.
    @Test func aRecorderOnADefaultPublisherGetsSixteenAndABurstOfSixteenWithoutDrops() async throws {
        let path = temporarySocketPath("recorder")
        let publisher = try await Self.defaultPublisher(path, fps: 120)
        defer { publisher.send(SIGTERM) }
        let subscriber = try Self.subscriber(path, delivery: .queue(depth: 16))
        defer { subscriber.cancel() }
        var kept: [SampleBuffer] = []
        var drops: [SubscriberDrop] = []
        for try await event in subscriber.events {
            switch event {
            case .connected(let session):
                #expect(session.grantedQueueDepth == 16)
                #expect(session.maximumHeldFrames >= 16)
            case .frame(let sample): kept.append(sample)
            case .dropped(let drop): drops.append(drop)
            case .ended(let error): Issue.record("ended: \(error)")
            case .reconnected: Issue.record("reconnected")
            case .systemPressureChanged: break
            }
            if kept.count == 16 || !drops.isEmpty { break }
        }
        #expect(drops.isEmpty, "\(drops)")
        let sequences = kept.compactMap(\.busSequenceNumber)
        #expect(sequences.count == 16)
        if let first = sequences.first { #expect(sequences == Array(first..<first + 16)) }
        // The 16 kept, and frames waiting behind them up to the grant (queue mode discards none of them).
        let held = subscriber.statistics.heldNow
        #expect(held >= 16 && held <= (subscriber.session?.maximumHeldFrames ?? 0), "held \(held)")
    }

    /// `framebus subscribe --queue 16` says what it asked for and what it got.
    @Test func framebusSubscribePrintsTheRequestedAndTheGrantedDepth() async throws {
        let path = temporarySocketPath("granted")
        let publisher = try await Self.defaultPublisher(path, fps: 30)
        defer { publisher.send(SIGTERM) }
        let (status, output) = try await runToEnd(
            try TestLocations.executable("framebus"),
            ["subscribe", "--path", path, "--queue", "16", "--duration", "1"],
            timeout: 300
        )
        #expect(status == 0, "\(output)")
        #expect(output.contains("queue 16 requested, 16 granted"), "\(output)")
    }

    /// A busy latest-only consumer (one frame in its hands, one waiting) has newer frames replace the waiting one
    /// (`frameWasLate`), instead of getting `outOfBuffers` and the stale waiting frame.
    @Test func aBusyLatestOnlySubscriberHasItsWaitingFrameReplaced() async throws {
        let path = temporarySocketPath("latest")
        let publisher = try await Self.defaultPublisher(path, fps: 60)
        defer { publisher.send(SIGTERM) }
        let subscriber = try Self.subscriber(path, delivery: .latestOnly)
        defer { subscriber.cancel() }
        var iterator = subscriber.frames.makeAsyncIterator()
        let inHand = try #require(try await iterator.next())
        let replacedBefore = subscriber.statistics.dropped[.frameWasLate] ?? 0
        #expect(try #require(subscriber.session).maximumHeldFrames >= 3)
        // The consumer works on `inHand` and takes nothing: newer frames must replace the waiting one (twice here,
        // so the one waiting now is at least 3 frames newer).
        try #require(
            await eventually(timeout: 300) {
                (subscriber.statistics.dropped[.frameWasLate] ?? 0) >= replacedBefore + 2
            },
            "no waiting frame was replaced: \(subscriber.statistics)"
        )
        let next = try #require(try await iterator.next())
        let first = try #require(inHand.busSequenceNumber)
        #expect(try #require(next.busSequenceNumber) > first + 2)
        withExtendedLifetime(inHand) {}
    }

    /// Eight subscribers of the compressed variant that never release, each within its grant, and an honest one of
    /// the same format: the honest one gets every frame (published at its pace; PROTOCOL.md §7.3's "a hoarder costs
    /// only itself", for a converted format too).
    @Test func hoardersOfAConvertedFormatCostOnlyThemselves() async throws {
        let path = temporarySocketPath("convhoard")
        var configuration = Publisher.Configuration(
            path: path,
            formats: [.yuv420BiPlanarVideoRange8, .compressedYUV420BiPlanarVideoRange8]
        )
        configuration.maximumSubscribers = 16
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        // `framebus publish`'s default pool.
        let pool = try PublisherFairnessTests.pool(threshold: 2 + 3 * 16 + 16)
        let producer = PacedProducer(publisher: publisher, pool: pool, fps: 60)
        defer { producer.stop() }
        var hoarders: [ChildProcess] = []
        for _ in 0..<8 { hoarders.append(try await startPeer(["bus-hoarder", path, "--accept", "&8v0", "--timeout", "600"])) }
        try #require(await eventually(timeout: 300) { publisher.subscriberCount == 8 })
        // Let them hoard everything they can before the honest one arrives.
        try #require(
            await eventually(timeout: 300) { publisher.heldFrameCount == 8 * 3 },  // latest-only: 3 each
            "held \(publisher.heldFrameCount)"
        )
        producer.stop()
        let frames = 100
        let honest = try await startPeer([
            "bus-subscriber", path, "--accept", "&8v0", "--frames", "\(frames)", "--timeout", "600",
        ])
        try #require(await eventually(timeout: 300) { publisher.subscriberCount == 9 })
        let failures = try await publishInLockstep(
            frames,
            on: publisher,
            from: pool,
            subscriberProcess: honest.processIdentifier
        )
        #expect(await honest.waitForExit(timeout: 120))
        let stats = try #require(honest.records("stats").first, "\(honest.output)")
        #expect(Int(stats["delivered"] ?? "") == frames, "honest subscriber: \(stats)")
        #expect(Int(stats["outOfBuffers"] ?? "") == 0, "honest subscriber: \(stats)")
        #expect(failures == 0)
        #expect(publisher.statistics.conversions >= frames)
        for hoarder in hoarders {
            let last = hoarder.records("hoard").last
            #expect(Int(last?["frames"] ?? "") ?? 99 <= 3, "\(hoarder.output)")
        }
    }
}
