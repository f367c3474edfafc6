import ArgumentParser
import Foundation
import FrameBus
import FrameBusRecording

/// `framebus record`: record a stream to a Matroska file, every frame as it arrives (docs/RECORDING.md).
struct RecordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record a publisher's frames to a Matroska file (raw, or the compressed layout as is).",
        discussion: """
            A queue-mode subscriber copies each frame into a bounded backlog; one I/O thread writes it with O_DIRECT \
            (buffered with sync_file_range where the file system refuses O_DIRECT) into space reserved ahead with \
            fallocate, and checkpoints (fdatasync) at least every second: after kill -9 the file plays up to its last \
            checkpoint. Prints a status line per second; with --json a JSON line, and a last one with \
            "summary": true. Ends at --duration, on SIGINT/SIGTERM, when the publisher stops, or when the disk is \
            full or fails (exit status 1, the file readable up to its last frame written).
            """
    )

    @Option(help: "The publisher's socket path (default: $XDG_RUNTIME_DIR/NAME.sock, NAME from --name).")
    var path: String?

    @Option(help: "The stream's name, used for the default socket path.")
    var name: String = "framebus"

    @Option(help: "The recording's path (created or truncated).")
    var output: String

    @Option(help: "Stop after this many seconds.")
    var duration: Double?

    @Flag(
        help:
            "Record the lossless compressed variant, as the publisher encodes it (play it with `framebus play`, or turn it into raw Matroska with `framebus export`)."
    )
    var compressed = false

    @Flag(help: "Print JSON lines.")
    var json = false

    @Option(help: "The backlog that absorbs disk stalls, in MiB.")
    var backlogMB: Int = 256

    @Option(help: "Space reserved ahead with fallocate, in MiB.")
    var reserveMB: Int = 256

    @Option(help: "The longest time between checkpoints, in milliseconds (10…1000).")
    var checkpointMs: Int = 1000

    @Option(help: "Writes in flight at once, each from its own worker thread at its own offset (1…16).")
    var writesInFlight: Int = 2

    @Option(help: "The largest single write, in MiB (1…64).")
    var writeMB: Int = 4

    @Option(help: "The queue depth asked of the publisher (1…64).")
    var queue: Int = 16

    @Flag(
        name: .customLong("no-direct"),
        help: "Write through the page cache (sync_file_range + fadvise) instead of O_DIRECT."
    )
    var buffered = false

    @Option(help: "Seconds to wait for a publisher to appear.")
    var connectTimeout: Double = 5

    func validate() throws {
        if let duration, !(duration >= 0 && duration <= 1e9) { throw ValidationError("--duration must be ≥ 0") }
        guard (10...1000).contains(checkpointMs) else { throw ValidationError("--checkpoint-ms must be 10…1000") }
        guard (1...1 << 20).contains(backlogMB), (1...1 << 20).contains(reserveMB) else {
            throw ValidationError("--backlog-mb and --reserve-mb must be positive")
        }
        guard (1...16).contains(writesInFlight) else { throw ValidationError("--writes-in-flight must be 1…16") }
        guard (1...64).contains(writeMB) else { throw ValidationError("--write-mb must be 1…64") }
        guard (1...64).contains(queue) else { throw ValidationError("--queue must be 1…64") }
        guard connectTimeout > 0, connectTimeout <= 1e6 else { throw ValidationError("--connect-timeout must be > 0") }
    }

    func run() async throws {
        let stopping = StopSignals.install()
        let socketPath = try path ?? SocketPath.default(name: name)
        var configuration = Recorder.Configuration(path: socketPath, outputPath: output)
        configuration.recordsCompressed = compressed
        configuration.backlogByteCount = backlogMB << 20
        configuration.reservationStep = Int64(reserveMB) << 20
        configuration.checkpointInterval = .milliseconds(checkpointMs)
        configuration.queueDepth = queue
        configuration.writesInFlight = writesInFlight
        configuration.writeByteCount = writeMB << 20
        configuration.usesDirectIO = !buffered
        configuration.connectTimeout = .milliseconds(Int64(connectTimeout * 1000))
        let recorder = try Recorder(configuration: configuration)
        let initial = recorder.status
        if !json {
            let mode = initial.usesDirectIO ? "O_DIRECT" : "buffered (\(initial.directIORefusal ?? "asked for"))"
            say(
                escapedForTerminal(
                    "recording \(socketPath) to \(output): \(compressed ? "compressed" : "raw"), \(mode)"
                )
            )
        }
        let clock = ContinuousClock()
        let start = clock.now
        let end = duration.map { start + .milliseconds(Int64($0 * 1000)) }
        var second = 0
        var previous = initial
        var previousTime = 0.0
        while true {
            var wake = clock.now + .milliseconds(50)
            if let end, end < wake { wake = end }
            try? await Task.sleep(until: wake, clock: clock)
            let status = recorder.status
            let elapsed = SubscribeCommand.seconds(clock.now - start)
            let done =
                stopping.received || end.map { clock.now >= $0 } == true || status.failure != nil
                || status.streamEnd != nil
            if Int(elapsed) > second && !done {
                second = Int(elapsed)
                say(
                    Self.line(
                        status,
                        previous: previous,
                        interval: elapsed - previousTime,
                        seconds: elapsed,
                        json: json,
                        summary: false
                    )
                )
                previous = status
                previousTime = elapsed
            }
            if done { break }
        }
        let final = recorder.stop()
        let elapsed = SubscribeCommand.seconds(clock.now - start)
        say(
            Self.line(final, previous: RecorderStatus(), interval: elapsed, seconds: elapsed, json: json, summary: true)
        )
        if let failure = final.failure {
            FileHandle.standardError.write(
                Data(
                    (escapedForTerminal(
                        "framebus record: \(failure); \(output) is readable up to frame \(final.framesWritten)"
                    ) + "\n").utf8
                )
            )
            throw ExitCode.failure
        }
        if let streamEnd = final.streamEnd, streamEnd.code != .endOfStream {
            FileHandle.standardError.write(
                Data((escapedForTerminal("framebus record: the stream ended: \(streamEnd)") + "\n").utf8)
            )
            throw ExitCode.failure
        }
    }

    static func line(
        _ status: RecorderStatus,
        previous: RecorderStatus,
        interval: Double,
        seconds: Double,
        json: Bool,
        summary: Bool
    ) -> String {
        let frames = status.framesWritten - min(previous.framesWritten, status.framesWritten)
        let bytes = status.bytesWritten - min(previous.bytesWritten, status.bytesWritten)
        let megabytesPerSecond = Double(bytes) / 1e6 / max(interval, 0.001)
        var drops: [String: UInt64] = [:]
        for reason in RecordingDropReason.allCases {
            drops[reason.description] =
                status.drops[reason, default: 0]
                - min(previous.drops[reason, default: 0], status.drops[reason, default: 0])
        }
        let busy = status.busyReasons.map(\.rawValue).sorted()
        if json {
            var object: [String: Any] = [
                "seconds": (seconds * 100).rounded() / 100, "frames": frames, "bytes": bytes,
                "framesPerSecond": (Double(frames) / max(interval, 0.001) * 10).rounded() / 10,
                "megabytesPerSecond": (megabytesPerSecond * 10).rounded() / 10, "drops": drops,
                "droppedFrames": drops.values.reduce(0, +), "backlogBytes": status.backlogBytes,
                "backlogPeakBytes": status.backlogPeakBytes, "backlogCapacity": status.backlogCapacity,
                "remainingBytes": status.remainingBytes, "busy": busy, "direct": status.usesDirectIO,
                "writeP50us": status.writeLatencyP50Microseconds, "writeP99us": status.writeLatencyP99Microseconds,
                "durableBytes": status.bytesDurable,
            ]
            if let remaining = status.remainingSeconds, remaining.isFinite {
                object["remainingSeconds"] = remaining.rounded()
            }
            if let track = status.track { object["format"] = "\(track.pixelFormat) \(track.width)x\(track.height)" }
            if summary {
                object["summary"] = true
                object["framesAccepted"] = status.framesAccepted
                if let failure = status.failure { object["error"] = "\(failure)" }
                if let refusal = status.directIORefusal { object["directRefused"] = refusal }
            }
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
            return String(decoding: data, as: UTF8.self)
        }
        let dropText = drops.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            .joined(separator: " ")
        let remaining = status.remainingSeconds.map { String(format: " (%.0f s)", $0) } ?? ""
        return (summary ? "total: " : "")
            + String(
                format: "%5.1fs frames %6llu  %7.1f MB/s  drops %@  backlog %5.1f/%.0f MB (peak %.1f)  "
                    + "remaining %.2f GB%@  write p50 %llu µs p99 %llu µs  %@",
                seconds,
                frames,
                megabytesPerSecond,
                dropText.isEmpty ? "0" : dropText,
                Double(status.backlogBytes) / 1e6,
                Double(status.backlogCapacity) / 1e6,
                Double(status.backlogPeakBytes) / 1e6,
                Double(status.remainingBytes) / 1e9,
                remaining,
                status.writeLatencyP50Microseconds,
                status.writeLatencyP99Microseconds,
                busy.isEmpty ? "" : "busy: " + busy.joined(separator: ",")
            )
    }
}
