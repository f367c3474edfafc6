import ArgumentParser
import Foundation
import FrameBus
import FrameBusBench
import Synchronization
import V4L2Capture

#if canImport(Glibc)
import Glibc
#endif

/// `framebus capture`: publish a V4L2 camera's frames, zero-copy (the device writes the memory subscribers map:
/// its own buffers as DMA-BUFs, or our memfd surfaces through udmabuf).
struct CaptureCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "capture",
        abstract: "Publish a V4L2 camera (/dev/videoN) on a socket path, zero-copy.",
        discussion: """
            Nothing is copied for subscribers of the device's format: with --memory mmap the device's own buffers \
            are exported as DMA-BUFs and sent as they are (subscribers must accept DMA-BUF surfaces); with \
            --memory udmabuf the device writes into sealed memfd surfaces of ours, imported through /dev/udmabuf \
            (V4L2_MEMORY_DMABUF), which every subscriber can map; --memory auto (the default) takes udmabuf when \
            /dev/udmabuf exists and the device accepts the import, else mmap, and says which. Multi-planar \
            devices work too (NV12M: one buffer per plane; --device-format NM12). A buffer goes back to the device only when every subscriber \
            released it; subscribers together hold at most --buffers minus 2, so a slow subscriber costs its own \
            frames (outOfBuffers drops), never the device's. Gaps in the device's sequence numbers reach \
            subscribers as dropped frames. With --compressed, subscribers of the compressed variant get a copy \
            the publisher encodes once per frame. Formats: NV12 is published as 420v or 420f (by the quantization \
            the driver reports), P010 as x420 or xf20, XR24 and AR24 as BGRA. Prints a status line per second; \
            SIGINT and SIGTERM stop cleanly; an unplugged device (ENODEV) ends the stream (exit status 3).
            """
    )

    @Option(help: "The V4L2 capture device, e.g. /dev/video0.")
    var device: String

    @Option(help: "The socket path to listen on (default: $XDG_RUNTIME_DIR/NAME.sock, NAME from --name).")
    var path: String?

    @Option(
        help: """
            The stream's name, used for the default socket path ($XDG_RUNTIME_DIR/NAME.sock, else \
            ${TMPDIR:-/tmp}/framebus-UID/NAME.sock), as `framebus subscribe --name` and the C library's \
            fb_default_socket_path(NAME) find it.
            """
    )
    var name: String = "framebus"

    @Option(help: "Mode of the socket file, in octal.")
    var socketMode: String = "600"

    @Option(help: "A user id allowed to subscribe besides our own (repeatable).")
    var allowUID: [UInt32] = []

    @Option(help: "Most subscribers at once (at most --buffers minus 2).")
    var maxSubscribers: Int = 4

    @Option(
        help:
            "Pixel format (420v, 420f, x420, xf20, BGRA); default: the first of NV12, P010, XR24, AR24 the device offers."
    )
    var format: String?

    @Option(
        help: ArgumentHelp(
            "Whose memory the device writes: mmap (its buffers, sent as DMA-BUFs), udmabuf (our memfds, imported), auto.",
            valueName: "mmap|udmabuf|auto"
        )
    )
    var memory: String = "auto"

    @Option(help: "The V4L2 format to ask for (fourcc, e.g. NV12 or NM12 for NV12M); default: chosen by --format.")
    var deviceFormat: String?

    @Option(help: "Frame size, WIDTHxHEIGHT; default: the device's current size.")
    var size: String?

    @Option(help: "Frames per second to ask the device for; default: its current rate.")
    var fps: Double?

    @Flag(help: "Also offer the lossless compressed variant of the format (encoded once per frame).")
    var compressed = false

    @Option(help: "Threads that encode each frame for subscribers of the compressed variant.")
    var encodeThreads: Int = 1

    @Option(
        help: """
            How hard the encoder searches for the compressed variant: fast (the default, for live streams) or best \
            (smaller on screen content, several times slower to encode; for recording when the interval allows).
            """
    )
    var effort: SurfaceCodec.Effort = .fast

    @Flag(
        help: """
            Adapt the frame rate to system pressure, as Apple advises: publish every second device frame at \
            serious, every fourth at critical, every one again at nominal (the others go back to the device \
            unpublished; each frame's duration says the new rate).
            """
    )
    var adapt = false

    @Option(help: "Device buffers to ask for (3…64); two are the producer's, the rest the subscribers' to share.")
    var buffers: Int = 16

    @Option(help: "Stop after this many seconds.")
    var duration: Double?

    @Option(help: "Write one line per published frame to this file: sequence, device sequence, buffer, timestamp.")
    var frameLog: String?

    @Option(
        help: ArgumentHelp(
            "Also write each published frame's image (rows without padding) to DIR/SEQUENCE.raw (for checking delivery).",
            valueName: "dir"
        )
    )
    var frameDump: String?

    @Flag(help: "Print no per-second status.")
    var quiet = false

    @Flag(
        help: """
            Print the start's phases once the first frame is published, on standard error: `start trace: PHASE=NS …`, \
            CLOCK_MONOTONIC nanoseconds of main, the command line parsed, the device opened, queried, its format and \
            interval set, buffers requested and allocated, queued, streaming, the publisher bound, the capture thread \
            started, the first frame dequeued and published (what `framebus bench start --cases capture` splits).
            """
    )
    var traceStart = false

    func validate() throws {
        guard UInt32(socketMode, radix: 8).map({ $0 <= 0o777 }) == true else {
            throw ValidationError("--socket-mode must be octal, e.g. 600 or 660")
        }
        guard (3...64).contains(buffers) else { throw ValidationError("--buffers must be 3…64") }
        if let fps, !(fps > 0 && fps <= 10_000) { throw ValidationError("--fps must be positive") }
        if let size, Self.dimensions(size) == nil { throw ValidationError("--size must be WIDTHxHEIGHT") }
        guard maxSubscribers >= 1 else { throw ValidationError("--max-subscribers must be at least 1") }
        guard Self.memoryMode(memory) != nil else { throw ValidationError("--memory must be mmap, udmabuf or auto") }
        if let deviceFormat, Self.fourCC(deviceFormat) == nil {
            throw ValidationError("--device-format must be a V4L2 fourcc such as NV12 or NM12")
        }
    }

    static func memoryMode(_ text: String) -> V4L2Capture.MemoryMode? {
        switch text.lowercased() {
        case "mmap": .deviceBuffers
        case "udmabuf", "dmabuf": .importedMemFD
        case "auto": .automatic
        default: nil
        }
    }

    static func fourCC(_ text: String) -> V4L2PixelFormat? {
        let bytes = Array(text.utf8)
        guard bytes.count == 4, bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else { return nil }
        let code = bytes.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }
        return V4L2PixelFormat(rawValue: code)
    }

    static func dimensions(_ text: String) -> (Int, Int)? {
        let parts = text.lowercased().split(separator: "x").compactMap { Int($0) }
        guard parts.count == 2, parts[0] > 0, parts[1] > 0 else { return nil }
        return (parts[0], parts[1])
    }

    func run() async throws {
        // The start trace's own phases (--trace-start), beside the capture's.
        var trace: [V4L2Capture.StartPhase] = [
            .init(name: "main", monotonicNanoseconds: BenchStartCommand.enteredMain),
            Self.phase("parsed"),
        ]
        let socketPath = try SocketPathOption.resolve(path: path, name: name)
        var captureConfiguration = V4L2Capture.Configuration(devicePath: device)
        captureConfiguration.adaptsToSystemPressure = adapt
        if let format {
            let pixelFormat = try PixelFormat(format)
            guard !pixelFormat.isCompressed else { throw ValidationError("capture a base format; use --compressed") }
            captureConfiguration.pixelFormat = pixelFormat
        }
        if let size, let (width, height) = Self.dimensions(size) {
            captureConfiguration.width = width
            captureConfiguration.height = height
        }
        captureConfiguration.framesPerSecond = fps
        captureConfiguration.bufferCount = buffers
        captureConfiguration.memoryMode = Self.memoryMode(memory) ?? .automatic
        captureConfiguration.devicePixelFormat = deviceFormat.flatMap(Self.fourCC)
        let capture: V4L2Capture
        do { capture = try V4L2Capture(configuration: captureConfiguration) } catch {
            say("framebus capture: \(error)")
            throw ExitCode(error.code == .deviceLost ? 3 : 1)
        }
        // The device arms (buffers queued, streaming on) while the bus is set up: its first frame overlaps the
        // publisher's start instead of following it.
        do { try capture.arm() } catch {
            say("framebus capture: \(error)")
            throw ExitCode(error.code == .deviceLost ? 3 : 1)
        }
        var configuration = capture.publisherConfiguration(path: socketPath, offeringCompressedVariant: compressed)
        configuration.socketMode = UInt32(socketMode, radix: 8) ?? 0o600
        configuration.allowedUserIDs.formUnion(allowUID)
        configuration.maximumSubscribers = min(maxSubscribers, configuration.heldFrameBudget ?? maxSubscribers)
        configuration.conversionThreadCount = encodeThreads
        configuration.compressionEffort = effort
        let log = frameLog != nil || frameDump != nil ? try FrameLog(path: frameLog, dumpDirectory: frameDump) : nil
        // Signals first: once the socket exists, a SIGTERM must already mean "stop cleanly".
        let stopping = StopSignals.install()
        let publisher = try Publisher(configuration: configuration)
        trace.append(Self.phase("publisherBound"))
        // The capture loop blocks in poll(2): it gets a thread of its own, never one of the cooperative pool's.
        let ending = Mutex<V4L2Capture.EndReason?>(nil)
        let cpuAtStart = Self.processCPUNanoseconds()
        let thread = Thread {
            let end = capture.run(publishingTo: publisher) { frame in log?.record(frame) }
            ending.withLock { $0 = end }
        }
        thread.name = "framebus.capture"
        thread.start()
        trace.append(Self.phase("threadStarted"))
        // Said once the capture thread runs: nothing that can wait comes before the first frame.
        if !quiet {
            say(
                "capturing \(escapedForTerminal(capture.card)) (\(capture.driver)) \(capture.format), "
                    + "\(capture.bufferCount) buffers, on \(socketPath), offering \(configuration.formats)"
            )
        }
        // Always said (even with --quiet): which memory the device writes, and so what subscribers get.
        say(
            "memory: \(Self.memoryName(capture.memoryMode)) (\(capture.memoryModeReason)); frames are "
                + (capture.memoryMode == .importedMemFD ? "memfd" : "DMA-BUF") + " surfaces"
                + (capture.isMultiplanar ? ", multi-planar device" : "")
                + ", 0 bytes copied per frame for \(capture.format.pixelFormat) subscribers"
        )
        var isTraced = !traceStart

        let clock = ContinuousClock()
        let start = clock.now
        var lastReport = 0
        while ending.withLock({ $0 == nil }) {
            if stopping.received || duration.map({ clock.now - start >= .milliseconds(Int64($0 * 1000)) }) == true {
                capture.stop()
            }
            try await Task.sleep(for: .milliseconds(50))
            if !isTraced, case let phases = capture.startPhases, phases.contains(where: { $0.name == "firstPublished" })
            {
                isTraced = true
                let all = (trace + phases).sorted { $0.monotonicNanoseconds < $1.monotonicNanoseconds }
                let line = "start trace: " + all.map(\.description).joined(separator: " ") + "\n"
                FileHandle.standardError.write(Data(line.utf8))
            }
            let elapsed = Int(SubscribeCommand.seconds(clock.now - start))
            if elapsed > lastReport, !quiet {
                lastReport = elapsed
                let skipped = capture.statistics.framesSkippedForPressure
                say(
                    "\(elapsed)s " + Self.status(capture.statistics, publisher.statistics)
                        + "  cost \(String(format: "%.2f", publisher.cost.value))  shed \(publisher.cost.framesShed)"
                        + "  pressure \(publisher.systemPressureState)" + (adapt ? "  skipped \(skipped)" : "")
                )
            }
        }
        let end = ending.withLock { $0 } ?? .stopped
        publisher.stop()
        log?.close()
        let statistics = capture.statistics
        let cpu = Self.processCPUNanoseconds() - cpuAtStart
        let perFrame = statistics.framesCaptured > 0 ? Double(cpu) / Double(statistics.framesCaptured) / 1000 : 0
        if !quiet {
            say(
                "total: " + Self.status(statistics, publisher.statistics)
                    + String(format: "  cpu %.1f µs/frame", perFrame)
            )
        }
        switch end {
        case .stopped, .publisherStopped:
            if let signal = stopping.signalName, !quiet { say("\(signal): stopped, socket removed") }
        case .deviceLost(let error):
            say("framebus capture: \(device) is gone, stream ended: \(error)")
            throw ExitCode(3)
        case .failed(let error):
            say("framebus capture: stream ended: \(error)")
            throw ExitCode.failure
        }
    }

    static func memoryName(_ mode: V4L2Capture.MemoryMode) -> String {
        switch mode {
        case .deviceBuffers: "mmap"
        case .importedMemFD: "udmabuf"
        case .automatic: "auto"
        }
    }

    static func status(_ capture: V4L2Capture.Statistics, _ publisher: PublisherStatistics) -> String {
        "captured \(capture.framesCaptured)  published \(capture.framesPublished)  "
            + "device queue \(capture.buffersQueued)/\(capture.bufferCount) (lowest \(capture.lowestBuffersQueued))  "
            + "held \(capture.buffersHeld)  lost \(capture.framesLostUpstream + capture.framesLostWithoutBuffers)  "
            + "late \(capture.framesDroppedLate)  errors \(capture.errorFrames)  "
            + "subscribers \(publisher.subscribers.count)  delivered \(publisher.total.delivered)  "
            + "conversions \(publisher.conversions)  "
            + "dropped \(PublishCommand.dropSummary(publisher))"
    }

    static func phase(_ name: String) -> V4L2Capture.StartPhase {
        V4L2Capture.StartPhase(name: name, monotonicNanoseconds: UInt64(clamping: HostClock.now.value))
    }

    static func processCPUNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}

