import Foundation
import FrameBus
import FrameBusRecording
import Synchronization
import TestSupport
import Testing

/// A subscriber in the test process that keeps every frame's packed bytes by sequence number: the reference a
/// recording is compared with (what the bus delivered, seen by another consumer).
final class ReferenceFrames: SubscriberDelegate, Sendable {
    private let frames = Mutex<[UInt64: [UInt8]]>([:])
    private let order = Mutex<[UInt64]>([])
    private let decoder = SurfaceCodecContext(threadCount: 1)
    let subscriber: Subscriber

    init(path: String, formats: [PixelFormat] = PixelFormat.baseFormats) throws {
        var configuration = Subscriber.Configuration(path: path, acceptedFormats: formats, delivery: .queue(depth: 16))
        configuration.connectTimeout = .seconds(60)
        subscriber = try Subscriber(configuration: configuration)
        subscriber.setDelegate(self)
    }

    func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {
        guard let image = sampleBuffer.imageBuffer, let sequence = sampleBuffer.busSequenceNumber else { return }
        var bytes: [UInt8]?
        if image.pixelFormat.isCompressed {
            if let raw = try? PixelBuffer(
                width: image.width,
                height: image.height,
                pixelFormat: image.pixelFormat.base
            ),
                (try? decoder.decompress(image, into: raw)) != nil
            {
                bytes = try? raw.withLock(.readOnly) { try raw.packedBytes() }
            }
        } else {
            bytes = try? image.withLock(.readOnly) { try image.packedBytes() }
        }
        guard let bytes else { return }
        frames.withLock { $0[sequence] = bytes }
        order.withLock { $0.append(sequence) }
    }

    var count: Int { frames.withLock { $0.count } }
    subscript(sequence: UInt64) -> [UInt8]? { frames.withLock { $0[sequence] } }
    /// The frames in arrival order.
    var inOrder: [[UInt8]] {
        let sequences = order.withLock { $0 }
        return frames.withLock { frames in sequences.compactMap { frames[$0] } }
    }

    func cancel() { subscriber.cancel() }
}

/// Every frame of a recording, in order, and how reading ended (nil: the recording's end; else the error).
func readRecording(_ path: String) throws -> (frames: [RecordedFrame], ending: RecordingError?, track: RecordingTrack) {
    let reader = try RecordingReader(path: path)
    var frames: [RecordedFrame] = []
    do {
        while let frame = try reader.nextFrame() { frames.append(frame) }
        return (frames, nil, reader.track)
    } catch {
        return (frames, error, reader.track)
    }
}

/// Splits `bytes` into frames of `size` bytes.
func split(_ bytes: [UInt8], frameSize: Int) -> [[UInt8]] {
    stride(from: 0, to: bytes.count, by: frameSize).map { Array(bytes[$0..<min($0 + frameSize, bytes.count)]) }
}

/// A tool on PATH (ffmpeg, gst-launch-1.0), for the tests that compare with the real tools.
enum Tools {
    static let ffmpeg = TestLocations.onPath("ffmpeg")
    static let ffprobe = TestLocations.onPath("ffprobe")
    static let gstLaunch = TestLocations.onPath("gst-launch-1.0")
    static var haveVideoTools: Bool { ffmpeg != nil && gstLaunch != nil && ffprobe != nil }

    /// Whether this process may mount a small tmpfs (root with CAP_SYS_ADMIN): the disk-full test needs one.
    static let canMount: Bool = {
        guard getuid() == 0 else { return false }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fbrec-mountcheck-\(getpid())")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        guard run("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", directory.path]) == 0 else { return false }
        return run("/bin/umount", [directory.path]) == 0
    }()

    /// mkfs.ext4 (Debian: e2fsprogs, Essential) and a loop device: the I/O-error test makes a small ext4 file system
    /// in a file and mounts it with `-o loop`.
    static let mkfsExt4: String? = ["/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"].first { (path: String) in
        access(path, X_OK) == 0
    }
    static var canLoopMount: Bool { canMount && mkfsExt4 != nil && access("/dev/loop-control", R_OK | W_OK) == 0 }

    /// Runs a short command synchronously (mount, umount) and returns its status.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        // Bounded: the exit is an event (terminationHandler); a mount that hangs past 30 s ends the command, not
        // the test run.
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        guard (try? process.run()) != nil else { return -1 }
        guard exited.wait(timeout: .now() + 30) == .success else {
            process.terminate()
            return -1
        }
        return process.terminationStatus
    }
}

/// The JSON lines a `framebus record --json` printed.
func jsonLines(_ output: String) -> [[String: Any]] {
    output.split(separator: "\n").compactMap { line in
        guard line.hasPrefix("{") else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }
}

extension Tools {
    /// GStreamer's FFV1 encoder (gstreamer1.0-libav), for `framebus export --ffv1`.
    static let haveFFV1: Bool = {
        guard let gstLaunch, ffmpeg != nil, ffprobe != nil else { return false }
        let inspect = gstLaunch.deletingLastPathComponent().appendingPathComponent("gst-inspect-1.0")
        return run(inspect.path, ["avenc_ffv1"]) == 0
    }()
}

/// `framebus export --ffv1` of `file`, checked to be FFV1 by ffprobe and decoded by ffmpeg to `pixelFormat` (ffmpeg's
/// name: nv12, bgra): the decoded frames' bytes, back to back.
func exportFFV1AndDecode(_ file: URL, pixelFormat: String) async throws -> [UInt8] {
    let exported = temporaryFileURL("ffv1-\(pixelFormat).mkv")
    let decoded = temporaryFileURL("ffv1-\(pixelFormat).raw")
    defer {
        try? FileManager.default.removeItem(at: exported)
        try? FileManager.default.removeItem(at: decoded)
    }
    let export = try await runToEnd(
        try TestLocations.executable("framebus"),
        ["export", file.path, "--output", exported.path, "--ffv1"],
        timeout: 120
    )
    #expect(export.status == 0, "\(export.output)")
    let probe = try await runToEnd(
        try #require(Tools.ffprobe),
        [
            "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name", "-of", "csv=p=0",
            exported.path,
        ],
        timeout: 60
    )
    #expect(probe.output.trimmingCharacters(in: .whitespacesAndNewlines) == "ffv1", "\(probe.output)")
    let ffmpeg = try await runToEnd(
        try #require(Tools.ffmpeg),
        [
            "-v", "error", "-i", exported.path, "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", pixelFormat,
            "-y", decoded.path,
        ],
        timeout: 120
    )
    #expect(ffmpeg.status == 0, "\(ffmpeg.output)")
    return Array((try? Data(contentsOf: decoded)) ?? Data())
}
