import Foundation
import TestSupport
import Testing

@testable import FrameBus

/// Encoding for compressed subscribers never holds the producer or its raw subscribers back (issue 26 item 2): real
/// subscriber processes, the conversion worker held still to stand for an encoder slower than any frame interval.
@Suite(.timeLimit(.minutes(10))) struct ConversionWorkerProcessTests {
    static let frames = 24

    /// The worker is held while the producer publishes every frame in lockstep with its raw subscriber: the raw
    /// subscriber gets every sequence, the producer never waits, and the compressed subscriber, once the worker goes
    /// on, gets the newest frame and a DROP for every frame the worker skipped (delivered + dropped = published).
    @Test func aStalledEncoderCostsOnlyTheCompressedSubscriber() async throws {
        let path = temporaryBusPath("stalled")
        let publisher = try Publisher(
            configuration: .init(
                path: path,
                formats: [.yuv420BiPlanarVideoRange8, .compressedYUV420BiPlanarVideoRange8]
            )
        )
        defer { publisher.stop() }
        let frames = Self.frames
        let raw = try await startPeer(["bus-subscriber", path, "--accept", "420v", "--frames", "\(frames)"])
        let compressed = try await startPeer([
            "bus-subscriber", path, "--accept", "&8v0", "--frames", "\(frames)", "--checksum",
        ])
        // One that predates STATUS: the same frames shed, as outOfBuffers.
        let older = try await startPeer([
            "bus-subscriber", path, "--accept", "&8v0", "--frames", "\(frames)", "--no-status",
        ])
        try #require(await eventually { publisher.subscriberCount == 3 }, "subscribers did not connect")
        let rawID = try #require(publisher.statistics.subscribers.first { $0.processID == raw.processIdentifier }?.id)

        publisher.core.conversionWorker.pause()
        let pool = try PublisherFairnessTests.pool(threshold: 2 + 3 * 16 + 16)
        var hashes: [UInt64: UInt64] = [:]
        for index in 0..<frames {
            let buffer = try publisher.makePixelBuffer(from: pool)
            let hash = try fillFrame(buffer, index: index)
            let sequence = try publisher.publish(buffer)
            hashes[sequence] = hash
            // The raw subscriber has this frame (and released it) before the next is published, encoder or not. After
            // its last frame it leaves (it counts its frames itself), and its record goes.
            let last = index == frames - 1
            try #require(
                await eventually {
                    publisher.statistics.subscribers.first { $0.id == rawID }.map {
                        $0.statistics.delivered > index && $0.statistics.heldNow == 0
                    } ?? last
                },
                "raw frame \(index) was not delivered while the encoder was stalled"
            )
        }
        #expect(compressed.records("frame").isEmpty, "nothing was encoded while the worker was held")
        publisher.core.conversionWorker.resume()
        #expect(await raw.waitForExit(timeout: 120), "\(raw.output)")
        #expect(await compressed.waitForExit(timeout: 120), "\(compressed.output)")
        #expect(await older.waitForExit(timeout: 120), "\(older.output)")
        #expect(!older.records("drop").isEmpty && older.records("drop").allSatisfy { $0["reason"] == "OutOfBuffers" })

        let rawSequences = raw.records("frame").compactMap { UInt64($0["seq"] ?? "") }
        #expect(rawSequences == (0..<UInt64(frames)).map { $0 }, "\(raw.output)")
        #expect(raw.records("drop").isEmpty, "\(raw.output)")

        // The compressed subscriber: the newest frame, and DROPs for every frame the worker skipped, each sequence once;
        // bit-exact where delivered.
        let delivered = compressed.records("frame")
        let drops = compressed.records("drop")
        #expect(!delivered.isEmpty && !drops.isEmpty, "\(compressed.output)")
        for frame in delivered {
            let sequence = UInt64(frame["seq"] ?? "") ?? .max
            #expect(frame["hash"] == hashes[sequence].map { String($0, radix: 16) }, "frame \(sequence)")
        }
        var covered = Set(delivered.compactMap { UInt64($0["seq"] ?? "") })
        for drop in drops {
            let first = try #require(UInt64(drop["first"] ?? ""))
            let last = try #require(UInt64(drop["last"] ?? ""))
            #expect(drop["reason"] == "WorkFellBehind", "\(drop)")
            for sequence in first...last { #expect(covered.insert(sequence).inserted, "sequence \(sequence) twice") }
        }
        #expect(covered == Set(0..<UInt64(frames)), "\(compressed.output)")
        #expect(delivered.last.flatMap { UInt64($0["seq"] ?? "") } == UInt64(frames - 1), "the newest frame")

        // The producer learns it: frames shed, and a cost that says so.
        #expect(publisher.cost.framesShed == UInt64(frames - delivered.count), "\(publisher.cost)")
    }

    /// A loss the producer reports while the worker still has an earlier frame reaches the compressed subscriber after
    /// that frame, as PROTOCOL.md §4.2 orders it.
    @Test func aReportedLossWaitsBehindTheFramesTheWorkerHas() async throws {
        let path = temporaryBusPath("lossorder")
        let publisher = try Publisher(
            configuration: .init(
                path: path,
                formats: [.yuv420BiPlanarVideoRange8, .compressedYUV420BiPlanarVideoRange8]
            )
        )
        defer { publisher.stop() }
        let compressed = try await startPeer([
            "bus-subscriber", path, "--accept", "&8v0", "--queue", "4", "--frames", "4",
        ])
        try #require(await eventually { publisher.subscriberCount == 1 }, "subscriber did not connect")
        let pool = try PublisherFairnessTests.pool(threshold: 2 + 3 * 16 + 16)
        publisher.core.conversionWorker.pause()
        let buffer = try publisher.makePixelBuffer(from: pool)
        _ = try fillFrame(buffer, index: 0)
        #expect(try publisher.publish(buffer) == 0)
        #expect(publisher.reportDroppedFrames(reason: .discontinuity, count: 2) == 1...2)
        let next = try publisher.makePixelBuffer(from: pool)
        _ = try fillFrame(next, index: 3)
        #expect(try publisher.publish(next) == 3)
        publisher.core.conversionWorker.resume()
        #expect(await compressed.waitForExit(timeout: 120), "\(compressed.output)")
        let lines = compressed.output.split(separator: "\n").filter { $0.hasPrefix("frame ") || $0.hasPrefix("drop ") }
        #expect(lines.count == 3, "\(compressed.output)")
        #expect(lines.first?.hasPrefix("frame seq=0 ") == true, "\(compressed.output)")
        #expect(
            lines.dropFirst().first?.hasPrefix("drop reason=Discontinuity first=1 last=2") == true,
            "\(compressed.output)"
        )
        #expect(lines.last?.hasPrefix("frame seq=3 ") == true, "\(compressed.output)")
    }

    /// A publisher stopped while its conversion worker still had frames tells their subscribers with DROPs before
    /// END_OF_STREAM: every sequence number is accounted for.
    @Test func stoppingShedsWhatTheWorkerStillHadBeforeTheEnd() async throws {
        let path = temporaryBusPath("stopshed")
        let publisher = try Publisher(
            configuration: .init(
                path: path,
                formats: [.yuv420BiPlanarVideoRange8, .compressedYUV420BiPlanarVideoRange8]
            )
        )
        let compressed = try await startPeer(["bus-subscriber", path, "--accept", "&8v0", "--queue", "4"])
        try #require(await eventually { publisher.subscriberCount == 1 }, "subscriber did not connect")
        let pool = try PublisherFairnessTests.pool(threshold: 16)
        publisher.core.conversionWorker.pause()
        for index in 0..<3 {
            let buffer = try publisher.makePixelBuffer(from: pool)
            _ = try fillFrame(buffer, index: index)
            try publisher.publish(buffer)
        }
        publisher.stop()
        #expect(await compressed.waitForExit(timeout: 120), "\(compressed.output)")
        let drops = compressed.records("drop")
        let covered = drops.reduce(into: Set<UInt64>()) { set, drop in
            if let first = UInt64(drop["first"] ?? ""), let last = UInt64(drop["last"] ?? ""), first <= last {
                set.formUnion(first...last)
            }
        }
        #expect(covered == [0, 1, 2], "\(compressed.output)")
        #expect(compressed.records("frame").isEmpty, "\(compressed.output)")
        // The DROPs came before the end of the stream.
        let output = compressed.output
        let lastDrop = try #require(output.range(of: "drop ", options: .backwards))
        let end = try #require(output.range(of: "end code="), "\(output)")
        #expect(lastDrop.lowerBound < end.lowerBound, "\(output)")
    }
}
