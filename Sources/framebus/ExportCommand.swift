import ArgumentParser
import Foundation
import FrameBus
import FrameBusRecording

/// `framebus export`: turn a recording into raw Matroska that ffmpeg and GStreamer open, or into FFV1 (lossless,
/// about half the size) through GStreamer.
struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract:
            "Write a recording as raw Matroska (compressed frames decoded, bit-exact) or FFV1 for ffmpeg and GStreamer.",
        discussion: """
            Raw (the default): each frame keeps its sequence number, timing and drop records. --ffv1: the frames \
            are encoded losslessly with FFV1 by GStreamer (gst-launch-1.0 with avenc_ffv1 from gstreamer1.0-libav, \
            into matroskamux), at a constant frame rate (--fps, else the first frame's duration or the first two frames' interval); 4:2:0 \
            8-bit frames go as I420 (the same samples, chroma deinterleaved), BGRA as BGRA; 10-bit formats are \
            refused (GStreamer's P010 → I420_10LE conversion drops the low bits). FFV1 keeps no sequence numbers \
            or drop records. A recording cut short exports up to its last whole frame (said on stderr); a damaged \
            one stops with an error (exit status 1).
            """
    )

    @Argument(help: "The recording.")
    var file: String

    @Option(help: "The file to write (created or truncated).")
    var output: String

    @Flag(help: "Encode the frames with FFV1 (lossless) through GStreamer, into Matroska.")
    var ffv1 = false

    @Option(help: "With --ffv1: the frame rate written (default: from the recording's first two frames, else 30).")
    var fps: Double?

    func validate() throws {
        if let fps, !(fps > 0 && fps <= 1000) { throw ValidationError("--fps must be in (0, 1000]") }
        if fps != nil && !ffv1 { throw ValidationError("--fps is for --ffv1") }
    }

    func run() throws {
        if ffv1 {
            try exportFFV1()
            return
        }
        let result = try RecordingExport.export(from: file, to: output)
        say("exported \(result.frames) frames to \(output)")
        if let truncation = result.truncation {
            FileHandle.standardError.write(Data((escapedForTerminal("framebus export: \(truncation)") + "\n").utf8))
        }
    }

    /// GStreamer's name for a base format whose samples FFV1 stores exactly.
    static func gstreamerFormat(_ format: PixelFormat) -> String? {
        switch format.base {
        case .yuv420BiPlanarVideoRange8, .yuv420BiPlanarFullRange8: "NV12"
        case .bgra8: "BGRA"
        default: nil
        }
    }

    /// Frames go to `gst-launch-1.0 fdsrc ! rawvideoparse ! videoconvert ! avenc_ffv1 ! matroskamux ! filesink` through
    /// a pipe, one raw frame at a time.
    func exportFFV1() throws {
        // A gst-launch-1.0 that fails ends the pipe: that is an error from write, not a SIGPIPE that kills us.
        signal(SIGPIPE, SIG_IGN)
        let reader = try RecordingReader(path: file)
        let track = reader.track
        guard let format = Self.gstreamerFormat(track.pixelFormat) else {
            throw ValidationError(
                "--ffv1: \(track.pixelFormat) is not exported bit-exact through GStreamer (10-bit); use the raw export"
            )
        }
        guard let gstLaunch = Self.onPath("gst-launch-1.0") else {
            throw ValidationError("--ffv1 needs gst-launch-1.0 (apt-get install gstreamer1.0-tools gstreamer1.0-libav)")
        }
        // The frame rate: given, or from the first two frames' presentation times (else their timestamps), else 30.
        var pending: [(RecordedFrame, [UInt8])] = []
        var process: Process?
        var pipe: Pipe?
        var frames = 0
        var rate = fps
        func start(_ framesPerSecond: Double, frameBytes: Int) throws {
            // A rational close to the rate: thousandths.
            let numerator = Int((framesPerSecond * 1000).rounded())
            let launch = Process()
            launch.executableURL = URL(fileURLWithPath: gstLaunch)
            launch.arguments = [
                "-q", "fdsrc", "fd=0", "blocksize=\(frameBytes)", "!", "rawvideoparse", "width=\(track.width)",
                "height=\(track.height)", "format=\(format.lowercased())", "framerate=\(numerator)/1000", "!",
                "videoconvert", "!", "avenc_ffv1", "!", "matroskamux", "!", "filesink", "location=\(output)",
            ]
            let input = Pipe()
            launch.standardInput = input
            launch.standardOutput = FileHandle.standardError
            try launch.run()
            process = launch
            pipe = input
        }
        func send(_ bytes: [UInt8]) throws {
            guard let pipe else { return }
            do { try pipe.fileHandleForWriting.write(contentsOf: bytes) } catch {
                throw ValidationError("gst-launch-1.0 stopped taking frames: \(error)")
            }
            frames += 1
        }
        let truncation = try RecordingExport.forEachRawFrame(of: reader) { frame, bytes throws(RecordingError) in
            do {
                if process == nil {
                    pending.append((frame, bytes))
                    if rate == nil {
                        guard pending.count == 2 else { return }
                        rate = Self.frameRate(pending[0].0, pending[1].0)
                    }
                    try start(rate ?? 30, frameBytes: bytes.count)
                    for (_, earlier) in pending { try send(earlier) }
                    pending = []
                    return
                }
                try send(bytes)
            } catch {
                throw RecordingError(code: .ioError, operation: "framebus export --ffv1", message: "\(error)")
            }
        }
        if process == nil, let first = pending.first {
            try start(rate ?? 30, frameBytes: first.1.count)
            for (_, earlier) in pending { try send(earlier) }
        }
        guard let process, let pipe else { throw ValidationError("the recording has no frames") }
        try pipe.fileHandleForWriting.close()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ValidationError("gst-launch-1.0 failed (status \(process.terminationStatus))")
        }
        say("exported \(frames) frames to \(output) (FFV1)")
        if let truncation {
            FileHandle.standardError.write(Data((escapedForTerminal("framebus export: \(truncation)") + "\n").utf8))
        }
    }

    /// The rate two neighbouring frames imply (the first one's published duration, else their presentation times,
    /// else their Matroska timestamps), if it is plausible.
    static func frameRate(_ first: RecordedFrame, _ second: RecordedFrame) -> Double? {
        var interval = 0.0
        if first.duration.isNumeric, first.duration.seconds > 0 {
            interval = first.duration.seconds
        } else if first.presentationTime.isNumeric, second.presentationTime.isNumeric {
            interval = (second.presentationTime - first.presentationTime).seconds
        } else {
            interval = Double(second.timestampMilliseconds &- first.timestampMilliseconds) / 1000
        }
        guard interval.isFinite, interval > 0.001, interval < 60 else { return nil }
        return 1 / interval
    }

    static func onPath(_ name: String) -> String? {
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        return paths.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}
