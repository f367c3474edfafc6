import Foundation
import FrameBus

#if canImport(Glibc)
import Glibc
#endif

/// GStreamer's shmsink → shmsrc, measured in `framebus bench bus` beside the bus, at the same frame sizes and rates.
///
/// The measurement is a small C program, `Benchmarks/gst-shm/gst-shm-bench.c` (GStreamer has no Swift API and the
/// core package must not depend on it), built on first use with `make` into `.build/gst-shm/` of the package, or
/// taken from `FRAMEBUS_GST_SHM_BENCH`. Each run starts its own producer and consumer processes and prints one JSON
/// object; this type turns it into the same ``BenchResult`` rows as the other transports, plus what only these rows
/// have (maximum latency, gaps, allocation retries, the shared-memory area's size).
///
/// Two paths: `gst-zerocopy` (the application allocates its frames from the allocator shmsink proposes, so the frame
/// is written once, in the shared area) and `gst-copy` (the application's own memory, copied by shmsink into the
/// area). When GStreamer, its development files or the shm elements are missing, the rows are skipped and the reason
/// printed.
struct GStreamerShmBench {
    /// The transports this adds to `--transports`.
    static let transports = ["gst-zerocopy", "gst-copy"]

    /// What a run adds to `bench bus`: rows for the table and the JSON, and the details only these rows have.
    struct Rows {
        var results: [BenchResult] = []
        var details: [[String: Any]] = []
        var version: String?
        var skipped: String?

        /// The `gstreamer` object of the JSON.
        var json: [String: Any] {
            var object: [String: Any] = ["rows": details]
            if let version { object["version"] = version }
            if let skipped { object["skipped"] = skipped }
            return object
        }
    }

    /// Measures the paths named in `transports` for each case and rate; never throws: a failure becomes a skip.
    static func measure(
        transports: Set<String>,
        cases: [(PixelFormat, Int, Int)],
        rates: [Int],
        frames: Int
    ) -> Rows {
        var rows = Rows()
        let paths = Self.transports.filter { transports.contains($0) }
        guard !paths.isEmpty else { return rows }
        let harness: URL
        switch findOrBuildHarness() {
        case .success(let url): harness = url
        case .failure(let reason):
            rows.skipped = reason.description
            say("gstreamer: skipped — \(reason.description)")
            return rows
        }
        let probe = run(harness, ["probe"], timeout: 60)
        guard probe.status == 0 else {
            rows.skipped = probe.errors.isEmpty ? "gst-shm-bench probe failed (\(probe.status))" : probe.errors
            say("gstreamer: skipped — \(rows.skipped!)")
            return rows
        }
        rows.version = probe.output.split(separator: ":").first.map(String.init)
        say("gstreamer: \(probe.output)")

        for path in paths {
            for (format, width, height) in cases {
                guard let gstFormat = gstreamerFormat(format) else {
                    say("gstreamer: \(format.name) has no GStreamer raw format here; skipped")
                    continue
                }
                for rate in rates {
                    var count = rate == 0 ? frames * 10 : rate >= 1000 ? frames * 4 : frames
                    if path == "gst-copy" {
                        // A copy costs milliseconds: cap each run at about 4 s of frames, as stream-copy does.
                        let perSecond = width * height >= 3840 * 2160 ? 150 : 2000
                        count = max(20, min(count, (rate == 0 ? perSecond : min(rate, perSecond)) * 4))
                    }
                    let arguments = [
                        "run", "--path", path == "gst-zerocopy" ? "zerocopy" : "copy", "--format", gstFormat,
                        "--width", "\(width)", "--height", "\(height)", "--rate", "\(rate)", "--frames", "\(count)",
                        "--warmup", "48", "--shm-frames", "32",
                    ]
                    let outcome = run(harness, arguments, timeout: 300)
                    guard outcome.status == 0, let row = parse(outcome.output, transport: path, format: format) else {
                        say(
                            "gstreamer: \(path) \(format.name) \(width)x\(height) rate \(rate) failed "
                                + "(status \(outcome.status)): \(outcome.errors)"
                        )
                        continue
                    }
                    rows.results.append(row.result)
                    rows.details.append(row.details)
                    say(
                        row.result.line
                            + String(format: ", max %.1f µs, %d gaps", row.maximumMicroseconds, row.gaps)
                            + (row.allocationRetries > 0 ? ", \(row.allocationRetries) allocation retries" : "")
                    )
                }
            }
        }
        return rows
    }

