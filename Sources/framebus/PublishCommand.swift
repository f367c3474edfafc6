import ArgumentParser
import Foundation
import FrameBus
import ImageSources

#if canImport(Glibc)
import Glibc
#endif

/// `framebus publish`: publish a moving test pattern (or PNG images) at a frame rate.
struct PublishCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish",
        abstract: "Publish frames (a moving test pattern or PNG images) on a socket path.",
        discussion: """
            Subscribers connect with `framebus subscribe --path P`. The default path is \
            $XDG_RUNTIME_DIR/framebus.sock (a private directory of the user), else \
            ${TMPDIR:-/tmp}/framebus-UID/framebus.sock (a private directory made with mode 0700); never put the \
            socket itself in a world-writable directory such as /tmp, where another user can take the name first. With --compressed the lossless \
            compressed variant of the format is offered too; it is encoded once per frame and shared by every \
            subscriber that asks for it, on an encode thread: a frame it cannot encode in time is dropped for the \
            compressed subscribers only. Prints a status line per second, with the frame cost (1.0 = the whole frame \
            interval), the frames shed and the system pressure; --adapt lowers the frame rate under pressure. SIGINT and SIGTERM stop cleanly: every \
            subscriber gets END_OF_STREAM and the socket file is removed.
            """
    )

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

    @Option(help: "Most subscribers at once.")
    var maxSubscribers: Int = 16

    @Option(help: "Pixel format (420v, 420f, x420, xf20, BGRA).")
    var format: String = "420v"

    @Option(help: "Frame size, WIDTHxHEIGHT (ignored for --images, which keep their own size).")
    var size: String = "1920x1080"

    @Option(help: "Frames per second; 0 publishes as fast as buffers come free (unpaced).")
    var fps: Double = 60

    @Option(help: "Frame source: pattern or images.")
    var source: String = "pattern"

    @Option(help: "A folder of PNG images to publish in a loop (implies --source images).")
    var images: String?

    @Flag(help: "Also offer the lossless compressed variant of the format.")
    var compressed = false

    @Option(
        help: """
            Threads that encode each frame for subscribers of the compressed variant. Encoding never runs on the \
            publishing thread: a frame the encoder cannot start in time is dropped for the compressed subscribers \
            only, and the status line says so (cost, shed).
            """
    )
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
            Adapt the frame rate to system pressure, as Apple advises: half of --fps at serious, a quarter at \
            critical, --fps again at nominal. Each frame carries its duration, so subscribers see the new rate.
            """
    )
    var adapt = false

    @Option(help: "Stop after this many seconds.")
    var duration: Double?

    @Option(
        help: """
            Most buffers in the pool (allocated only while in use). Two are the producer's; subscribers hold \
            the rest under the holding policy (docs/PROTOCOL.md §7.3): each gets the depth it asks for plus 4 \
            (a latest-only one 5: GStreamer's framebussrc stays zero-copy behind a sink that keeps its last \
            buffer) while the pool has it, after keeping 3 for each subscriber still to come. Default: 2 + 5 × \
            --max-subscribers + 16, so every subscriber gets what it asks for and one recorder asking for \
            --queue 16 gets 16.
            """
    )
    var buffers: Int?

    @Flag(
        help: """
            Publish the first frame only once a subscriber has connected, so that a recorder started first gets \
            frame 0; SIGINT and SIGTERM still stop while waiting. --duration counts from the first frame.
            """
    )
    var waitForSubscriber = false

    @Option(
        help: """
            Like --wait-for-subscriber, for this many subscribers: a recorder and a reference started first both get \
            frame 0 (at most --max-subscribers).
            """
    )
    var waitForSubscribers: Int?

    @Flag(help: "Print no per-second status.")
    var quiet = false

    func validate() throws {
        guard fps >= 0, fps.isFinite else { throw ValidationError("--fps must be 0 (unpaced) or positive") }
        guard !adapt || fps > 0 else { throw ValidationError("--adapt needs a frame rate (--fps above 0)") }
        guard UInt32(socketMode, radix: 8).map({ $0 <= 0o777 }) == true else {
            throw ValidationError("--socket-mode must be octal, e.g. 600 or 660")
        }
        guard (buffers ?? 3) >= 3 else { throw ValidationError("--buffers must be at least 3") }
        guard (1...Int(UInt16.max)).contains(maxSubscribers) else {
            throw ValidationError("--max-subscribers must be 1…65535")
        }
        guard (1...maxSubscribers).contains(waitForSubscribers ?? 1) else {
            throw ValidationError("--wait-for-subscribers must be 1…--max-subscribers (\(maxSubscribers))")
        }
    }

    /// The producer's 2, the fair minimum (3) for every subscriber, and 16 more for one recorder's queue.
    /// The holding policy of `framebus publish`: the library's, with 4 extra frames per subscriber (as the C
    /// interface's default publisher): a latest-only subscriber may hold 5, so a GStreamer pipeline behind
    /// framebussrc (a sink keeping its last buffer, one in flight, one waiting) stays zero-copy. With 2 it copied
    /// a third of its frames.
    static let holdingPolicy = HoldingPolicy(extraHeldFrames: 4)

    static func defaultBuffers(maximumSubscribers: Int) -> Int {
        let policy = holdingPolicy
        return policy.producerReserve + (1 + policy.extraHeldFrames) * maximumSubscribers + 16
    }

    func run() async throws {
        let path = try SocketPathOption.resolve(path: path, name: name)
        let pixelFormat = try PixelFormat(format)
        guard !pixelFormat.isCompressed else { throw ValidationError("publish a base format; use --compressed") }
        var formats = [pixelFormat]
        if compressed, let variant = pixelFormat.compressedVariant { formats.append(variant) }
        let poolSize = buffers ?? Self.defaultBuffers(maximumSubscribers: maxSubscribers)
        let producer = try FrameProducer(
            format: pixelFormat,
            size: size,
            imagesFolder: images ?? (source == "images" ? "Corpus/kodak" : nil),
            buffers: poolSize
        )
        var configuration = Publisher.Configuration(path: path, formats: formats)
        configuration.holdingPolicy = Self.holdingPolicy
        // The budget from the pool we made, known before anyone connects: a subscriber welcomed before the first
        // frame (--wait-for-subscriber) is told the limit that will hold, not one the publisher lowers later.
        configuration.heldFrameBudget = max(1, poolSize - configuration.producerReserve)
        configuration.socketMode = UInt32(socketMode, radix: 8) ?? 0o600
        configuration.allowedUserIDs.formUnion(allowUID)
        configuration.maximumSubscribers = maxSubscribers
        configuration.conversionThreadCount = encodeThreads
        configuration.compressionEffort = effort
        // Signals first: once the socket exists, a SIGTERM must already mean "stop cleanly" (one that came earlier,
        // even before this line, was kept pending by `main` and is seen now).
        let stopping = StopSignals.install()
        let publisher = try Publisher(configuration: configuration)
        if !quiet {
            say(
                "publishing \(producer.summary) at \(fps == 0 ? "unpaced" : "\(fps) fps") on \(path), offering \(formats)"
            )
        }

        if let waitFor = waitForSubscribers ?? (waitForSubscriber ? 1 : nil) {
            if !quiet { say("waiting for \(waitFor == 1 ? "a subscriber" : "\(waitFor) subscribers") on \(path)") }
            // A subscriber is listed once its handshake is done, so the first frame published after this reaches it.
            while !stopping.received, publisher.statistics.subscribers.count < waitFor {
                try? await Task.sleep(for: .milliseconds(5))
            }
        }

        var rate = fps
        var interval = fps > 0 ? 1.0 / fps : 0
        let policy = configuration.systemPressurePolicy ?? SystemPressurePolicy()
        var pressure = SystemPressureState.nominal
        let start = Date()
        var next = start
        var index = 0
        var lastReport = 0
        while !stopping.received, duration.map({ Date().timeIntervalSince(start) < $0 }) ?? true {
            let state = publisher.systemPressureState
            if state != pressure {
                pressure = state
                let adapted = adapt ? policy.adaptedFrameRate(nominal: fps, current: rate, level: state.level) : rate
                if !quiet {
                    let change = adapted != rate ? ": \(Self.rate(rate)) -> \(Self.rate(adapted)) fps" : ""
                    say("system pressure \(state)" + change)
                }
                rate = adapted
                interval = rate > 0 ? 1.0 / rate : 0
            }
            let frameDuration = rate > 0 ? MediaTime(seconds: 1 / rate, preferredTimescale: 1_000_000_000) : .invalid
            await producer.publishFrame(index: index, on: publisher, waiting: fps == 0, duration: frameDuration)
            index += 1
            if interval > 0 {
                next = next.addingTimeInterval(interval)
                var wait = next.timeIntervalSinceNow
                if wait <= 0 { next = Date() }
                // In slices, so that a stop signal ends even a slow rate's wait at once.
                while wait > 0, !stopping.received {
                    try? await Task.sleep(for: .seconds(min(wait, 0.05)))
                    wait = next.timeIntervalSinceNow
                }
            }
            let elapsed = Int(Date().timeIntervalSince(start))
            if elapsed > lastReport, !quiet {
                lastReport = elapsed
                let statistics = publisher.statistics
                let cost = publisher.cost
                say(
                    "\(elapsed)s published \(statistics.published)  subscribers \(statistics.subscribers.count)  "
                        + "delivered \(statistics.total.delivered)  held \(statistics.total.heldNow)  "
                        + "dropped \(Self.dropSummary(statistics))  cost \(String(format: "%.2f", cost.value))  "
                        + "shed \(cost.framesShed)  pressure \(pressure)  fps \(Self.rate(rate))"
                )
            }
        }
        publisher.stop()
        if let signal = stopping.signalName, !quiet { say("\(signal): stopped, socket removed") }
    }

    static func rate(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(Double((value * 100).rounded()) / 100)
    }

    static func dropSummary(_ statistics: PublisherStatistics) -> String {
        var drops = statistics.total.dropped
        for (reason, count) in statistics.droppedAtSource where reason != .outOfBuffers || drops[reason] == nil {
            drops[reason, default: 0] = max(drops[reason, default: 0], count)
        }
        return DroppedFrameReason.allCases.map { "\($0)=\(drops[$0, default: 0])" }.joined(separator: " ")
    }
}

/// Makes frames for `publish` and `demo`: the moving test pattern in pool buffers, or PNG images.
final class FrameProducer {
    let format: PixelFormat
    let width: Int
    let height: Int
    private let pool: PixelBufferPool?
    private let pattern: TestPattern?
    private let images: [PixelBuffer]

    init(format: PixelFormat, size: String, imagesFolder: String?, buffers: Int) throws {
        self.format = format
        if let imagesFolder {
            let folder = URL(fileURLWithPath: imagesFolder)
            let files = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
                .filter { $0.pathExtension.lowercased() == "png" }.sorted { $0.path < $1.path }
            guard !files.isEmpty else { throw ValidationError("no PNG images in \(imagesFolder)") }
            images = try files.map { url in
                try RGBImage(contentsOfPNGFile: url.path).croppedToEven().makePixelBuffer(pixelFormat: format)
            }
            width = images[0].width
            height = images[0].height
            pool = nil
            pattern = nil
        } else {
            let dimensions = size.lowercased().split(separator: "x").compactMap { Int($0) }
            guard dimensions.count == 2 else { throw ValidationError("size must be WIDTHxHEIGHT") }
            (width, height) = (dimensions[0], dimensions[1])
            pool = try PixelBufferPool(
                attributes: .init(width: width, height: height, pixelFormat: format, allocationThreshold: buffers)
            )
            pattern = try TestPattern(width: width, height: height, pixelFormat: format)
            images = []
        }
    }

    var summary: String {
        images.isEmpty ? "the test pattern, \(width)x\(height) \(format)" : "\(images.count) images, \(format)"
    }

    /// Publishes frame `index`. Paced, a frame the pool cannot supply now is dropped and reported explicitly
    /// (outOfBuffers); unpaced (`waiting`), it waits for a free buffer.
    func publishFrame(
        index: Int,
        on publisher: Publisher,
        waiting: Bool = false,
        duration: MediaTime = .invalid
    ) async {
        let timing = SampleTimingInfo(presentationTimeStamp: HostClock.now, duration: duration)
        if !images.isEmpty {
            _ = try? publisher.publish(images[index % images.count], timing: timing)
            return
        }
        guard let pool, let pattern else { return }
        let buffer: PixelBuffer
        do {
            buffer =
                waiting ? try await publisher.nextPixelBuffer(from: pool) : try publisher.makePixelBuffer(from: pool)
        } catch {
            if error.code == .outOfBuffers { publisher.reportDroppedFrames(reason: .outOfBuffers) }
            return
        }
        do {
            try buffer.lock()
            try pattern.fill(buffer, frameIndex: index)
            try buffer.unlock()
            try publisher.publish(buffer, timing: timing)
        } catch {
            FileHandle.standardError.write("frame \(index): \(error)\n".data(using: .utf8)!)
        }
    }
}