/// `--frame-log` and `--frame-dump`: one line per published frame, `frame seq=S device=D buffer=B pts=NS`, and the
/// image bytes packed without row padding in DIR/S.raw (bulk copies: cheap next to hashing byte by byte).
final class FrameLog: @unchecked Sendable {
    // @unchecked: written only by the capture thread, closed after it ended.
    private let handle: FileHandle?
    private let dumpDirectory: URL?

    init(path: String?, dumpDirectory: String?) throws {
        if let path {
            guard FileManager.default.createFile(atPath: path, contents: nil) else {
                throw ValidationError("cannot create \(path)")
            }
            handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        } else {
            handle = nil
        }
        self.dumpDirectory = dumpDirectory.map { URL(fileURLWithPath: $0) }
        if let directory = self.dumpDirectory {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
    }

    func record(_ frame: V4L2Capture.CapturedFrame) {
        if let dumpDirectory {
            var image = Data()
            let buffer = frame.pixelBuffer
            do {
                try buffer.lock(.readOnly)
                defer { try? buffer.unlock(.readOnly) }
                for index in 0..<buffer.planeCount {
                    let plane = buffer.planeLayout(index)
                    let rowBytes = plane.width * plane.bytesPerElement
                    try buffer.withUnsafeBytes(ofPlane: index) { bytes in
                        guard let base = bytes.baseAddress else { return }
                        for row in 0..<plane.height {
                            image.append(Data(bytes: base + row * plane.bytesPerRow, count: rowBytes))
                        }
                    }
                }
                try image.write(to: dumpDirectory.appendingPathComponent("\(frame.sequence).raw"))
            } catch {
                FileHandle.standardError.write("frame \(frame.sequence): \(error)\n".data(using: .utf8)!)
            }
        }
        let line =
            "frame seq=\(frame.sequence) device=\(frame.deviceSequence) buffer=\(frame.bufferIndex) "
            + "pts=\(frame.timing.presentationTimeStamp.value)\n"
        handle?.write(line.data(using: .utf8)!)
    }

    func close() { try? handle?.close() }
}
