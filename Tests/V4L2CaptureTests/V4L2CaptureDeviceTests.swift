import Foundation
import FrameBus
import Glibc
import Synchronization
import Testing
import V4L2Capture

/// A capture running on a thread of its own (its loop blocks in poll(2); never on the cooperative pool).
final class CaptureRun: Sendable {
    struct Produced: Sendable {
        var deviceSequence: UInt32
        var hash: UInt64
        var presentationNanoseconds: Int64
    }

    let capture: V4L2Capture
    let publisher: Publisher
    let produced = Mutex<[UInt64: Produced]>([:])
    private let end = Mutex<V4L2Capture.EndReason?>(nil)

    init(_ capture: V4L2Capture, _ publisher: Publisher, hashing: Bool) {
        self.capture = capture
        self.publisher = publisher
        let thread = Thread { [self] in
            let reason = capture.run(publishingTo: publisher) { frame in
                let hash = hashing ? ((try? imageHash(frame.pixelBuffer)) ?? 0) : 0
                let record = Produced(
                    deviceSequence: frame.deviceSequence,
                    hash: hash,
                    presentationNanoseconds: frame.timing.presentationTimeStamp.value
                )
                self.produced.withLock { $0[frame.sequence] = record }
            }
            self.end.withLock { $0 = reason }
        }
        thread.name = "test.capture"
        thread.start()
    }

    var endReason: V4L2Capture.EndReason? { end.withLock { $0 } }

    /// Stops the capture and the publisher and waits for the loop to end.
    func finish() async -> V4L2Capture.EndReason? {
        capture.stop()
        await eventually(timeout: .seconds(30)) { endReason != nil }
        publisher.stop()
        return endReason
    }
}