    /// Lines comparing framebus with each GStreamer path, case by case, from the same run: ratios below 1 mean
    /// framebus is lower (latency) or, for frames/s, that GStreamer is faster.
    static func comparisons(_ results: [BenchResult]) -> [String] {
        var lines: [String] = []
        for bus in results where bus.transport == "framebus" {
            for peer in results
            where transports.contains(peer.transport) && peer.format == bus.format && peer.width == bus.width
                && peer.height == bus.height && peer.rateHz == bus.rateHz
            {
                var line = String(
                    format: "framebus / %@  %@ %@ %@: p50 %.2f× (%.1f vs %.1f µs), p99 %.2f× (%.1f vs %.1f µs)",
                    peer.transport,
                    bus.format,
                    bus.size,
                    bus.rate,
                    bus.p50 / max(peer.p50, 0.001),
                    bus.p50,
                    peer.p50,
                    bus.p99 / max(peer.p99, 0.001),
                    bus.p99,
                    peer.p99
                )
                if bus.rateHz == 0 {
                    line += String(
                        format: ", frames/s %.2f× (%.0f vs %.0f)",
                        bus.framesPerSecond / max(peer.framesPerSecond, 0.001),
                        bus.framesPerSecond,
                        peer.framesPerSecond
                    )
                }
                lines.append(line)
            }
        }
        return lines
    }

    /// GStreamer's name for a raw format of the bus, nil when it has none we measure.
    static func gstreamerFormat(_ format: PixelFormat) -> String? {
        switch format {
        case .yuv420BiPlanarVideoRange8, .yuv420BiPlanarFullRange8: "NV12"
        case .yuv420BiPlanarVideoRange10, .yuv420BiPlanarFullRange10: "P010_10LE"
        case .bgra8: "BGRA"
        default: nil
        }
    }

    struct Row {
        var result: BenchResult
        var details: [String: Any]
        var maximumMicroseconds: Double
        var gaps: Int
        var allocationRetries: Int
    }

    /// One harness report as a row; nil when it is not the JSON the harness writes.
    static func parse(_ output: String, transport: String, format: PixelFormat) -> Row? {
        guard let line = output.split(separator: "\n").last,
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            let consumer = object["consumer"] as? [String: Any]
        else { return nil }
        func integer(_ dictionary: [String: Any], _ key: String) -> UInt64? {
            (dictionary[key] as? NSNumber).map { $0.uint64Value }
        }
        guard let width = integer(object, "width"), let height = integer(object, "height"),
            let rate = integer(object, "rateHz"), let sent = integer(object, "sentFrames"), sent > 0,
            let start = integer(object, "startNanoseconds"),
            let producerCPU = integer(object, "producerCPUNanoseconds"),
            let frames = integer(consumer, "frames"), let p50 = integer(consumer, "p50"),
            let p99 = integer(consumer, "p99"), let p999 = integer(consumer, "p999"),
            let maximum = integer(consumer, "max"), let gaps = integer(consumer, "gaps"),
            let consumerCPU = integer(consumer, "consumerCPUNanoseconds"),
            let last = integer(consumer, "lastNanoseconds")
        else { return nil }
        let peer = PeerReport(
            frames: Int(clamping: frames),
            p50: p50,
            p99: p99,
            p999: p999,
            cpuNanoseconds: consumerCPU,
            lastNanoseconds: last
        )
        let result = BenchResult(
            transport: transport,
            format: format.name,
            width: Int(clamping: width),
            height: Int(clamping: height),
            rateHz: Int(clamping: rate),
            sentFrames: Int(clamping: sent),
            seconds: Double(last > start ? last - start : 1) / 1e9,  // no arithmetic on the report can trap
            peer: peer,
            publisherCPUNanoseconds: producerCPU
        )
        let retries = integer(object, "allocationRetries") ?? 0
        let details: [String: Any] = [
            "transport": transport, "format": format.name, "width": Int(clamping: width),
            "height": Int(clamping: height), "rateHz": Int(clamping: rate), "sentFrames": Int(clamping: sent),
            "maxus": (Double(maximum) / 100).rounded() / 10, "gaps": Int(clamping: gaps),
            "allocationRetries": Int(clamping: retries),
            "frameBytes": Int(clamping: integer(object, "frameBytes") ?? 0),
            "shmBytes": Int(clamping: integer(object, "shmBytes") ?? 0),
        ]
        return Row(
            result: result,
            details: details,
            maximumMicroseconds: Double(maximum) / 1000,
            gaps: Int(clamping: gaps),
            allocationRetries: Int(clamping: retries)
        )
    }

