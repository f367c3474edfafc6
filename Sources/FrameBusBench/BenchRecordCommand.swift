import ArgumentParser
import Foundation
import FrameBus

#if canImport(Glibc)
import Glibc
#endif

/// `framebus bench record`: what the recorder sustains against this disk's own O_DIRECT speed, measured in the same
/// run, alone and beside a page-cache hog.
package struct BenchRecordCommand: ParsableCommand {
    package static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Measure `framebus record` against the disk's sequential O_DIRECT write speed (same run).",
        discussion: """
            Rows: the floors (dd oflag=direct bs=4M of zeros; 4 MiB O_DIRECT writes of the recorded bytes from \
            one buffer, by python3, before and after each row: the ratios are to their mean), `framebus record` raw \
            (2 writes in flight, and 1), compressed and with --no-direct \
            (a buffered writer), GStreamer's `framebussrc ! queue ! filesink` (when the plugin is found), each fed by `framebus play --loop --fps 0` of a one-second recording of the \
            images or pattern (as fast as the recorder takes frames) for --seconds; then, with --hog, the same rows beside a process writing a file through the page cache. \
            Each row: MB/s written, frames/s, drops, the backlog's peak, write latency p50/p99; a ratio to the floor. \
            Files go to --directory (on the disk to measure) and are removed.
            """
    )

    package init() {}

    @Option(help: "A directory on the disk to measure.")
    var directory: String = FileManager.default.currentDirectoryPath

    @Option(help: "Seconds per row.")
    var seconds: Double = 5

    @Option(help: "Frame size of the test pattern, WIDTHxHEIGHT (ignored with --images).")
    var size: String = "1920x1080"

    @Option(help: "Pixel format published.")
    var format: String = "420v"

    @Option(help: "A folder of PNG images to publish instead of the test pattern.")
    var images: String?

    @Flag(help: "Also run every row beside a page-cache hog (a buffered writer of a large file).")
    var hog = false

    @Option(
        help: """
            Where GStreamer finds the FrameBus plugin (libgstframebus.so, `make -C gstreamer`) for the \
            `framebussrc ! queue ! filesink` row (default: $GST_PLUGIN_PATH); the row is left out without it.
            """
    )
    var gstPluginPath: String?

    @Option(help: "Write the rows as JSON to this file.")
    var json: String?

    @Option(help: "Write the rows as an SVG picture to this file (MB/s bars, each with the floor it is compared to).")
    var plot: String?

    package func validate() throws {
        guard seconds > 0, seconds <= 3600 else { throw ValidationError("--seconds must be 0…3600") }
    }

    struct Row: Codable {
        var name: String
        var hog: Bool
        var megabytesPerSecond: Double
        var framesPerSecond: Double?
        var drops: Int?
        var backlogPeakBytes: Int?
        var writeP50us: Int?
        var writeP99us: Int?
        var ratioToFloor: Double?
        var direct: Bool?
        /// The floor the ratio is to: the data floor's mean right before and after the row (or the zeros floor).
        var floorMegabytesPerSecond: Double?
    }

    package func run() throws {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        var rows: [Row] = []
        print(
            "framebus bench record: \(directory), \(seconds) s per row, \(images.map { "images \($0)" } ?? "\(size) pattern") \(format)"
        )
        // The sources: short recordings (raw and compressed) made once, then played in a loop with `--fps 0`, which
        // publishes as fast as the recorder takes frames (it waits while the recorder holds all it may): so the
        // recorder, not the producer, sets the pace.
        let rawSeed = URL(fileURLWithPath: directory).appendingPathComponent("framebus-bench-seed-\(getpid()).mkv")
        let compressedSeed = URL(fileURLWithPath: directory).appendingPathComponent(
            "framebus-bench-seedc-\(getpid()).mkv"
        )
        defer {
            try? FileManager.default.removeItem(at: rawSeed)
            try? FileManager.default.removeItem(at: compressedSeed)
        }
        try makeSeed(executable: executable, output: rawSeed, compressed: false)
        try makeSeed(executable: executable, output: compressedSeed, compressed: true)
        // The floor of the bytes recorded: 4 MiB of the raw seed in page-aligned memory, written again and again
        // with O_DIRECT (one write at a time, like dd, but with no copy per write: dd from a file in memory is bound
        // by its own read copy on this loaded machine, 0.7 GB/s). A virtual disk can take zeros faster than data (the
        // host detects or compresses them), so the ratio is to this floor, measured right before and after each row
        // (the disk is shared and its speed moves from one second to the next).
        let dataFloorSource: URL? = rawSeed
        let gstEnvironment = gstreamerEnvironment()
        if gstEnvironment == nil {
            print("(no GStreamer row: gst-launch-1.0 or the framebussrc element was not found; see --gst-plugin-path)")
        }
        for withHog in hog ? [false, true] : [false] {
            let hogProcess = withHog ? try startHog() : nil
            defer { hogProcess?.terminate() }
            let floor = try measureFloor()
            rows.append(
                Row(
                    name: "floor: dd oflag=direct bs=4M of zeros",
                    hog: withHog,
                    megabytesPerSecond: floor,
                    ratioToFloor: nil
                )
            )
            print(Self.text(rows.last!))
            var dataFloor = dataFloorSource.flatMap { measureDataFloor(seed: $0) }
            if let dataFloor {
                rows.append(
                    Row(
                        name: "floor: O_DIRECT 4 MiB writes of the recorded bytes",
                        hog: withHog,
                        megabytesPerSecond: dataFloor,
                        ratioToFloor: 1
                    )
                )
                print(Self.text(rows.last!))
            }
            for (name, extra) in [
                ("record raw", [String]()),
                ("record raw, 1 write in flight", ["--writes-in-flight", "1"]),
                ("record compressed", ["--compressed"]),
                ("record raw, buffered (--no-direct)", ["--no-direct"]),
            ] {
                let seed = extra.contains("--compressed") ? compressedSeed : rawSeed
                var row = try measureRecord(executable: executable, name: name, seed: seed, recordArguments: extra)
                row.hog = withHog
                if let before = dataFloor, let source = dataFloorSource, let after = measureDataFloor(seed: source) {
                    let mean = (before + after) / 2
                    row.floorMegabytesPerSecond = mean
                    row.ratioToFloor = mean > 0 ? row.megabytesPerSecond / mean : nil
                    dataFloor = after
                } else {
                    row.floorMegabytesPerSecond = floor
                    row.ratioToFloor = floor > 0 ? row.megabytesPerSecond / floor : nil
                }
                rows.append(row)
                print(Self.text(row))
            }
            if let gstEnvironment {
                var row = try measureGStreamer(executable: executable, seed: rawSeed, environment: gstEnvironment)
                row.hog = withHog
                if let before = dataFloor, let after = measureDataFloor(seed: rawSeed) {
                    let mean = (before + after) / 2
                    row.floorMegabytesPerSecond = mean
                    row.ratioToFloor = mean > 0 ? row.megabytesPerSecond / mean : nil
                    dataFloor = after
                }
                rows.append(row)
                print(Self.text(row))
            }
        }
        if let json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(rows).write(to: URL(fileURLWithPath: json))
        }
        if let plot {
            let source = images == nil ? "\(size) pattern" : "images"
            let title = "framebus bench record: \(source) \(format), \(seconds) s per row"
            try Data(Self.svg(rows, title: title).utf8).write(to: URL(fileURLWithPath: plot))
            print("wrote \(plot)")
        }
    }

    /// The rows as horizontal bars of MB/s on one linear scale, a tick on each record row's bar at the floor it is
    /// compared to, its ratio to the right; rows beside the hog in orange.
    static func svg(_ rows: [Row], title: String) -> String {
        let rowHeight = 22.0
        let labelWidth = 330.0
        let barWidth = 520.0
        let top = 40.0
        let width = labelWidth + barWidth + 110
        let height = top + Double(rows.count) * rowHeight + 40
        let largest = max(1, rows.map { max($0.megabytesPerSecond, $0.floorMegabytesPerSecond ?? 0) }.max() ?? 1)
        func x(_ value: Double) -> Double { labelWidth + value / largest * barWidth }
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" \
            font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="10" y="20" font-size="14">\(BenchPlot.escape(title))</text>

            """
        for (index, row) in rows.enumerated() {
            let y = top + Double(index) * rowHeight
            let colour = row.name.hasPrefix("floor") ? "#888888" : (row.hog ? "#e07b00" : "#2a6fdb")
            let label = row.name + (row.hog ? " (hog)" : "")
            svg += "<text x=\"10\" y=\"\(BenchPlot.format(y + 15))\">\(BenchPlot.escape(label))</text>\n"
            svg +=
                "<rect x=\"\(BenchPlot.format(labelWidth))\" y=\"\(BenchPlot.format(y + 4))\" "
                + "width=\"\(BenchPlot.format(x(row.megabytesPerSecond) - labelWidth))\" height=\"14\" fill=\"\(colour)\"/>\n"
            if let floor = row.floorMegabytesPerSecond, !row.name.hasPrefix("floor") {
                svg +=
                    "<line x1=\"\(BenchPlot.format(x(floor)))\" x2=\"\(BenchPlot.format(x(floor)))\" "
                    + "y1=\"\(BenchPlot.format(y + 1))\" y2=\"\(BenchPlot.format(y + 21))\" stroke=\"black\" stroke-width=\"2\"/>\n"
            }
            var value = String(format: "%.0f MB/s", row.megabytesPerSecond)
            if let ratio = row.ratioToFloor, !row.name.hasPrefix("floor") { value += String(format: " ×%.2f", ratio) }
            svg +=
                "<text x=\"\(BenchPlot.format(labelWidth + barWidth + 8))\" y=\"\(BenchPlot.format(y + 15))\">"
                + "\(BenchPlot.escape(value))</text>\n"
        }
        svg +=
            "<text x=\"10\" y=\"\(BenchPlot.format(height - 14))\" fill=\"#555555\">bars: MB/s written; black tick: "
            + "the floor the row is compared to (O_DIRECT writes of the recorded bytes, before and after it)</text>\n"
        return svg + "</svg>\n"
    }

    static func text(_ row: Row) -> String {
        var text = String(
            format: "%-40@ %@ %8.1f MB/s",
            row.name as NSString,
            row.hog ? "hog" : "   ",
            row.megabytesPerSecond
        )
        if let fps = row.framesPerSecond { text += String(format: " %7.1f fps", fps) }
        if let drops = row.drops { text += "  drops \(drops)" }
        if let peak = row.backlogPeakBytes { text += String(format: "  backlog peak %.1f MB", Double(peak) / 1e6) }
        if let p50 = row.writeP50us, let p99 = row.writeP99us { text += "  write p50 \(p50) µs p99 \(p99) µs" }
        if let ratio = row.ratioToFloor {
            text += String(format: "  ×%.2f of floor", ratio)
            if let floor = row.floorMegabytesPerSecond { text += String(format: " (%.0f MB/s)", floor) }
        }
        return text
    }

    /// dd's sequential O_DIRECT write speed of zeros: 4 MiB blocks, as many as `seconds` at 1 GB/s, at most 2 GiB.
    func measureFloor() throws -> Double {
        let file = URL(fileURLWithPath: directory).appendingPathComponent("framebus-bench-floor-\(getpid())")
        defer { try? FileManager.default.removeItem(at: file) }
        let count = max(16, min(512, Int(seconds * 250)))
        let start = Date()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/dd")
        process.arguments = [
            "if=/dev/zero", "of=\(file.path)", "bs=4M", "count=\(count)", "oflag=direct", "conv=fdatasync",
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        let elapsed = Date().timeIntervalSince(start)
        guard process.terminationStatus == 0 else { return 0 }
        return Double(count) * 4 * 1_048_576 / 1e6 / elapsed
    }

    /// The O_DIRECT write speed of the recorded bytes (4 MiB of the seed, 1 MiB in, written 256 times from one
    /// page-aligned buffer, then fdatasync), by a few lines of python3; nil without python3.
    func measureDataFloor(seed: URL) -> Double? {
        let script = """
            import mmap, os, sys, time
            block = 4 << 20
            buffer = mmap.mmap(-1, block)
            with open(sys.argv[1], "rb") as f:
                f.seek(1 << 20)
                buffer.write(f.read(block))
            fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
            start = time.monotonic()
            for index in range(256):
                os.pwrite(fd, buffer, index * block)
            os.fdatasync(fd)
            elapsed = time.monotonic() - start
            os.close(fd)
            os.unlink(sys.argv[2])
            print(256 * block / 1e6 / elapsed)
            """
        let file = URL(fileURLWithPath: directory).appendingPathComponent("framebus-bench-datafloor-\(getpid())")
        defer { try? FileManager.default.removeItem(at: file) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, seed.path, file.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return Double(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Records 30 frames (one second) of the publisher's images or pattern into `output`.
    func makeSeed(executable: URL, output: URL, compressed: Bool) throws {
        let socket = "/tmp/fbbench-seed-\(getpid())-\(compressed ? "c" : "r").sock"
        var publish = [
            "publish", "--path", socket, "--format", format, "--fps", "30", "--duration", "1",
            "--wait-for-subscriber", "--quiet",
        ]
        if let images { publish += ["--images", images] } else { publish += ["--size", size] }
        if compressed { publish.append("--compressed") }
        let recorder = try Child(
            executable,
            ["record", "--path", socket, "--output", output.path, "--json"] + (compressed ? ["--compressed"] : [])
        )
        let publisher = try Child(executable, publish)
        recorder.waitForExit(timeout: 120)
        publisher.waitForExit(timeout: 10)
        guard recorder.summary != nil else { throw ValidationError("could not record a seed: \(recorder.errors)") }
    }

    func measureRecord(executable: URL, name: String, seed: URL, recordArguments: [String]) throws -> Row {
        let socket = "/tmp/fbbench-record-\(getpid())-\(UUID().uuidString.prefix(6)).sock"
        let file = URL(fileURLWithPath: directory).appendingPathComponent("framebus-bench-\(getpid()).mkv")
        defer { try? FileManager.default.removeItem(at: file) }
        let publish = ["play", seed.path, "--path", socket, "--fps", "0", "--loop", "--wait-for-subscriber", "--quiet"]
        let publisher = try Child(executable, publish)
        defer { publisher.terminate() }
        let recorder = try Child(
            executable,
            ["record", "--path", socket, "--output", file.path, "--json", "--duration", "\(seconds)"] + recordArguments
        )
        recorder.waitForExit(timeout: seconds + 60)
        guard let summary = recorder.summary else {
            return Row(name: name + " (no summary: \(recorder.errors.prefix(200)))", hog: false, megabytesPerSecond: 0)
        }
        let drops = (summary["drops"] as? [String: Int])?.values.reduce(0, +)
        return Row(
            name: name,
            hog: false,
            megabytesPerSecond: summary["megabytesPerSecond"] as? Double ?? 0,
            framesPerSecond: summary["framesPerSecond"] as? Double,
            drops: drops,
            backlogPeakBytes: summary["backlogPeakBytes"] as? Int,
            writeP50us: summary["writeP50us"] as? Int,
            writeP99us: summary["writeP99us"] as? Int,
            direct: summary["direct"] as? Bool
        )
    }

    /// The environment gst-launch-1.0 finds framebussrc in, or nil when it does not.
    func gstreamerEnvironment() -> [String: String]? {
        guard let pluginPath = gstPluginPath ?? ProcessInfo.processInfo.environment["GST_PLUGIN_PATH"] else {
            return nil
        }
        let environment = ["GST_PLUGIN_PATH": pluginPath]
        let inspect = Process()
        inspect.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        inspect.arguments = ["gst-inspect-1.0", "framebussrc"]
        inspect.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        inspect.standardOutput = FileHandle.nullDevice
        inspect.standardError = FileHandle.nullDevice
        guard (try? inspect.run()) != nil else { return nil }
        inspect.waitUntilExit()
        return inspect.terminationStatus == 0 ? environment : nil
    }

    /// GStreamer's recorder: `framebussrc ! queue ! filesink` (buffered writes through the page cache, no sync) fed
    /// by the same `play --fps 0 --loop`. MB/s is the file's growth over --seconds; frames/s and drops are the
    /// publisher's own statistics of that subscriber (a monitor's reports at the start and end of the window).
    func measureGStreamer(executable: URL, seed: URL, environment: [String: String]) throws -> Row {
        let name = "gst framebussrc ! queue ! filesink"
        let socket = "/tmp/fbbench-gst-\(getpid())-\(UUID().uuidString.prefix(6)).sock"
        let file = URL(fileURLWithPath: directory).appendingPathComponent("framebus-bench-gst-\(getpid()).raw")
        defer { try? FileManager.default.removeItem(at: file) }
        let publisher = try Child(
            executable,
            ["play", seed.path, "--path", socket, "--fps", "0", "--loop", "--wait-for-subscriber", "--quiet"]
        )
        defer { publisher.terminate() }
        // The same queue depth as a recorder asks for, so that play's --fps 0 waits for it instead of replacing
        // frames it has not taken yet (latest-only would drop them as frameWasLate).
        let pipeline = try Child(
            URL(fileURLWithPath: "/usr/bin/env"),
            Self.unblockingSignals + [
                "gst-launch-1.0", "-q", "-e", "framebussrc", "socket-path=\(socket)", "queue-depth=8",
                "connect-timeout=10000000000", "!", "queue", "!", "filesink", "location=\(file.path)",
            ],
            environment: environment
        )
        defer {
            // The publisher's end is the pipeline's end of stream (framebussrc without reconnect); SIGINT (-e: end of
            // stream) should it still run, then SIGKILL.
            publisher.terminate()
            let deadline = Date().addingTimeInterval(5)
            while pipeline.process.isRunning, Date() < deadline { usleep(10_000) }
            if pipeline.process.isRunning { kill(pipeline.process.processIdentifier, SIGINT) }
            pipeline.waitForExit(timeout: 5)
        }
        func failed(_ why: String) -> Row { Row(name: name + " (\(why))", hog: false, megabytesPerSecond: 0) }
        // The monitor: once the publisher exists, and the first report in which the pipeline got frames.
        var monitor: PublisherMonitor?
        let connectBy = Date().addingTimeInterval(20)
        while monitor == nil, Date() < connectBy, pipeline.process.isRunning {
            monitor = try? PublisherMonitor(path: socket, timeout: .seconds(1))
            if monitor == nil { usleep(50_000) }
        }
        guard let monitor else { return failed("no publisher or pipeline: \(pipeline.errors.prefix(200))") }
        func subscriber(_ report: PublisherMonitor.Report) -> PublisherMonitor.SubscriberReport? {
            report.subscribers.first { $0.processID == pipeline.process.processIdentifier }
        }
        func fileSize() -> Double {
            Double((try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? NSNumber)??.int64Value ?? 0)
        }
        var first: (report: PublisherMonitor.Report, bytes: Double)?
        let startBy = Date().addingTimeInterval(20)
        while first == nil, Date() < startBy {
            guard let report = try monitor.nextReport(timeout: .seconds(5)) else { return failed("publisher stopped") }
            if let entry = subscriber(report), entry.delivered > 0 { first = (report, fileSize()) }
        }
        guard let first, let start = subscriber(first.report) else { return failed("the pipeline got no frames") }
        var last = first
        while Double(last.report.time &- first.report.time) / 1e9 < seconds {
            guard let report = try monitor.nextReport(timeout: .seconds(5)) else { break }
            last = (report, fileSize())
        }
        guard let end = subscriber(last.report) else { return failed("the pipeline left early") }
        let elapsed = Double(last.report.time &- first.report.time) / 1e9
        guard elapsed > 0 else { return failed("no window") }
        // Every drop of the pipeline's subscription since it connected, by the publisher's count.
        let drops = end.dropped.values.reduce(0, &+)
        return Row(
            name: name,
            hog: false,
            megabytesPerSecond: (last.bytes - first.bytes) / 1e6 / elapsed,
            framesPerSecond: Double(end.delivered &- min(end.delivered, start.delivered)) / elapsed,
            drops: Int(clamping: drops),
            direct: false
        )
    }

    /// A page-cache hog: a shell loop writing a 4 GiB file through the page cache again and again.
    func startHog() throws -> Process {
        let file = URL(fileURLWithPath: directory).appendingPathComponent("framebus-bench-hog-\(getpid())").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = Self.unblockingSignals + [
            "/bin/sh", "-c",
            // SIGTERM (terminate()) ends the running dd too and removes the file: a dd left behind would go on
            // writing 4 GiB.
            "trap 'kill $pid 2>/dev/null; rm -f \(file); exit 0' TERM INT; "
                + "while :; do dd if=/dev/zero of=\(file) bs=1M count=4096 2>/dev/null & pid=$!; wait $pid; done",
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Let it fill the cache before the rows start.
        Thread.sleep(forTimeInterval: 3)
        return process
    }

    /// A prefix that runs a command with no signal blocked. `framebus` blocks SIGINT and SIGTERM in every thread (a
    /// thread of its own waits for them) and a child inherits that mask across exec: a shell would never run its
    /// TERM trap, gst-launch-1.0 never see its SIGINT. python3 (which the floor needs anyway) clears the mask, then
    /// execs the command.
    static let unblockingSignals = [
        "python3", "-c",
        "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execvp(sys.argv[1], sys.argv[1:])",
    ]
}
