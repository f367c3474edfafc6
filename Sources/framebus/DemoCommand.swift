import ArgumentParser
import Foundation
import FrameBus
import FrameBusBench

#if canImport(Glibc)
import Glibc
#endif

/// `framebus demo`: one publisher and two subscriber processes (compressed and raw) for about ten seconds.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run a publisher and two subscriber processes (one compressed, one raw), then summarise.",
        discussion: """
            The publisher (this process) publishes a moving test pattern (or --images) and offers the format \
            and its lossless compressed variant. Two `framebus subscribe` processes connect: one asks for the \
            compressed variant (and decodes every frame), one for raw frames. Each compressed frame is encoded \
            once and shared. After --duration seconds the publisher stops and a summary table is printed.
            """
    )

    @Option(help: "Seconds to run.")
    var duration: Double = 10

    @Option(help: "Frame size, WIDTHxHEIGHT.")
    var size: String = "1280x720"

    @Option(help: "Frames per second.")
    var fps: Double = 30

    @Option(help: "Pixel format (420v, 420f, x420, xf20, BGRA).")
    var format: String = "420v"

    @Option(help: "A folder of PNG images to publish instead of the test pattern (e.g. Corpus/kodak).")
    var images: String?

    func run() async throws {
        // SIGINT and SIGTERM end the demo early; the summary of what ran is still printed.
        let stopping = StopSignals.install()
        let pixelFormat = try PixelFormat(format)
        guard let compressedFormat = pixelFormat.compressedVariant else {
            throw ValidationError("\(format) has no compressed variant")
        }
        // In the private directory README describes ($XDG_RUNTIME_DIR, else ${TMPDIR:-/tmp}/framebus-UID), not in
        // /tmp itself, where another user could take the name first.
        let path = try SocketPath.default(name: "framebus-demo-\(getpid())")
        let producer = try FrameProducer(format: pixelFormat, size: size, imagesFolder: images, buffers: 16)
        let publisher = try Publisher(configuration: .init(path: path, formats: [pixelFormat, compressedFormat]))
        defer { publisher.stop() }
        say("FrameBus demo: \(producer.summary), \(Int(fps)) fps for \(Int(duration)) s")
        say("  publisher  pid \(getpid())  \(path)  offers \(pixelFormat), \(compressedFormat)")

        let executable = try Child.ownExecutable()
        let limit = String(duration + 10)
        let compressed = try Child(
            executable,
            ["subscribe", "--path", path, "--accept", compressedFormat.name, "--json", "--decode", "--duration", limit]
        )
        let raw = try Child(
            executable,
            ["subscribe", "--path", path, "--accept", pixelFormat.name, "--json", "--duration", limit]
        )
        say(
            "  subscriber pid \(compressed.process.processIdentifier)  accepts \(compressedFormat) (decodes each frame)"
        )
        say("  subscriber pid \(raw.process.processIdentifier)  accepts \(pixelFormat)")

        let connectDeadline = Date().addingTimeInterval(15)
        while publisher.subscriberCount < 2, Date() < connectDeadline, compressed.process.isRunning,
            raw.process.isRunning, !stopping.received
        {
            try await Task.sleep(for: .milliseconds(20))
        }
        if stopping.received, publisher.subscriberCount < 2 {
            compressed.terminate()
            raw.terminate()
            return
        }
        guard publisher.subscriberCount == 2 else {
            compressed.terminate()
            raw.terminate()
            throw ValidationError("the subscriber processes did not connect:\n\(compressed.errors)\(raw.errors)")
        }

        let interval = 1.0 / max(fps, 0.1)
        let start = Date()
        var next = start
        var index = 0
        var lastProgress = Date.distantPast
        let interactive = isatty(1) != 0
        while Date().timeIntervalSince(start) < duration, !stopping.received {
            await producer.publishFrame(index: index, on: publisher)
            index += 1
            // On a terminal the progress line rewrites itself; into a pipe or file it is a line per second.
            if Date().timeIntervalSince(lastProgress) >= (interactive ? 0.25 : 1) {
                lastProgress = Date()
                say(
                    Self.progress(publisher.statistics, elapsed: Date().timeIntervalSince(start)),
                    terminator: interactive ? "\r" : "\n"
                )
            }
            next = next.addingTimeInterval(interval)
            let wait = next.timeIntervalSinceNow
            if wait > 0 { try await Task.sleep(for: .seconds(wait)) } else { next = Date() }
        }
        let final = publisher.statistics
        say(Self.progress(final, elapsed: Date().timeIntervalSince(start)))
        publisher.stop()
        compressed.waitForExit(timeout: 10)
        raw.waitForExit(timeout: 10)

        say("")
        let header = [
            "subscriber", "format", "frames", "late", "outOfBuffers", "discontinuity", "behind", "p50 µs", "p99 µs",
            "bytes/frame",
            "decode",
        ]
        var rows: [[String]] = []
        for (name, child) in [("raw", raw), ("compressed", compressed)] {
            guard let summary = child.summary else {
                rows.append([name, "-", "no summary", "", "", "", "", "", "", "", child.errors])
                continue
            }
            func number(_ key: String) -> String { (summary[key] as? NSNumber)?.stringValue ?? "-" }
            rows.append([
                name, summary["format"] as? String ?? "?", number("frames"), number("frameWasLate"),
                number("outOfBuffers"),
                number("discontinuity"), number("workFellBehind"), number("p50us"), number("p99us"),
                number("bytesPerFrame"),
                (summary["decodeMs"] as? NSNumber).map { "\($0) ms/frame" } ?? "-",
            ])
        }
        say(TextTable.numeric([header] + rows))
        let dropped = final.droppedAtSource.values.reduce(0, +)
        say(
            "\npublisher: \(final.published) frames published, \(dropped) dropped before fan-out; "
                + "\(final.conversions) compressed frames encoded (once per frame, shared by every subscriber that asks)."
        )
        let rawBytes = rows.first.flatMap { Double($0[9]) } ?? 0
        let compressedBytes = rows.last.flatMap { Double($0[9]) } ?? 0
        if rawBytes > 0, compressedBytes > 0 {
            say(String(format: "compressed frames are %.1f× smaller than raw ones.", rawBytes / compressedBytes))
        }
        say("p50/p99: from publish() to the subscriber's didOutput; the compressed path includes the encode.")
    }

    static func progress(_ statistics: PublisherStatistics, elapsed: Double) -> String {
        let parts = statistics.subscribers.map { record in
            "\(record.format?.name ?? "?") \(record.statistics.delivered)"
        }
        return String(
            format: "  %4.1f s  published %5d  delivered [%@]  held %2d  dropped %d",
            elapsed,
            statistics.published,
            parts.joined(separator: ", "),
            statistics.total.heldNow,
            statistics.total.droppedTotal + statistics.droppedAtSource.values.reduce(0, +)
        )
    }
}
