import Foundation
import FrameBus
import FrameBusRecording
import TestSupport
import Testing

/// `framebus record`, `play` and `export` as processes, against `framebus publish`, checked with the real ffmpeg and
/// GStreamer. Serialized: each writes tens of megabytes and keeps a core busy.
@Suite(.serialized, .timeLimit(.minutes(5))) struct RecordingProcessTests {
    /// Starts `framebus publish` (waiting for a subscriber), a reference subscriber in this process, and `framebus
    /// record`; returns when the publisher has ended and the recorder has exited.
    func recordStream(
        format: String,
        size: String,
        seconds: Double,
        compressed: Bool = false,
        output: URL
    ) async throws -> (reference: ReferenceFrames, recorder: ChildProcess, status: Int32) {
        let path = temporarySocketPath("rec")
        var publishArguments = [
            "publish", "--path", path, "--format", format, "--size", size, "--fps", "30",
            "--duration", "\(seconds)", "--wait-for-subscribers", "2", "--quiet",
        ]
        if compressed { publishArguments.append("--compressed") }
        let reference = try ReferenceFrames(path: path)
        var recordArguments = ["record", "--path", path, "--output", output.path, "--json", "--connect-timeout", "60"]
        if compressed { recordArguments.append("--compressed") }
        let recorder = try await startFramebus(recordArguments)
        let publisher = try await startFramebus(publishArguments)
        let status = try await recorder.exitStatus(within: 120)
        _ = try await publisher.exitStatus(within: 60)
        reference.cancel()
        return (reference, recorder, status)
    }

    @Test(
        .enabled(
            if: Tools.haveVideoTools,
            "needs ffmpeg, ffprobe and gst-launch-1.0 (apt-get install ffmpeg gstreamer1.0-tools)"
        ),
        arguments: ["420v", "BGRA"]
    )
    func aRawRecordingDecodesInFfmpegAndGStreamerToTheRecordedBytes(format: String) async throws {
        let file = temporaryFileURL("raw-\(format).mkv")
        defer { try? FileManager.default.removeItem(at: file) }
        let (reference, recorder, status) = try await recordStream(
            format: format,
            size: "320x240",
            seconds: 2,
            output: file
        )
        #expect(status == 0, "\(recorder.output)")
        let summary = try #require(jsonLines(recorder.output).last)
        #expect(summary["summary"] as? Bool == true)
        let recording = try readRecording(file.path)
        #expect(recording.ending == nil)
        // The publisher starts once both the reference and the recorder are connected (--wait-for-subscribers 2):
        // both get every frame. (With one, a reference that connected late on a loaded machine shared no frame with
        // the recording: "only 0 of 60 compared", once in CI.)
        #expect(recording.frames.count >= 10)
        #expect(summary["frames"] as? Int == recording.frames.count)

        // Every recorded frame is the frame the bus delivered to another subscriber, byte for byte.
        var compared = 0
        for frame in recording.frames {
            guard let sequence = frame.sequence, let expected = reference[sequence] else { continue }
            #expect(frame.bytes == expected, "frame \(sequence)")
            compared += 1
        }
        #expect(compared * 10 >= recording.frames.count * 8, "only \(compared) of \(recording.frames.count) compared")

        // ffmpeg decodes the file to the same bytes, frame for frame.
        let decoded = temporaryFileURL("raw-\(format).ffmpeg")
        defer { try? FileManager.default.removeItem(at: decoded) }
        let ffmpeg = try await runToEnd(
            try #require(Tools.ffmpeg),
            ["-v", "error", "-i", file.path, "-fps_mode", "passthrough", "-f", "rawvideo", "-y", decoded.path],
            timeout: 120
        )
        #expect(ffmpeg.status == 0, "\(ffmpeg.output)")
        let frameSize = recording.frames[0].bytes.count
        let ffmpegFrames = split(Array(try Data(contentsOf: decoded)), frameSize: frameSize)
        #expect(ffmpegFrames.count == recording.frames.count)
        for (index, frame) in zip(ffmpegFrames, recording.frames).enumerated() where frame.0 != frame.1.bytes {
            Issue.record("ffmpeg's frame \(index) differs")
            break
        }

        // GStreamer's matroskademux hands out the same bytes (1.22 has no raw caps for NV12/BGRA in Matroska, so the
        // buffers leave it as video/x-unknown; they are the frames all the same).
        let demuxed = temporaryFileURL("raw-\(format).gst")
        defer { try? FileManager.default.removeItem(at: demuxed) }
        let gst = try await runToEnd(
            try #require(Tools.gstLaunch),
            [
                "-q", "filesrc", "location=\(file.path)", "!", "matroskademux", "!", "filesink",
                "location=\(demuxed.path)",
            ],
            timeout: 120
        )
        #expect(gst.status == 0, "\(gst.output)")
        #expect(Array(try Data(contentsOf: demuxed)) == recording.frames.flatMap(\.bytes))

        // `framebus export --ffv1` (GStreamer's avenc_ffv1): ffmpeg decodes it to the recorded bytes (FFV1 is lossless).
        if Tools.haveFFV1 {
            let ffv1 = try await exportFFV1AndDecode(file, pixelFormat: format == "BGRA" ? "bgra" : "nv12")
            #expect(ffv1.count == recording.frames.count * frameSize)
            #expect(ffv1 == recording.frames.flatMap(\.bytes), "the FFV1 export decodes to other bytes")
        }
    }

    @Test func aRecorderKilledMidStreamPlaysBackBitExactUpToItsLastCheckpoint() async throws {
        let file = temporaryFileURL("killed.mkv")
        defer { try? FileManager.default.removeItem(at: file) }
        let path = temporarySocketPath("kill")
        let reference = try ReferenceFrames(path: path)
        defer { reference.cancel() }
        let recorder = try await startFramebus([
            "record", "--path", path, "--output", file.path, "--json", "--connect-timeout", "60",
        ])
        let publisher = try await startFramebus([
            "publish", "--path", path, "--size", "320x240", "--fps", "30", "--duration", "60", "--wait-for-subscriber",
            "--quiet",
        ])
        defer { publisher.send(SIGTERM) }
        // Three status lines: at least two checkpoints have passed.
        try #require(await eventually { jsonLines(recorder.output).count >= 3 })
        let lines = jsonLines(recorder.output)
        let durable = lines.compactMap { $0["durableBytes"] as? Int }.max() ?? 0
        let reported = lines.compactMap { $0["frames"] as? Int }.reduce(0, +)
        await recorder.kill()
        #expect(recorder.endedBySignal == true)

        let recording = try readRecording(file.path)
        // Cut mid-element, or at an element's end: either way, every frame before the cut is read.
        #expect(recording.ending == nil || recording.ending?.code == .truncated)
        #expect(durable > 0)
        // Everything the recorder had reported written (and so everything up to its last checkpoint) is there.
        #expect(
            recording.frames.count >= reported,
            "\(recording.frames.count) frames read, \(reported) reported written"
        )
        for frame in recording.frames {
            guard let sequence = frame.sequence, let expected = reference[sequence] else { continue }
            #expect(frame.bytes == expected, "frame \(sequence)")
        }

        // `framebus play` publishes the same frames, bit-exact, in order.
        let playPath = temporarySocketPath("play")
        let watcher = try ReferenceFrames(path: playPath)
        defer { watcher.cancel() }
        let player = try await startFramebus([
            "play", file.path, "--path", playPath, "--fps", "0", "--wait-for-subscriber",
        ])
        #expect(try await player.exitStatus(within: 120) == 0, "\(player.output)")
        #expect(player.output.contains("truncated") || recording.ending == nil)
        try #require(await eventually { watcher.count >= recording.frames.count })
        #expect(watcher.inOrder == recording.frames.map(\.bytes))
    }

    @Test(.enabled(if: Tools.haveVideoTools, "needs ffmpeg"))
    func aCompressedRecordingExportsToRawFramesFfmpegDecodesBitExact() async throws {
        let file = temporaryFileURL("compressed.mkv")
        let exported = temporaryFileURL("exported.mkv")
        defer {
            try? FileManager.default.removeItem(at: file)
            try? FileManager.default.removeItem(at: exported)
        }
        let (reference, recorder, status) = try await recordStream(
            format: "420v",
            size: "320x240",
            seconds: 2,
            compressed: true,
            output: file
        )
        #expect(status == 0, "\(recorder.output)")
        let recording = try readRecording(file.path)
        #expect(recording.track.pixelFormat == .compressedYUV420BiPlanarVideoRange8)
        #expect(recording.frames.count >= 10)
        let export = try await runToEnd(
            try TestLocations.executable("framebus"),
            ["export", file.path, "--output", exported.path],
            timeout: 120
        )
        #expect(export.status == 0, "\(export.output)")
        let raw = try readRecording(exported.path)
        #expect(raw.track.pixelFormat == .yuv420BiPlanarVideoRange8)
        #expect(raw.frames.count == recording.frames.count)
        var compared = 0
        for frame in raw.frames {
            guard let sequence = frame.sequence, let expected = reference[sequence] else { continue }
            #expect(frame.bytes == expected, "frame \(sequence)")
            compared += 1
        }
        #expect(compared * 10 >= raw.frames.count * 8)
        let decoded = temporaryFileURL("exported.ffmpeg")
        defer { try? FileManager.default.removeItem(at: decoded) }
        let ffmpeg = try await runToEnd(
            try #require(Tools.ffmpeg),
            ["-v", "error", "-i", exported.path, "-fps_mode", "passthrough", "-f", "rawvideo", "-y", decoded.path],
            timeout: 120
        )
        #expect(ffmpeg.status == 0, "\(ffmpeg.output)")
        #expect(Array(try Data(contentsOf: decoded)) == raw.frames.flatMap(\.bytes))

        // The compressed recording straight to FFV1: the same bytes again.
        if Tools.haveFFV1 {
            let ffv1 = try await exportFFV1AndDecode(file, pixelFormat: "nv12")
            #expect(ffv1 == raw.frames.flatMap(\.bytes), "the FFV1 export decodes to other bytes")
        }
    }

    @Test(.enabled(if: Tools.canMount, "needs root to mount a small tmpfs"))
    func aFullDiskEndsTheRecordingWithAClearErrorAndAReadableFile() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "fbrec-full-\(UUID().uuidString.prefix(8))"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        #expect(Tools.run("/bin/mount", ["-t", "tmpfs", "-o", "size=12m", "tmpfs", directory.path]) == 0)
        defer {
            Tools.run("/bin/umount", [directory.path])
            try? FileManager.default.removeItem(at: directory)
        }
        let file = directory.appendingPathComponent("full.mkv")
        let path = temporarySocketPath("full")
        let recorder = try await startFramebus([
            "record", "--path", path, "--output", file.path, "--json", "--connect-timeout", "60", "--reserve-mb", "2",
            "--backlog-mb", "32",
        ])
        let publisher = try await startFramebus([
            "publish", "--path", path, "--format", "BGRA", "--size", "640x480", "--fps", "30", "--duration", "60",
            "--wait-for-subscriber", "--quiet",
        ])
        defer { publisher.send(SIGTERM) }
        let status = try await recorder.exitStatus(within: 120)
        #expect(status == 1, "\(recorder.output)")
        #expect(recorder.output.contains("disk full"), "\(recorder.output)")
        let summary = try #require(jsonLines(recorder.output).last)
        #expect(summary["summary"] as? Bool == true)
        #expect((summary["error"] as? String)?.contains("disk full") == true)
        // The file ends cleanly after its last whole frame: the trailer went into the space kept reserved for it.
        let recording = try readRecording(file.path)
        #expect(recording.ending == nil, "\(String(describing: recording.ending))")
        #expect(recording.frames.count == summary["frames"] as? Int)
        #expect(recording.frames.count >= 3)
        if let ffprobe = Tools.ffprobe {
            let probe = try await runToEnd(
                ffprobe,
                [
                    "-v", "error", "-count_frames", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0",
                    file.path,
                ],
                timeout: 120
            )
            #expect(probe.output.trimmingCharacters(in: .whitespacesAndNewlines) == "\(recording.frames.count)")
        }
    }

    /// A disk that fails under the recorder: an ext4 file system in a loop-mounted file, shut down mid-recording with
    /// ext4's EXT4_IOC_SHUTDOWN ioctl (what `xfs_io -x -c shutdown` does; fstests' way to fail a file system), after
    /// which every write and sync gets EIO from the kernel, as from a dying disk. (`mount -o remount,ro`, the other
    /// way to fail writes, is refused with EBUSY while the recording is open for writing.) The recorder must end
    /// with "I/O error", exit 1, and leave a file whose frames, read after the file system is mounted again, are
    /// bit-exact up to where the disk failed.
    @Test(.enabled(if: Tools.canLoopMount, "needs root, /dev/loop-control and mkfs.ext4 to loop-mount an ext4 file"))
    func aDiskThatFailsMidRecordingEndsItWithAnIOErrorAndAReadableFile() async throws {
        let image = temporaryFileURL("ioerror.ext4")
        let directory = temporaryFileURL("ioerror-mnt")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(at: directory)
            try? FileManager.default.removeItem(at: image)
        }
        #expect(FileManager.default.createFile(atPath: image.path, contents: nil))
        #expect(truncate(image.path, 96 << 20) == 0)
        try #require(Tools.run(try #require(Tools.mkfsExt4), ["-q", "-F", image.path]) == 0)
        try #require(Tools.run("/bin/mount", ["-o", "loop", image.path, directory.path]) == 0)
        var mounted = true
        defer { if mounted { Tools.run("/bin/umount", [directory.path]) } }

        let file = directory.appendingPathComponent("failing.mkv")
        let path = temporarySocketPath("ioerr")
        let reference = try ReferenceFrames(path: path)
        defer { reference.cancel() }
        let recorder = try await startFramebus([
            "record", "--path", path, "--output", file.path, "--json", "--connect-timeout", "60",
        ])
        let publisher = try await startFramebus([
            "publish", "--path", path, "--format", "420v", "--size", "320x240", "--fps", "30", "--duration", "60",
            "--wait-for-subscriber", "--quiet",
        ])
        defer { publisher.send(SIGTERM) }
        // Two status lines: frames have reached the disk and a checkpoint has passed.
        try #require(await eventually { jsonLines(recorder.output).count >= 2 }, "\(recorder.output)")
        #expect(recorder.hasExited == false)

        // Shut the file system down (flag 0, EXT4_GOING_FLAGS_DEFAULT: what was written is flushed first), through
        // the real ioctl, from Python's fcntl (Swift cannot call the variadic ioctl).
        let shutdown = try await runToEnd(
            try #require(TestLocations.onPath("python3")),
            [
                "-c",
                "import fcntl, os, struct, sys; fcntl.ioctl(os.open(sys.argv[1], os.O_RDONLY), 0x8004587D, "
                    + "struct.pack('I', 0))",
                directory.path,
            ],
            timeout: 60
        )
        try #require(shutdown.status == 0, "EXT4_IOC_SHUTDOWN: \(shutdown.output)")

        let status = try await recorder.exitStatus(within: 120)
        #expect(status == 1, "\(recorder.output)")
        #expect(recorder.output.contains("I/O error"), "\(recorder.output)")
        let summary = try #require(jsonLines(recorder.output).last)
        #expect(summary["summary"] as? Bool == true, "\(recorder.output)")
        #expect((summary["error"] as? String)?.contains("I/O error") == true, "\(summary)")

        // Mounted again (the journal replayed), the recording reads as a recording cut short: a prefix of the
        // stream, every frame bit-exact.
        #expect(Tools.run("/bin/umount", [directory.path]) == 0)
        mounted = false
        try #require(Tools.run("/bin/mount", ["-o", "loop", image.path, directory.path]) == 0)
        mounted = true
        let recording = try readRecording(file.path)
        #expect(
            recording.ending == nil || recording.ending?.code == .truncated,
            "\(String(describing: recording.ending))"
        )
        #expect(recording.frames.count >= 1)
        var compared = 0
        for frame in recording.frames {
            guard let sequence = frame.sequence, let expected = reference[sequence] else { continue }
            #expect(frame.bytes == expected, "frame \(sequence)")
            compared += 1
        }
        #expect(compared >= 1, "no recorded frame matched one the reference subscriber saw")
    }
}
