import Foundation
import Testing
import TestSupport

/// The C ABI from C: programs in Tests/CABI compiled with `cc` against include/framebus.h and libFrameBusC.so,
/// run as separate processes on one socket. Serialized: each test starts several processes, and the cross-process
/// tests of other suites run beside them on a machine that may be loaded.
@Suite(.serialized, .timeLimit(.minutes(15))) struct CABITests {
    /// What a C subscriber saw, from its output.
    struct SubscriberReport {
        var frames: [[String: String]]
        var drops: [(reason: Int, first: UInt64, last: UInt64, count: UInt64)]
        var end: String?
        var closed: Bool
        var statistics: [String: String]

        init(_ run: ChildProcess) {
            frames = run.records("frame")
            drops = run.records("drop").map { fields in
                (
                    Int(fields["reason"] ?? "") ?? -1, UInt64(fields["first"] ?? "") ?? .max,
                    UInt64(fields["last"] ?? "") ?? .max, UInt64(fields["count"] ?? "") ?? 0
                )
            }
            end = run.records("end").first?["status"]
            closed = !run.records("closed").isEmpty
            statistics = run.records("stats").first ?? [:]
        }

        /// Whether frames and drop ranges together account for every sequence number in 0...last exactly once.
        func accountsForEverySequence(through last: UInt64) -> Bool {
            var seen = [Int](repeating: 0, count: Int(last) + 1)
            for frame in frames {
                guard let sequence = UInt64(frame["seq"] ?? ""), sequence <= last else { return false }
                seen[Int(sequence)] += 1
            }
            for drop in drops {
                guard drop.first <= drop.last, drop.last <= last else { return false }
                for sequence in drop.first...drop.last { seen[Int(sequence)] += 1 }
            }
            return seen.allSatisfy { $0 == 1 }
        }
    }

    /// What the C publisher did: hash per frame index, the sequence of each, the discontinuity it reported.
    struct PublisherReport {
        var hashes: [UInt64: String] = [:]
        var sequences: [UInt64: UInt64] = [:]
        var reported: (first: UInt64, last: UInt64)?
        var lastSequence: UInt64 = 0

        init(_ run: ChildProcess) {
            for fields in run.records("published") {
                guard let index = UInt64(fields["k"] ?? ""), let sequence = UInt64(fields["seq"] ?? "") else {
                    continue
                }
                hashes[index] = fields["hash"]
                sequences[index] = sequence
            }
            if let fields = run.records("reported").first, let first = UInt64(fields["first"] ?? ""),
                let last = UInt64(fields["last"] ?? "")
            {
                reported = (first, last)
            }
            if let published = run.records("stats").first?["published"].flatMap({ UInt64($0) }), published > 0 {
                lastSequence = published - 1
            }
        }
    }

    @Test(arguments: [("420v", "&8v0"), ("BGRA", "&BGA"), ("x420", "&xv0")])
    func aCPublisherReachesCSubscribersBitExactRawAndCompressed(raw: String, compressed: String) async throws {
        let scratch = try ScratchDirectory()
        let publisherProgram = try await CProgram.build("publisher")
        let subscriberProgram = try await CProgram.build("subscriber")
        let path = scratch.path("bus.sock")
        let frames = 20

        let publisher = try await publisherProgram.start([path, raw, "96", "64", "\(frames)", "2", "5000"], in: scratch)
        #expect(await publisher.waitForOutput("listening", timeout: 60), "publisher: \(publisher.output)")
        // The raw subscriber releases its frames on a second thread while it goes on receiving.
        let rawSubscriber = try await subscriberProgram.start([path, raw, "8", "0", "async"], in: scratch)
        // The compressed one's waiting thread asks for a short scheduler slice (fb_subscriber_options.wait_slice_us).
        let compressedSubscriber = try await subscriberProgram.start([path, compressed, "8", "0", "slice"], in: scratch)

        #expect(try await publisher.exitStatus(within: 300) == 0, "publisher: \(publisher.output)")
        #expect(try await rawSubscriber.exitStatus(within: 300) == 0, "raw subscriber: \(rawSubscriber.output)")
        #expect(
            try await compressedSubscriber.exitStatus(within: 300) == 0,
            "compressed subscriber: \(compressedSubscriber.output)"
        )

        let published = PublisherReport(publisher)
        #expect(!published.hashes.isEmpty)
        let reported = try #require(published.reported, "publisher: \(publisher.output)")
        for (subscriber, format) in [(rawSubscriber, raw), (compressedSubscriber, compressed)] {
            let report = SubscriberReport(subscriber)
            #expect(subscriber.output.contains("connected format=\(format) "), "\(subscriber.output)")
            // fb_session.granted_queue_depth: what the holding policy granted of the queue of 8 asked for.
            let connected = subscriber.records("connected").first
            let granted = try #require(connected?["granted"].flatMap { Int($0) }, "\(subscriber.output)")
            let held = try #require(connected?["max_held"].flatMap { Int($0) }, "\(subscriber.output)")
            #expect((1...min(8, held)).contains(granted), "\(subscriber.output)")
            #expect(!report.frames.isEmpty)
            for frame in report.frames {
                let index = try #require(frame["k"].flatMap { UInt64($0) })
                // Bit-exact: every byte matched the pattern, and the subscriber's hash of what it read is the
                // publisher's hash of what it wrote.
                #expect(frame["ok"] == "1" && frame["fd"] == "1" && frame["bands"] == "1", "\(frame)")
                #expect(frame["hash"] == published.hashes[index], "frame \(index) of \(format)")
                #expect(frame["seq"].flatMap { UInt64($0) } == published.sequences[index])
                #expect(frame["color"] == "1,1,1,1")
                #expect(frame["pts_ns"] == String((Int64(index) * 1_000_000_000 + 15) / 30))
                #expect(frame["duration_ns"] == "33333333")
            }
            // The upstream loss arrives as a discontinuity drop of exactly the reported range, and the next frame
            // that arrives carries the discontinuity flag.
            #expect(
                report.drops.contains { $0.reason == 3 && $0.first == reported.first && $0.last == reported.last },
                "\(subscriber.output)"
            )
            if let next = report.frames.first(where: { UInt64($0["seq"] ?? "")! > reported.last }),
                next["seq"].flatMap({ UInt64($0) }) == reported.last + 1
            {
                #expect(next["disc"] == "1")
            }
            #expect(report.accountsForEverySequence(through: published.lastSequence), "\(subscriber.output)")
            #expect(report.end == "FB_ERROR_END_OF_STREAM")
            #expect(report.closed)
            #expect(report.statistics["held"] == "0")
        }
    }

    @Test func framesASubscriberHoldsMakeOutOfBuffersDropsWithTheirRanges() async throws {
        let scratch = try ScratchDirectory()
        let publisherProgram = try await CProgram.build("publisher")
        let subscriberProgram = try await CProgram.build("subscriber")
        let path = scratch.path("bus.sock")

        let publisher = try await publisherProgram.start([path, "420v", "64", "48", "30", "1", "5000"], in: scratch)
        #expect(await publisher.waitForOutput("listening", timeout: 60), "publisher: \(publisher.output)")
        // Latest-only, and it holds every frame until the stream ends (then releases them from another thread).
        let subscriber = try await subscriberProgram.start([path, "420v", "0", "1000"], in: scratch)
        #expect(try await publisher.exitStatus(within: 300) == 0, "publisher: \(publisher.output)")
        #expect(try await subscriber.exitStatus(within: 300) == 0, "subscriber: \(subscriber.output)")

        let published = PublisherReport(publisher)
        let report = SubscriberReport(subscriber)
        let maximumHeld = try #require(subscriber.records("connected").first?["max_held"].flatMap { Int($0) })
        // It holds exactly what the publisher granted in its WELCOME: the limit counts the pool from the start.
        #expect(report.frames.count == maximumHeld, "\(subscriber.output)")
        // The defaults (18 buffers, 4 subscribers): a latest-only subscriber wants 1 + 4 and the budget of 16 has
        // them after keeping 3 for each of the 3 still to come.
        #expect(maximumHeld == 5, "\(subscriber.output)")
        #expect(subscriber.records("connected").first?["granted"] == "1", "latest-only: \(subscriber.output)")
        #expect(report.frames.allSatisfy { $0["ok"] == "1" })
        let outOfBuffers = report.drops.filter { $0.reason == 2 }
        #expect(!outOfBuffers.isEmpty, "\(subscriber.output)")
        #expect(outOfBuffers.allSatisfy { $0.count == $0.last - $0.first + 1 })
        #expect(report.accountsForEverySequence(through: published.lastSequence), "\(subscriber.output)")
        #expect(report.end == "FB_ERROR_END_OF_STREAM")
        #expect(report.closed)
        #expect(report.statistics["held"] == "0")
        #expect(report.statistics["out"].flatMap { UInt64($0) } == outOfBuffers.reduce(0) { $0 + $1.count })
    }

    @Test(arguments: [(130, 66), (64, 64), (2, 2)])
    func theCodecRoundTripsEveryFormatBitExactFromC(width: Int, height: Int) async throws {
        let scratch = try ScratchDirectory()
        let program = try await CProgram.build("codec")
        let run = try await program.start(["\(width)", "\(height)"], in: scratch)
        #expect(try await run.exitStatus(within: 300) == 0, "\(run.output)")
        #expect(run.records("ok").count == 5, "\(run.output)")
        #expect(run.output.contains("failures=0"))
    }

    /// A codec made by fb_codec_create_with_options with a tile size (0: the default side) round-trips every format
    /// bit-exact, whole and band by band, and its headers state the size clamped as the layout's section 4 says.
    @Test(arguments: [(130, 66, 128, 64), (130, 66, 2, 2), (130, 66, 0, 16), (64, 64, 4096, 1024), (66, 130, 34, 0)])
    func aCodecWithATileSizeRoundTripsBitExactFromC(size: (Int, Int, Int, Int)) async throws {
        let scratch = try ScratchDirectory()
        let program = try await CProgram.build("codec")
        let run = try await program.start(["\(size.0)", "\(size.1)", "\(size.2)", "\(size.3)"], in: scratch)
        #expect(try await run.exitStatus(within: 300) == 0, "\(run.output)")
        #expect(run.records("ok").count == 5, "\(run.output)")
        #expect(run.output.contains("failures=0"))
    }

    @Test func theABIRefusesBadArgumentsHonoursTimeoutsAndInterrupts() async throws {
        let scratch = try ScratchDirectory()
        let program = try await CProgram.build("checks")
        let run = try await program.start([scratch.url.path], in: scratch)
        #expect(try await run.exitStatus(within: 300) == 0, "\(run.output)")
        #expect(run.output.contains("failures=0"))
    }
}
