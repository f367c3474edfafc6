import ArgumentParser
import Foundation
import FrameBus

#if canImport(Glibc)
import Glibc
#endif

/// `framebus subscribe`: receive frames from a publisher and print live per-second statistics.
struct SubscribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Subscribe to a publisher and print per-second statistics.",
        discussion: """
            Prints one line per second: frames per second, drops by reason, frames held, latency from publish \
            to delivery (p50/p99), bytes per frame. With --json each line is a JSON object, and the last one \
            (with "summary": true) covers the whole run. The line of a second in which the publisher's system \
            pressure changed (the first line, then each change) adds it: "systemPressure": {"level": "serious", \
            "factors": ["cpu"]} (text: "system pressure serious [cpu]").
            """
    )

    @Option(help: "The publisher's socket path (default: $XDG_RUNTIME_DIR/NAME.sock, NAME from --name).")
    var path: String?

    @Option(help: "The stream's name, used for the default socket path (as `framebus publish`'s).")
    var name: String = "framebus"

    @Option(help: "Accepted formats in order of preference, comma separated (e.g. '&8v0,420v').")
    var accept: String = "420v"

    @Option(help: "Queue up to N frames instead of latest-only delivery.")
    var queue: Int?

    @Flag(help: "Print JSON lines.")
    var json = false

    @Option(help: "Stop after this many seconds.")
    var duration: Double?

    @Option(help: "Stop after this many frames.")
    var frames: Int?

    @Flag(help: "Reconnect when the publisher goes away (and wait for it if it is not there yet).")
    var reconnect = false

    @Option(help: "Seconds to wait for a publisher to appear and answer.")
    var connectTimeout: Double = 5

    @Option(
        name: .customLong("allow-publisher-uid"),
        help: "Also accept a publisher running as this user id (repeatable; by default only our own uid)."
    )
    var allowedPublisherUserIDs: [UInt32] = []

    @Flag(help: "Subscribe deferred: frames start once the publisher's other subscribers have their first frame.")
    var deferred = false

    @Flag(help: "Decode compressed frames (measures the consumer's decode cost).")
    var decode = false

    @Option(
        help: """
            The largest frame accepted, WIDTHxHEIGHT (at most that many pixels), or 'none'. A publisher's larger \
            surface ends the subscription before anything is decoded (docs/PROTOCOL.md §8.2). Default: 8192x8192, \
            at most 8192x4352 pixels.
            """
    )
    var maxFrameSize: String?

    @Flag(
        name: .customLong("no-dmabuf"),
        help: "Accept only sealed memfd surfaces: the publisher drops DMA-BUF frames for us (out of buffers)."
    )
    var refusesDMABuf = false

    @Option(help: ArgumentHelp("Sleep this long in each callback (simulates a slow consumer).", visibility: .hidden))
    var delayMilliseconds: Int = 0

    /// `--max-frame-size`: nil for 'none', the library's default when not given.
    func largestFrame() throws -> FrameSizeLimit? {
        guard let maxFrameSize else { return .default }
        if maxFrameSize == "none" { return nil }
        let parts = maxFrameSize.lowercased().split(separator: "x").map { Int($0) }
        guard parts.count == 2, let width = parts[0], let height = parts[1], (1...65536).contains(width),
            (1...65536).contains(height)
        else { throw ValidationError("--max-frame-size must be WIDTHxHEIGHT (each 1…65536) or none") }
        return FrameSizeLimit(maximumWidth: width, maximumHeight: height)
    }

    func validate() throws {
        _ = try largestFrame()
        if let duration, !(duration >= 0 && duration <= 1e9) { throw ValidationError("--duration must be ≥ 0") }
        if !(connectTimeout > 0 && connectTimeout <= 1e6) { throw ValidationError("--connect-timeout must be > 0") }
    }

    func run() async throws {
        // SIGINT and SIGTERM end the run like --duration: the last lines, the summary included, are printed.
        let stopping = StopSignals.install()
        let formats = try accept.split(separator: ",").map { try PixelFormat(String($0)) }
        let socketPath = try path ?? SocketPath.default(name: name)
        var configuration = Subscriber.Configuration(path: socketPath, acceptedFormats: formats)
        if let queue { configuration.delivery = .queue(depth: queue) }
        configuration.reconnects = reconnect
        configuration.connectTimeout = .milliseconds(Int64(connectTimeout * 1000))
        configuration.allowedPublisherUserIDs.formUnion(allowedPublisherUserIDs)
        configuration.acceptsDMABuf = !refusesDMABuf
        configuration.isDeferred = deferred
        configuration.largestFrame = try largestFrame()
        let nudge = Nudge()
        let counter = FrameCounter(
            decode: decode,
            delayMilliseconds: delayMilliseconds,
            frameTarget: frames,
            nudge: nudge
        ) { [json] session in
            // The publisher may grant less than the depth asked for (its holding policy): say both.
            let mode = queue.map { "queue \($0) requested, \(session.grantedQueueDepth) granted" } ?? "latest-only"
            if !json {
                say(
                    escapedForTerminal(
                        "subscribed to \(socketPath): \(session.format), \(mode), "
                            + "holds ≤ \(session.maximumHeldFrames), protocol v\(session.protocolVersion)"
                    )
                )
            }
        }
        let subscriber = try Subscriber(configuration: configuration)
        subscriber.setDelegate(counter, queue: DispatchQueue(label: "framebus.subscribe"))
        func format() -> String { subscriber.session?.format.name ?? "?" }

        // Lines are due each whole second from the start; the run ends exactly at --duration.
        let clock = ContinuousClock()
        let start = clock.now
        let end = duration.map { start + .milliseconds(Int64($0 * 1000)) }
        var previous = subscriber.statistics
        var previousTime = 0.0
        var previousUndecodable = 0
        var second = 0
        while true {
            var wake = clock.now + .milliseconds(100)
            if let end, end < wake { wake = end }
            // Woken early when the last frame asked for arrives or the stream ends: `--frames 1` exits at once.
            await nudge.sleep(until: wake, clock: clock)
            let elapsed = Self.seconds(clock.now - start)
            let ended = counter.ended != nil && !reconnect
            let done =
                ended || stopping.received || end.map { clock.now >= $0 } == true
                || frames.map { counter.frameCount >= $0 || subscriber.statistics.delivered >= $0 } == true
            if Int(elapsed) > second || done {
                second = Int(elapsed)
                let now = subscriber.statistics
                var line = StatisticsLine(
                    seconds: elapsed,
                    interval: elapsed - previousTime,
                    format: format(),
                    current: now,
                    previous: previous,
                    decodeMilliseconds: counter.decodeAverage,
                    undecodable: counter.undecodable.map { $0 - previousUndecodable }
                )
                line.systemPressure = counter.takePressureChange()
                say(json ? line.json(summary: false) : line.text)
                previous = now
                previousUndecodable = counter.undecodable ?? 0
                previousTime = elapsed
            }
            if done { break }
        }
        subscriber.cancel()
        let elapsed = Self.seconds(clock.now - start)
        let total = StatisticsLine(
            seconds: elapsed,
            interval: elapsed,
            format: format(),
            current: subscriber.statistics,
            previous: FrameStatistics(),
            decodeMilliseconds: counter.decodeAverage,
            undecodable: counter.undecodable
        )
        say(json ? total.json(summary: true) : "total: " + total.text)
        if let error = counter.ended {
            if !json { say(escapedForTerminal("stream ended: \(error)")) }
            // Ending is normal when the publisher stops; anything else (refused, timed out, a broken protocol) fails.
            if error.code != .endOfStream { throw ExitCode.failure }
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// Text that came from another process (a publisher's reason, a format name), safe for a terminal: control
/// characters (escape sequences, bells, carriage returns) are printed as Swift escapes.
func escapedForTerminal(_ text: String) -> String {
    var result = ""
    for scalar in text.unicodeScalars {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .privateUse, .surrogate, .unassigned:
            result += scalar.escaped(asASCII: true)
        default:
            result.unicodeScalars.append(scalar)
        }
    }
    return result
}

/// Counts frames for `subscribe` (and optionally decodes them).
final class FrameCounter: SubscriberDelegate, @unchecked Sendable {
    // @unchecked: the mutable fields are guarded by `lock`; callbacks run on one serial queue.
    private let lock = NSLock()
    private var endError: FrameBusError?
    private var decodeNanoseconds: UInt64 = 0
    private var decoded = 0
    /// Compressed frames received but not decoded (a damaged or hostile surface), and why the first one failed.
    private var undecodableCount = 0
    private var scratch: PixelBuffer?
    /// One codec context for every frame: its workspace is reused, so decoding allocates nothing per frame.
    private let codec = SurfaceCodecContext(threadCount: 1)
    private var frames = 0
    let decode: Bool
    let delayMilliseconds: Int
    /// `--frames`: reaching it wakes the command's loop at once.
    let frameTarget: Int?
    let nudge: Nudge
    let onConnect: @Sendable (Subscriber.Session) -> Void

    init(
        decode: Bool,
        delayMilliseconds: Int,
        frameTarget: Int? = nil,
        nudge: Nudge = Nudge(),
        onConnect: @escaping @Sendable (Subscriber.Session) -> Void
    ) {
        self.decode = decode
        self.delayMilliseconds = delayMilliseconds
        self.frameTarget = frameTarget
        self.nudge = nudge
        self.onConnect = onConnect
    }

    /// Frames handed to this delegate so far.
    var frameCount: Int { lock.withLock { frames } }

    func subscriber(_ subscriber: Subscriber, didConnect session: Subscriber.Session) {
        onConnect(session)
    }

    /// The publisher's pressure changes since the last line (`takePressureChange()`).
    private var pressureChange: SystemPressureState?

    func subscriber(_ subscriber: Subscriber, didChangeSystemPressure state: SystemPressureState) {
        lock.withLock { pressureChange = state }
    }

    /// The newest pressure state received since the last call, if it changed.
    func takePressureChange() -> SystemPressureState? {
        lock.withLock {
            defer { pressureChange = nil }
            return pressureChange
        }
    }

    var ended: FrameBusError? { lock.withLock { endError } }
    /// Frames `--decode` could not decode so far (nil without `--decode`).
    var undecodable: Int? { decode ? lock.withLock { undecodableCount } : nil }
    var decodeAverage: Double? {
        lock.withLock { decoded == 0 ? nil : Double(decodeNanoseconds) / Double(decoded) / 1e6 }
    }

    func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {
        if decode, let image = sampleBuffer.imageBuffer, image.pixelFormat.isCompressed {
            let start = DispatchTime.now().uptimeNanoseconds
            do {
                // One scratch buffer, replaced only when the size changes, and only for a frame whose header and
                // table validate (so a surface of zeros allocates nothing); the old one goes first, so at most one
                // exists. The subscriber already refused frames that reach past the memory the publisher committed.
                if scratch == nil || scratch?.width != image.width || scratch?.height != image.height {
                    _ = try SurfaceCodec.tileRowHeight(of: image)
                    scratch = nil
                    scratch = try PixelBuffer(
                        width: image.width,
                        height: image.height,
                        pixelFormat: image.pixelFormat.base
                    )
                }
                if let scratch { try codec.decompress(image, into: scratch) }
                let elapsed = DispatchTime.now().uptimeNanoseconds - start
                lock.withLock {
                    decodeNanoseconds += elapsed
                    decoded += 1
                }
            } catch {
                let isFirst = lock.withLock {
                    undecodableCount += 1
                    return undecodableCount == 1
                }
                // Loudly, once: the count goes on every statistics line.
                if isFirst {
                    let sequence = sampleBuffer.busSequenceNumber.map { "\($0)" } ?? "?"
                    FileHandle.standardError.write(
                        Data(escapedForTerminal("framebus subscribe: cannot decode frame \(sequence): \(error)\n").utf8)
                    )
                }
            }
        }
        if delayMilliseconds > 0 { usleep(UInt32(delayMilliseconds * 1000)) }
        let count = lock.withLock {
            frames += 1
            return frames
        }
        if let frameTarget, count >= frameTarget { nudge.nudge() }
    }

    func subscriber(_ subscriber: Subscriber, didEndWith error: FrameBusError) {
        lock.withLock { endError = error }
        nudge.nudge()
    }
}

/// A sleep that another thread can cut short: `subscribe`'s loop wakes at its next line or as soon as its delegate
/// has what the run waits for, whichever comes first (a nudge before the sleep ends the next sleep at once).
final class Nudge: @unchecked Sendable {
    // @unchecked: `sleeping` and `isPending` are guarded by `lock`.
    private let lock = NSLock()
    private var sleeping: Task<Void, Never>?
    private var isPending = false

    func sleep(until deadline: ContinuousClock.Instant, clock: ContinuousClock) async {
        let task = Task<Void, Never> { _ = try? await Task.sleep(until: deadline, clock: clock) }
        lock.withLock {
            if isPending {
                isPending = false
                task.cancel()
            } else {
                sleeping = task
            }
        }
        await task.value
        lock.withLock { sleeping = nil }
    }

    func nudge() {
        lock.withLock {
            if let sleeping { sleeping.cancel() } else { isPending = true }
        }
    }
}

/// One line of `subscribe` output: the change since the previous line.
struct StatisticsLine {
    var seconds: Double
    var format: String
    var frames: Int
    var framesPerSecond: Double
    var late: Int
    var outOfBuffers: Int
    var discontinuity: Int
    /// Frames the publisher's conversion (the compressed encoder) skipped for this subscriber (`workFellBehind`).
    var workFellBehind: Int
    var held: Int
    var bytesPerFrame: Int
    var p50: Double
    var p99: Double
    var decodeMilliseconds: Double?
    /// Frames received but not decoded in the interval (`--decode` only).
    var undecodable: Int?
    /// The publisher's system pressure, on the line of each second in which it changed.
    var systemPressure: SystemPressureState?

    init(
        seconds: Double,
        interval: Double,
        format: String,
        current: FrameStatistics,
        previous: FrameStatistics,
        decodeMilliseconds: Double?,
        undecodable: Int? = nil
    ) {
        self.seconds = seconds
        self.undecodable = undecodable
        self.format = format
        frames = current.delivered - previous.delivered
        framesPerSecond = Double(frames) / max(interval, 0.001)
        func delta(_ reason: DroppedFrameReason) -> Int {
            current.dropped[reason, default: 0] - previous.dropped[reason, default: 0]
        }
        late = delta(.frameWasLate)
        outOfBuffers = delta(.outOfBuffers)
        discontinuity = delta(.discontinuity)
        workFellBehind = delta(.workFellBehind)
        held = current.heldNow
        let bytes = current.bytesDelivered - previous.bytesDelivered
        bytesPerFrame = frames > 0 ? bytes / frames : 0
        // Percentiles are cumulative (HdrHistogram of the whole run).
        p50 = Double(current.latency.p50) / 1000
        p99 = Double(current.latency.p99) / 1000
        self.decodeMilliseconds = decodeMilliseconds
    }

    var text: String {
        let line = String(
            format: "%5.1fs %@ %6.1f fps  frames %5d  late %4d  outOfBuffers %4d  discontinuity %3d  held %2d  "
                + "p50 %6.1f µs  p99 %7.1f µs  %8d B/frame",
            seconds,
            format,
            framesPerSecond,
            frames,
            late,
            outOfBuffers,
            discontinuity,
            held,
            p50,
            p99,
            bytesPerFrame
        )
        return line + (workFellBehind > 0 ? "  workFellBehind \(workFellBehind)" : "")
            + (undecodable.map { "  undecodable \($0)" } ?? "")
            + (systemPressure.map { "  system pressure \($0)" } ?? "")
    }

    func json(summary: Bool) -> String {
        var object: [String: Any] = [
            "seconds": (seconds * 100).rounded() / 100, "format": format, "frames": frames,
            "framesPerSecond": (framesPerSecond * 10).rounded() / 10, "frameWasLate": late,
            "outOfBuffers": outOfBuffers, "discontinuity": discontinuity, "workFellBehind": workFellBehind, "held": held,
            "p50us": (p50 * 10).rounded() / 10, "p99us": (p99 * 10).rounded() / 10, "bytesPerFrame": bytesPerFrame,
        ]
        if summary { object["summary"] = true }
        if let undecodable { object["undecodable"] = undecodable }
        if let systemPressure {
            object["systemPressure"] = ["level": "\(systemPressure.level)", "factors": systemPressure.factors.names]
        }
        if let decodeMilliseconds { object["decodeMs"] = (decodeMilliseconds * 1000).rounded() / 1000 }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}

/// Writes a line to standard output at once (unbuffered), so a parent reading a pipe or file sees it immediately.
func say(_ text: String, terminator: String = "\n") {
    FileHandle.standardOutput.write(Data((text + terminator).utf8))
}
