import Foundation
import FrameBusRecording
import FrameBusTesting
import Testing
import TestSupport

/// `fb_recorder` (include/framebus.h, "Recorder"): a C program records a C publisher's stream of the known pattern
/// through libFrameBusC.so; the file it leaves reads back with every frame bit-exact (FNV-1a of its rows equals the
/// publisher's hash of the rows it wrote) and the publisher's reported loss in its drop log.
@Suite(.timeLimit(.minutes(5))) struct CABIRecorderTests {
    @Test func aCRecorderWritesEveryFrameBitExactAndAccountsForTheRest() async throws {
        let scratch = try ScratchDirectory()
        let publisherProgram = try await CProgram.build("publisher")
        let recorderProgram = try await CProgram.build("recorder")
        let path = scratch.path("bus.sock")
        let output = scratch.path("recording.mkv")

        let publisher = try await publisherProgram.start([path, "420v", "64", "48", "40", "1", "20000"], in: scratch)
        #expect(await publisher.waitForOutput("listening", timeout: 60), "publisher: \(publisher.output)")
        let recorder = try await recorderProgram.start([path, output, "0", "240"], in: scratch)
        #expect(try await publisher.exitStatus(within: 300) == 0, "publisher: \(publisher.output)")
        #expect(try await recorder.exitStatus(within: 300) == 0, "recorder: \(recorder.output)")

        // Bad options are refused and make nothing.
        for name in ["reserved", "null-output", "queue-depth", "writes-in-flight"] {
            #expect(
                recorder.output.contains("refused \(name) status=FB_ERROR_INVALID_ARGUMENT made=0"),
                "\(recorder.output)"
            )
        }

        var published: [UInt64: UInt64] = [:]
        for record in publisher.records("published") {
            guard let sequence = record["seq"].flatMap({ UInt64($0) }),
                let hash = record["hash"].flatMap({ UInt64($0, radix: 16) })
            else { continue }
            published[sequence] = hash
        }
        try #require(published.count >= 20, "publisher: \(publisher.output)")
        let final = try #require(recorder.records("final").first, "recorder: \(recorder.output)")
        func number(_ key: String) -> UInt64? { final[key].flatMap { UInt64($0) } }
        #expect(final["ended"] == "1" && final["closed"] == "1", "\(final)")
        #expect(final["failure"] == "FB_OK", "\(final)")
        let written = try #require(number("written"))
        #expect(number("accepted") == written, "every accepted frame reached the file: \(final)")
        // Every published frame is in the file or counted as a bus drop; the two frames the publisher reported lost
        // upstream are a discontinuity.
        let busDrops = (number("drop1") ?? 0) + (number("drop2") ?? 0)
        #expect(written + busDrops == UInt64(published.count), "\(final), \(published.count) published")
        #expect(number("drop3") == 2, "\(final)")

        let reader = try RecordingReader(path: output)
        var frames = 0
        var discontinuityDrops: UInt64 = 0
        while let frame = try reader.nextFrame() {
            frames += 1
            let sequence = try #require(frame.sequence)
            #expect(published[sequence] == fnv1a(frame.bytes), "frame \(sequence) differs from what was published")
            discontinuityDrops += frame.drops.filter { $0.reason == .busDiscontinuity }.reduce(0) { $0 + $1.frameCount }
        }
        #expect(UInt64(frames) == written)
        #expect(discontinuityDrops == 2, "the recording's drop log")
    }
}