/// The V4L2 capture against a real device: vivid in a guest kernel (scripts/guest-run). Every test here skips on a
/// host without the device, naming it, and fails instead under FRAMEBUS_REQUIRE_ALL=1.
@Suite(.serialized, .timeLimit(.minutes(5))) struct V4L2CaptureDeviceTests {
    /// 320x180 NV12 at 15 fps: vivid's smallest webcam size, light enough for a TCG guest and debug builds.
    static func smallCapture(buffers: Int = 16) throws -> V4L2Capture {
        var configuration = V4L2Capture.Configuration(
            devicePath: captureDevicePath,
            pixelFormat: .yuv420BiPlanarVideoRange8,
            width: 320,
            height: 180,
            framesPerSecond: 15
        )
        configuration.bufferCount = buffers
        return try V4L2Capture(configuration: configuration)
    }

    @Test(.enabled(if: runsDeviceTests, noDeviceReason))
    func negotiatesNV12AsVideoRange420vWithColorimetry() throws {
        try requireCaptureDevice()
        let capture = try Self.smallCapture()
        #expect(capture.format.devicePixelFormat == .nv12)
        #expect(capture.format.pixelFormat == .yuv420BiPlanarVideoRange8)
        #expect(capture.format.width == 320 && capture.format.height == 180)
        #expect(capture.format.bytesPerLine >= 320)
        #expect(capture.format.framesPerSecond.map { abs($0 - 15) < 0.01 } == true, "\(capture.format)")
        // vivid's webcam reports sRGB-family colorimetry for NV12: a Y'CbCr matrix and a transfer function are set.
        #expect(capture.format.attachments.yCbCrMatrix != nil, "\(capture.format.colorimetry)")
        #expect(capture.format.attachments.transferFunction != nil, "\(capture.format.colorimetry)")
        #expect(capture.bufferCount >= 3)
        // A size the device does not offer is refused with the sizes it does.
        var odd = V4L2Capture.Configuration(devicePath: captureDevicePath, pixelFormat: .yuv420BiPlanarVideoRange8)
        (odd.width, odd.height) = (322, 182)
        #expect(throws: V4L2CaptureError.self) { _ = try V4L2Capture(configuration: odd) }
    }

    @Test(.enabled(if: runsDeviceTests, noDeviceReason))
    func subscriberInAnotherProcessReceivesTheDevicesFramesBitExact() async throws {
        try requireCaptureDevice()
        let capture = try Self.smallCapture()
        let path = temporarySocketPath("exact")
        let publisher = try Publisher(configuration: capture.publisherConfiguration(path: path))
        let run = CaptureRun(capture, publisher, hashing: true)
        let subscriber = try ChildProcess(
            "FrameBusTestPeer",
            ["bus-subscriber", path, "--accept", "420v", "--checksum", "--queue", "3", "--frames", "40", "--timeout", "150"]
        )
        #expect(await subscriber.exit(within: .seconds(170)), "subscriber: \(subscriber.output)")
        let end = await run.finish()
        #expect(end == .stopped)

        let frames = subscriber.records("frame")
        let drops = subscriber.records("drop")
        let produced = run.produced.withLock { $0 }
        try #require(frames.count >= 20, "received \(frames.count): \(subscriber.output)")
        // Bit-exact: every received frame hashes as the producer hashed the device's buffer.
        var mismatches: [String] = []
        for frame in frames {
            let sequence = try #require(frame["seq"].flatMap { UInt64($0) })
            let hash = try #require(frame["hash"].flatMap { UInt64($0, radix: 16) })
            guard let record = produced[sequence] else {
                mismatches.append("seq \(sequence): not produced")
                continue
            }
            if record.hash != hash { mismatches.append("seq \(sequence): \(hash) != \(record.hash)") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
        // Distinct images, so equal hashes mean something: vivid's pattern moves and it stamps a frame counter.
        #expect(Set(frames.compactMap { $0["hash"] }).count > frames.count / 2)

        // Every bus sequence between the first and last event the subscriber saw is a frame or a reported drop.
        var seen: [UInt64: Int] = [:]
        for frame in frames { if let sequence = frame["seq"].flatMap({ UInt64($0) }) { seen[sequence, default: 0] += 1 } }
        for drop in drops {
            guard let first = drop["first"].flatMap({ UInt64($0) }), let last = drop["last"].flatMap({ UInt64($0) })
            else { continue }
            for sequence in first...last { seen[sequence, default: 0] += 1 }
        }
        let lowest = try #require(seen.keys.min())
        let highest = try #require(seen.keys.max())
        let missing = (lowest...highest).filter { seen[$0] == nil }
        let doubled = seen.filter { $0.value > 1 }.map(\.key)
        #expect(missing.isEmpty, "unaccounted sequences \(missing.prefix(10))")
        #expect(doubled.isEmpty, "sequences both delivered and dropped \(doubled.prefix(10))")

        // Producer side: bus sequence minus device sequence is constant, so each device frame lost (a gap) used
        // exactly its sequence numbers in a DROP; timestamps are CLOCK_MONOTONIC, increasing, and recent.
        let ordered = produced.sorted { $0.key < $1.key }
        let offsets = Set(ordered.map { Int64($0.key) - Int64($0.value.deviceSequence) })
        #expect(offsets.count == 1, "bus minus device sequence varies: \(offsets)")
        let times = ordered.map(\.value.presentationNanoseconds)
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 < $1 })
        let now = HostClock.now.value
        #expect(times.last.map { now - $0 < 60_000_000_000 && now >= $0 } == true)
        let statistics = capture.statistics
        #expect(
            statistics.framesCaptured
                == statistics.framesPublished + statistics.framesDroppedLate + statistics.errorFrames
        )
        #expect(statistics.starvations == 0, "\(statistics)")
    }

    @Test(.enabled(if: runsDeviceTests, noDeviceReason))
    func hoardingAndKilledSubscribersGiveTheirBuffersBack() async throws {
        try requireCaptureDevice()
        let capture = try Self.smallCapture(buffers: 8)
        let path = temporarySocketPath("hoard")
        var configuration = capture.publisherConfiguration(path: path)
        configuration.maximumSubscribers = 2  // a budget of 8 - 2 = 6 buffers: 3 each
        let publisher = try Publisher(configuration: configuration)
        let run = CaptureRun(capture, publisher, hashing: false)
        let hoarder = try ChildProcess(
            "FrameBusTestPeer",
            ["bus-subscriber", path, "--accept", "420v", "--hold", "1000", "--frames", "1000000", "--timeout", "280"]
        )
        let steady = try ChildProcess(
            "FrameBusTestPeer",
            ["bus-subscriber", path, "--accept", "420v", "--frames", "1000000", "--timeout", "280"]
        )
        func held(by pid: Int32) -> Int? {
            publisher.statistics.subscribers.first { $0.processID == pid }?.statistics.heldNow
        }
        // The hoarder fills its share and keeps it.
        let filled = await eventually(timeout: .seconds(120)) { held(by: hoarder.processID) == 3 }
        try #require(filled, "hoarder holds \(held(by: hoarder.processID) ?? -1): \(hoarder.output)")
        // The device keeps running: frames keep coming, it always has a buffer, the hoarder gets outOfBuffers.
        let before = capture.statistics.framesPublished
        let running = await eventually(timeout: .seconds(90)) { capture.statistics.framesPublished >= before + 15 }
        #expect(running, "\(capture.statistics)")
        #expect(capture.statistics.starvations == 0, "\(capture.statistics)")
        #expect(capture.statistics.lowestBuffersQueued >= 1, "\(capture.statistics)")
        #expect(held(by: hoarder.processID) == 3)
        let hoarderDrops = publisher.statistics.subscribers.first { $0.processID == hoarder.processID }?
            .statistics.dropped[.outOfBuffers] ?? 0
        #expect(hoarderDrops > 0)

        // `framebus top` shows both subscribers, the hoarder holding 3.
        let top = try ChildProcess("framebus", ["top", path, "--iterations", "1"])
        #expect(await top.exit(within: .seconds(60)))
        let rows = top.output.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true) }
        let hoarderRow = rows.first { $0.count > 4 && $0[1] == "\(hoarder.processID)" }
        #expect(hoarderRow.map { $0[2] == "420v" && $0[4] == "3" } == true, "\(top.output)")
        #expect(rows.contains { $0.count > 4 && $0[1] == "\(steady.processID)" }, "\(top.output)")

        // kill -9: the publisher releases what the hoarder held, and the buffers go back to the device.
        kill(hoarder.processID, SIGKILL)
        let returned = await eventually(timeout: .seconds(60)) {
            let statistics = capture.statistics
            return publisher.subscriberCount == 1 && statistics.buffersHeld <= 2
                && statistics.buffersQueued >= statistics.bufferCount - 2
        }
        #expect(returned, "\(capture.statistics)")
        let after = capture.statistics.framesPublished
        #expect(await eventually(timeout: .seconds(60)) { capture.statistics.framesPublished >= after + 10 })
        #expect(run.endReason == nil, "the capture kept running")
        let end = await run.finish()
        #expect(end == .stopped)
        _ = await steady.exit(within: .seconds(30))
    }

    @Test(.enabled(if: runsDeviceTests, noDeviceReason))
    func captureCommandPublishesBitExactAndStopsOnSIGTERM() async throws {
        try requireCaptureDevice()
        let path = temporarySocketPath("cli")
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("fbv4l2-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let command = try ChildProcess(
            "framebus",
            [
                "capture", "--device", captureDevicePath, "--path", path, "--format", "420v", "--size", "320x180",
                "--fps", "15", "--frame-log", log.path,
            ]
        )
        let listening = await eventually(timeout: .seconds(60)) { access(path, F_OK) == 0 }
        try #require(listening, "framebus capture did not listen: \(command.output)")
        let subscriber = try ChildProcess(
            "FrameBusTestPeer",
            ["bus-subscriber", path, "--accept", "420v", "--checksum", "--frames", "25", "--timeout", "150"]
        )
        #expect(await subscriber.exit(within: .seconds(170)))
        kill(command.processID, SIGTERM)
        #expect(await command.exit(within: .seconds(30)), "\(command.output)")
        #expect(command.process.terminationStatus == 0, "\(command.output)")
        #expect(access(path, F_OK) != 0, "socket file left behind")
        #expect(command.output.contains("SIGTERM: stopped"), "\(command.output)")
        #expect(command.output.contains("NV12 320x180 as 420v"), "\(command.output)")

        let logged = try String(contentsOf: log, encoding: .utf8).split(separator: "\n").map { line in
            var fields: [String: String] = [:]
            for part in line.split(separator: " ").dropFirst() {
                let pair = part.split(separator: "=", maxSplits: 1)
                if pair.count == 2 { fields[String(pair[0])] = String(pair[1]) }
            }
            return fields
        }
        let producedHashes = Dictionary(
            logged.compactMap { fields in fields["seq"].flatMap { seq in fields["hash"].map { (seq, $0) } } },
            uniquingKeysWith: { first, _ in first }
        )
        let frames = subscriber.records("frame")
        try #require(frames.count >= 10, "\(subscriber.output)")
        let mismatched = frames.filter { producedHashes[$0["seq"] ?? ""] != $0["hash"] }
        #expect(mismatched.isEmpty, "\(mismatched.prefix(3)) of \(frames.count)")
    }
}