    struct SkipReason: Error, CustomStringConvertible {
        var description: String
    }

    /// `FRAMEBUS_GST_SHM_BENCH`, or the harness built from the package's `Benchmarks/gst-shm` (found above this
    /// executable or the working directory) into its `.build/gst-shm`.
    static func findOrBuildHarness() -> Result<URL, SkipReason> {
        if let path = ProcessInfo.processInfo.environment["FRAMEBUS_GST_SHM_BENCH"], !path.isEmpty {
            guard FileManager.default.isExecutableFile(atPath: path) else {
                return .failure(SkipReason(description: "FRAMEBUS_GST_SHM_BENCH=\(path) is not an executable"))
            }
            return .success(URL(fileURLWithPath: path))
        }
        guard let root = packageRoot() else {
            return .failure(
                SkipReason(
                    description: "Benchmarks/gst-shm not found above this executable or the working directory "
                        + "(run from the package, or set FRAMEBUS_GST_SHM_BENCH)"
                )
            )
        }
        let packages = ["gstreamer-1.0", "gstreamer-app-1.0"]
        let pkgConfig = run(URL(fileURLWithPath: "/usr/bin/env"), ["pkg-config", "--exists"] + packages, timeout: 30)
        guard pkgConfig.status == 0 else {
            return .failure(
                SkipReason(
                    description: pkgConfig.status == 127
                        ? "pkg-config not found"
                        : "pkg-config does not find \(packages.joined(separator: ", ")) "
                            + "(apt: libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev)"
                )
            )
        }
        let source = root.appendingPathComponent("Benchmarks/gst-shm")
        let build = root.appendingPathComponent(".build/gst-shm")
        let make = run(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["make", "-s", "-C", source.path, "BUILD_DIR=\(build.path)"],
            timeout: 300
        )
        let binary = build.appendingPathComponent("gst-shm-bench")
        guard make.status == 0, FileManager.default.isExecutableFile(atPath: binary.path) else {
            return .failure(SkipReason(description: "building gst-shm-bench failed: \(make.errors)"))
        }
        return .success(binary)
    }

    static func packageRoot() -> URL? {
        var starts: [URL] = [URL(fileURLWithPath: FileManager.default.currentDirectoryPath)]
        if let executable = try? Child.ownExecutable() {
            starts.insert(executable.deletingLastPathComponent(), at: 0)
        }
        for start in starts {
            var directory = start.standardizedFileURL
            for _ in 0..<8 {
                let makefile = directory.appendingPathComponent("Benchmarks/gst-shm/Makefile")
                if FileManager.default.fileExists(atPath: makefile.path) { return directory }
                let parent = directory.deletingLastPathComponent()
                if parent.path == directory.path { break }
                directory = parent
            }
        }
        return nil
    }

    /// Runs a program to completion (killed after `timeout` seconds); its output without the trailing newline.
    static func run(
        _ executable: URL,
        _ arguments: [String],
        timeout: Double
    ) -> (
        status: Int32, output: String, errors: String
    ) {
        guard let child = try? Child(executable, arguments) else {
            return (-1, "", "could not start \(executable.path)")
        }
        child.waitForExit(timeout: timeout)
        let status = child.process.terminationReason == .exit ? child.process.terminationStatus : -1
        let errors = child.errors.trimmingCharacters(in: .whitespacesAndNewlines)
        return (status, child.lines.joined(separator: "\n"), errors)
    }
}
