import ArgumentParser
import Foundation
import FrameBus
import FrameBusRecording

/// `framebus play`: publish a recording on the bus, bit-exact, at its recorded timing.
struct PlayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "play",
        abstract: "Publish a recording on a socket path, every frame bit-exact.",
        discussion: """
            Frames go out at their recorded timing (the publisher's own presentation times, kept in the recording), \
            at --fps, or as fast as subscribers take them (--fps 0: a frame waits, up to a second, while subscribers hold \
            all they may). Frames the recording lost are reported to \
            subscribers as drops (bus reasons as recorded; a full backlog as outOfBuffers; a full disk, an I/O \
            error or a format change as discontinuity), and recorded discontinuities as discontinuities. A \
            recording cut short (its recorder was killed) plays up to its last whole frame, then says so on stderr; \
            a damaged one stops with an error (exit status 1).
            """
    )

    @Argument(help: "The recording.")
    var file: String

    @Option(help: "The socket path to listen on (default: $XDG_RUNTIME_DIR/framebus.sock).")
    var path: String?

    @Option(help: "Frames per second instead of the recorded timing; 0 publishes as fast as buffers come free.")
    var fps: Double?

    @Flag(help: "Publish the first frame only once a subscriber has connected.")
    var waitForSubscriber = false

    @Flag(help: "Play the recording again and again until stopped (the benchmark's source).")
    var loop = false

    @Flag(help: "Print no status.")
    var quiet = false

    func validate() throws {
        if let fps, !(fps >= 0 && fps.isFinite) { throw ValidationError("--fps must be 0 (unpaced) or positive") }
    }

    func run() async throws {
        let stopping = StopSignals.install()
        var reader = try RecordingReader(path: file)
        let track = reader.track
        let socketPath = try path ?? SocketPath.default()
        // The pool and holding policy of `framebus publish` (buffers are allocated only while in use): a recorder or
        // a queue-mode subscriber gets the depth it asks for.
        let buffers = PublishCommand.defaultBuffers(maximumSubscribers: 16)
        let pool: PixelBufferPool
        if track.pixelFormat.isCompressed {
            pool = try SurfaceCodec.makeCompressedPool(
                width: track.width,
                height: track.height,
                format: track.pixelFormat,
                allocationThreshold: buffers
            )
        } else {
            pool = try PixelBufferPool(
                attributes: .init(
                    width: track.width,
                    height: track.height,
                    pixelFormat: track.pixelFormat,
                    allocationThreshold: buffers
                )
            )
        }
        var formats = [track.pixelFormat]
        if track.pixelFormat.isCompressed { formats.append(track.pixelFormat.base) }
        var configuration = Publisher.Configuration(path: socketPath, formats: formats)
        configuration.holdingPolicy = PublishCommand.holdingPolicy
        configuration.heldFrameBudget = max(1, buffers - configuration.producerReserve)
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        if !quiet {
            say(
                escapedForTerminal(
                    "playing \(file) (\(track.pixelFormat) \(track.width)x\(track.height)) on \(socketPath)"
                )
            )
        }
        if waitForSubscriber {
            while !stopping.received, publisher.statistics.subscribers.isEmpty {
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        let clock = ContinuousClock()
        let start = clock.now
        var firstTime: MediaTime?
        var timeOffset = 0.0
        var lastOffset = 0.0
        var index = 0
        var ending: RecordingError?
        while !stopping.received {
            // The frame is read from the file straight into the buffer it is published in.
            let buffer = try await publisher.nextPixelBuffer(from: pool)
            let next: RecordedFrame?
            do {
                next = try reader.nextFrame(into: buffer)
            } catch {
                ending = error
                break
            }
            guard let frame = next else {
                guard loop, index > 0 else { break }
                reader = try RecordingReader(path: file)
                continue
            }
            for drop in frame.drops {
                // A hostile count could ask for billions of sequence numbers: a report stands for at most a million.
                publisher.reportDroppedFrames(
                    reason: drop.reason.playbackReason,
                    count: Int(min(drop.frameCount, 1_000_000))
                )
            }
            // When this frame is due.
            var due: ContinuousClock.Instant?
            if let fps {
                if fps > 0 { due = start + .nanoseconds(Int64(Double(index) / fps * 1e9)) }
            } else if frame.presentationTime.isNumeric {
                if firstTime == nil { firstTime = frame.presentationTime }
                var offset = (frame.presentationTime - firstTime!).seconds + timeOffset
                if offset < lastOffset {
                    // The loop started over: continue from where the last pass ended.
                    timeOffset = lastOffset + 1.0 / 30
                    firstTime = frame.presentationTime
                    offset = timeOffset
                }
                lastOffset = offset
                if offset.isFinite, offset >= 0, offset < 1e7 { due = start + .nanoseconds(Int64(offset * 1e9)) }
            } else {
                due = start + .milliseconds(Int64(clamping: frame.timestampMilliseconds))
            }
            if let due {
                while clock.now < due, !stopping.received {
                    try? await Task.sleep(until: min(due, clock.now + .milliseconds(50)), clock: clock)
                }
            }
            if fps == 0 {
                // As fast as subscribers take frames: while they hold all they may, a frame published now would be a
                // drop for them (outOfBuffers), so wait (at most a second) for one to come back.
                let limit = clock.now + .seconds(1)
                while publisher.statistics.subscribers.contains(where: { $0.statistics.heldNow >= $0.maximumHeldFrames }
                ),
                    clock.now < limit, !stopping.received
                {
                    try? await Task.sleep(for: .milliseconds(1))
                }
            }
            let timing = SampleTimingInfo(presentationTimeStamp: HostClock.now, duration: frame.duration)
            try publisher.publish(buffer, timing: timing, discontinuity: frame.isDiscontinuity)
            index += 1
        }
        // Let subscribers take what was published before END_OF_STREAM (at most 5 s).
        let deadline = clock.now + .seconds(5)
        while publisher.heldFrameCount > 0, clock.now < deadline, !stopping.received {
            try? await Task.sleep(for: .milliseconds(5))
        }
        if !quiet { say("played \(index) frames") }
        if let ending {
            FileHandle.standardError.write(Data((escapedForTerminal("framebus play: \(ending)") + "\n").utf8))
            if ending.code != .truncated { throw ExitCode.failure }
        }
    }
}
