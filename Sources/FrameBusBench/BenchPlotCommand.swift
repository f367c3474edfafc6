import ArgumentParser
import Foundation

/// `framebus bench plot`: the JSON of `bench bus --json` as an SVG picture.
package struct BenchPlotCommand: ParsableCommand {
    package static let configuration = CommandConfiguration(
        commandName: "plot",
        abstract: "Draw the results of `bench bus --json` as an SVG: latency distributions and frames/s per case.",
        discussion: """
            One row per transport in each case (format, size, rate), framebus first, then the peers measured in the \
            same run (gst-zerocopy, gst-copy, stream-copy, and the seqpacket floor at the same rate). Left: one-way \
            latency on a log scale, a thin line from p50 to p99.9, a thick bar from p50 to p99, a dot at p50. \
            Right: frames per second received, on a log scale. Each case's heading gives framebus's p50 as a ratio \
            of each peer's. Fan-out rows are not drawn.
            """
    )

    @Argument(help: "The JSON written by `framebus bench bus --json`.")
    var results: String

    @Option(name: .shortAndLong, help: "The SVG file to write.")
    var output: String = "bench-bus.svg"

    @Option(help: "A title above the plot.")
    var title: String = "framebus bench bus"

    package init() {}

    package func run() throws {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: results))
        } catch {
            throw ValidationError("cannot read \(results): \(error.localizedDescription)")
        }
        let plot = try BenchPlot(json: data)
        let svg = plot.svg(title: title)
        try Data(svg.utf8).write(to: URL(fileURLWithPath: output))
        say("wrote \(output): \(plot.rows.count) rows in \(plot.groups.count) cases")
    }
}

/// The plot of one `bench bus` JSON: which rows go where, and their SVG.
struct BenchPlot {
    /// One transport in one case.
    struct Row {
        var transport: String
        var format: String
        var width: Int
        var height: Int
        var rateHz: Int
        var framesPerSecond: Double
        var p50: Double
        var p99: Double
        var p999: Double
        var maximum: Double?
        var gaps: Int?

        var isFloor: Bool { transport == "seqpacket-floor" }
        var caseName: String { "\(format) \(width)x\(height)" }
        var rateName: String { rateHz == 0 ? "unpaced" : "\(rateHz) Hz" }
    }

    /// The rows of one case at one rate, framebus first.
    struct Group {
        var caseName: String
        var rateHz: Int
        var rows: [Row]

        var title: String { "\(caseName) · \(rateHz == 0 ? "unpaced" : "\(rateHz) Hz")" }
    }

    /// The order of the series, and their colours; unknown transports follow in grey.
    static let series: [(transport: String, colour: String, label: String)] = [
        ("framebus", "#1f6feb", "framebus (publish → didOutput on a dispatch queue)"),
        ("framebus-thread", "#4dabf7", "framebus (publish → didOutput on the connection thread)"),
        ("gst-zerocopy", "#d9480f", "GStreamer shmsink→shmsrc, zero-copy (shmsink's allocator)"),
        ("gst-copy", "#f08c00", "GStreamer shmsink→shmsrc, copy (app memory)"),
        ("stream-copy", "#7048e8", "whole frame through a stream socket"),
        ("seqpacket-floor", "#495057", "floor: 9-byte seqpacket ping"),
    ]

    var rows: [Row]
    var groups: [Group]
    var processors: Int?
    var gstreamerVersion: String?
    var gstreamerSkipped: String?

    struct InvalidResults: Error, CustomStringConvertible {
        var description: String
    }

    /// Reads the JSON of `bench bus`; rows without the numbers a plot needs, and fan-out rows, are left out.
    init(json: Data) throws {
        guard let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else {
            throw InvalidResults(description: "not a JSON object")
        }
        guard let list = object["results"] as? [[String: Any]] else {
            throw InvalidResults(description: "no \"results\" array (is this `framebus bench bus --json` output?)")
        }
        processors = (object["processors"] as? NSNumber)?.intValue
        let gstreamer = object["gstreamer"] as? [String: Any]
        gstreamerVersion = gstreamer?["version"] as? String
        gstreamerSkipped = gstreamer?["skipped"] as? String
        let details = (gstreamer?["rows"] as? [[String: Any]]) ?? []

        func number(_ dictionary: [String: Any], _ key: String) -> Double? {
            guard let value = (dictionary[key] as? NSNumber)?.doubleValue, value.isFinite else { return nil }
            return value
        }
        func integer(_ dictionary: [String: Any], _ key: String) -> Int? {
            guard let value = number(dictionary, key), value >= 0, value <= 1e9 else { return nil }
            return Int(value)
        }
        rows = list.compactMap { item -> Row? in
            guard let transport = item["transport"] as? String, !transport.hasPrefix("fanout"), !transport.hasPrefix("floor-fanout"),
                let format = item["format"] as? String, let width = integer(item, "width"),
                let height = integer(item, "height"), let rate = integer(item, "rateHz"),
                let fps = number(item, "framesPerSecond"), let p50 = number(item, "p50us"),
                let p99 = number(item, "p99us"), let p999 = number(item, "p999us")
            else { return nil }
            var row = Row(
                transport: transport,
                format: format,
                width: width,
                height: height,
                rateHz: rate,
                framesPerSecond: fps,
                p50: p50,
                p99: p99,
                p999: p999
            )
            if let detail = details.first(where: {
                $0["transport"] as? String == transport && $0["format"] as? String == format
                    && integer($0, "width") == width && integer($0, "height") == height
                    && integer($0, "rateHz") == rate
            }) {
                row.maximum = number(detail, "maxus")
                row.gaps = integer(detail, "gaps")
            }
            return row
        }
        guard !rows.isEmpty else { throw InvalidResults(description: "no rows to plot") }

        // Cases in the order they were measured; the floor (no frame) joins every case at its rate.
        var cases: [String] = []
        var rates: [Int] = []
        for row in rows {
            if !row.isFloor, !cases.contains(row.caseName) { cases.append(row.caseName) }
            if !rates.contains(row.rateHz) { rates.append(row.rateHz) }
        }
        // Known series in their order, unknown transports next, the floor last.
        func rank(_ transport: String) -> Int {
            if transport == "seqpacket-floor" { return Self.series.count }
            return Self.series.firstIndex { $0.transport == transport } ?? Self.series.count - 1
        }
        var groups: [Group] = []
        for caseName in cases {
            for rate in rates {
                let members = rows.filter { $0.rateHz == rate && ($0.caseName == caseName || $0.isFloor) }
                guard members.contains(where: { !$0.isFloor }) else { continue }
                let sorted = members.enumerated().sorted {
                    (rank($0.element.transport), $0.offset) < (rank($1.element.transport), $1.offset)
                }.map(\.element)
                groups.append(Group(caseName: caseName, rateHz: rate, rows: sorted))
            }
        }
        if groups.isEmpty {
            // Only the floor was measured.
            for rate in rates {
                groups.append(Group(caseName: "floor", rateHz: rate, rows: rows.filter { $0.rateHz == rate }))
            }
        }
        self.groups = groups
    }

    static func colour(_ transport: String) -> String {
        series.first { $0.transport == transport }?.colour ?? "#868e96"
    }

    /// framebus's p50 as a ratio of each peer's in a group, as text: below 1, framebus is lower.
    static func ratios(_ group: Group) -> String {
        guard let bus = group.rows.first(where: { $0.transport == "framebus" }) else { return "" }
        let peers = group.rows.filter { $0.transport != "framebus" && !$0.isFloor }
        return peers.map { peer in
            let ratio = bus.p50 / max(peer.p50, 0.001)
            return "\(Self.ratio(ratio)) \(peer.transport)" + (ratio > 1 ? " (peer lower)" : "")
        }.joined(separator: ", ")
    }

    /// framebus's frames/s as a ratio of each peer's in an unpaced group: above 1, framebus is faster.
    static func throughputRatios(_ group: Group) -> String {
        guard group.rateHz == 0, let bus = group.rows.first(where: { $0.transport == "framebus" }) else { return "" }
        let peers = group.rows.filter { $0.transport != "framebus" && !$0.isFloor }
        return peers.map { peer in
            let ratio = bus.framesPerSecond / max(peer.framesPerSecond, 0.001)
            return "\(Self.ratio(ratio)) \(peer.transport)" + (ratio < 1 ? " (peer faster)" : "")
        }.joined(separator: ", ")
    }

    /// "0.53×", "12×", "0.004×": two significant digits at most, never rounded to zero.
    static func ratio(_ value: Double) -> String {
        if value >= 10 { return String(format: "%.0f×", value) }
        if value >= 0.1 { return String(format: "%.2f×", value) }
        return String(format: "%.1g×", value)
    }

    // MARK: SVG

    static func escape(_ text: String) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&apos;"
            default:
                // XML 1.0 forbids most control characters even escaped.
                if let scalar = character.unicodeScalars.first, character.unicodeScalars.count == 1,
                    scalar.value < 0x20, scalar != "\t", scalar != "\n", scalar != "\r"
                {
                    escaped += "?"
                } else {
                    escaped.append(character)
                }
            }
        }
        return escaped
    }

    static func format(_ value: Double) -> String { String(format: "%.1f", value) }

    /// "12 µs", "3.4 ms", "1.2 s".
    static func duration(_ microseconds: Double) -> String {
        if microseconds >= 1_000_000 { return String(format: "%.3g s", microseconds / 1_000_000) }
        if microseconds >= 1000 { return String(format: "%.3g ms", microseconds / 1000) }
        return String(format: "%.3g µs", microseconds)
    }

    static func count(_ value: Double) -> String {
        if value >= 1_000_000 { return String(format: "%.3gM", value / 1_000_000) }
        return value >= 1000 ? String(format: "%.3gk", value / 1000) : String(format: "%.0f", value)
    }

    /// A log-scale axis over the decades that hold `values`.
    struct LogAxis {
        var low: Double
        var high: Double
        var x: Double
        var width: Double

        init(_ values: [Double], x: Double, width: Double) {
            let positive = values.filter { $0 > 0 && $0.isFinite }
            let least = positive.min() ?? 1
            let most = max(positive.max() ?? 10, least * 10)
            low = pow(10, floor(log10(least)))
            high = pow(10, ceil(log10(most)))
            self.x = x
            self.width = width
        }

        func position(_ value: Double) -> Double {
            let clamped = min(max(value, low), high)
            return x + (log10(clamped) - log10(low)) / (log10(high) - log10(low)) * width
        }

        var decades: [Double] {
            var values: [Double] = []
            var value = low
            while value <= high * 1.0001 {
                values.append(value)
                value *= 10
            }
            return values
        }
    }

    func svg(title: String) -> String {
        let width = 1200.0
        let labelWidth = 150.0
        let latencyAxis = LogAxis(rows.flatMap { [$0.p50, $0.p999] }, x: labelWidth + 10, width: 560)
        // From 10/s, so that a 100 Hz row still has a bar.
        let fpsAxis = LogAxis(rows.map(\.framesPerSecond) + [10], x: 860, width: 300)
        let rowHeight = 16.0
        let groupGap = 30.0
        let legendTop = 52.0
        let top = legendTop + Double(Self.series.count + 1) * 15 + 30
        let height =
            top + Double(groups.count) * groupGap + Double(groups.reduce(0) { $0 + $1.rows.count }) * rowHeight
            + Double(groups.filter { !Self.throughputRatios($0).isEmpty }.count) * 14 + 60

        var svg = """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" \
            viewBox="0 0 \(Int(width)) \(Int(height))" font-family="Helvetica, Arial, sans-serif" font-size="11">
            <rect width="100%" height="100%" fill="#ffffff"/>

            """
        func text(_ x: Double, _ y: Double, _ content: String, _ attributes: String = "") -> String {
            "<text x=\"\(Self.format(x))\" y=\"\(Self.format(y))\"\(attributes.isEmpty ? "" : " " + attributes)>"
                + Self.escape(content) + "</text>\n"
        }

        var subtitle = "One run, one-way latency on CLOCK_MONOTONIC between two processes"
        if let processors { subtitle += "; \(processors) CPUs shared with other work" }
        if let gstreamerVersion { subtitle += "; \(gstreamerVersion)" }
        if let gstreamerSkipped { subtitle += "; GStreamer rows skipped: \(gstreamerSkipped)" }
        svg += text(20, 24, title, "font-size=\"16\" font-weight=\"bold\"")
        svg += text(20, 40, subtitle, "fill=\"#495057\"")

        // Legend.
        var y = legendTop
        for entry in Self.series {
            svg += "<rect x=\"20\" y=\"\(Self.format(y - 9))\" width=\"12\" height=\"10\" fill=\"\(entry.colour)\"/>\n"
            svg += text(38, y, "\(entry.transport): \(entry.label)")
            y += 15
        }
        svg += text(
            20,
            y,
            "Latency: thin line p50→p99.9, thick bar p50→p99, dot p50. Ratios: framebus p50 ÷ peer p50 "
                + "(below 1: framebus lower); unpaced, framebus frames/s ÷ peer frames/s (below 1: peer faster).",
            "fill=\"#495057\""
        )

        // Axes: decade grid lines over the whole height of the rows.
        let axisTop = top - 14
        let axisBottom = height - 40
        svg += text(latencyAxis.x, axisTop - 8, "one-way latency (log scale)", "font-weight=\"bold\"")
        svg += text(fpsAxis.x, axisTop - 8, "frames/s received (log scale)", "font-weight=\"bold\"")
        for (axis, label) in [(latencyAxis, Self.duration), (fpsAxis, Self.count)] {
            for decade in axis.decades {
                let x = axis.position(decade)
                svg +=
                    "<line x1=\"\(Self.format(x))\" y1=\"\(Self.format(axisTop))\" x2=\"\(Self.format(x))\" "
                    + "y2=\"\(Self.format(axisBottom))\" stroke=\"#dee2e6\"/>\n"
                svg += text(x, axisBottom + 14, label(decade), "text-anchor=\"middle\" fill=\"#495057\"")
            }
        }

        y = top
        for group in groups {
            y += groupGap - 10
            svg += "<g class=\"case\" data-case=\"\(Self.escape(group.caseName))\" data-rate=\"\(group.rateHz)\">\n"
            svg += text(20, y, group.title, "font-weight=\"bold\"")
            let ratios = Self.ratios(group)
            if !ratios.isEmpty { svg += text(latencyAxis.x + 120, y, "framebus p50 = " + ratios, "fill=\"#212529\"") }
            let throughput = Self.throughputRatios(group)
            if !throughput.isEmpty {
                y += 14
                svg += text(latencyAxis.x + 120, y, "framebus frames/s = " + throughput, "fill=\"#212529\"")
            }
            y += 10
            for row in group.rows {
                let middle = y + rowHeight / 2
                let colour = Self.colour(row.transport)
                let p50 = latencyAxis.position(row.p50)
                let p99 = latencyAxis.position(row.p99)
                let p999 = latencyAxis.position(row.p999)
                var tooltip =
                    "\(row.transport) \(row.caseName) \(row.rateName): p50 \(Self.format(row.p50)) µs, "
                    + "p99 \(Self.format(row.p99)) µs, p99.9 \(Self.format(row.p999)) µs"
                if let maximum = row.maximum { tooltip += ", max \(Self.format(maximum)) µs" }
                if let gaps = row.gaps { tooltip += ", \(gaps) gaps" }
                tooltip += ", \(Self.format(row.framesPerSecond)) frames/s"
                svg +=
                    "<g class=\"row\" data-transport=\"\(Self.escape(row.transport))\" "
                    + "data-case=\"\(Self.escape(row.isFloor ? "floor" : row.caseName))\" data-rate=\"\(row.rateHz)\" "
                    + "data-p50=\"\(row.p50)\" data-p99=\"\(row.p99)\" data-p999=\"\(row.p999)\" "
                    + "data-fps=\"\(row.framesPerSecond)\">\n"
                svg += "<title>\(Self.escape(tooltip))</title>\n"
                svg += text(40, middle + 4, row.isFloor ? "floor (9 B)" : row.transport, "fill=\"\(colour)\"")
                svg +=
                    "<line class=\"p999\" x1=\"\(Self.format(p50))\" y1=\"\(Self.format(middle))\" "
                    + "x2=\"\(Self.format(p999))\" y2=\"\(Self.format(middle))\" stroke=\"\(colour)\" stroke-width=\"1.5\"/>\n"
                svg +=
                    "<line class=\"p99\" x1=\"\(Self.format(p50))\" y1=\"\(Self.format(middle))\" "
                    + "x2=\"\(Self.format(max(p99, p50 + 1)))\" y2=\"\(Self.format(middle))\" stroke=\"\(colour)\" "
                    + "stroke-width=\"6\"/>\n"
                svg +=
                    "<circle class=\"p50\" cx=\"\(Self.format(p50))\" cy=\"\(Self.format(middle))\" r=\"4\" "
                    + "fill=\"#ffffff\" stroke=\"\(colour)\" stroke-width=\"2\"/>\n"
                svg += text(
                    latencyAxis.x + latencyAxis.width + 8,
                    middle + 4,
                    "\(Self.duration(row.p50)) / \(Self.duration(row.p99))",
                    "fill=\"#495057\""
                )
                let fps = fpsAxis.position(max(row.framesPerSecond, fpsAxis.low))
                svg +=
                    "<rect class=\"fps\" x=\"\(Self.format(fpsAxis.x))\" y=\"\(Self.format(middle - 5))\" "
                    + "width=\"\(Self.format(max(fps - fpsAxis.x, 1)))\" height=\"10\" fill=\"\(colour)\"/>\n"
                svg += text(fps + 4, middle + 4, Self.count(row.framesPerSecond), "fill=\"#495057\"")
                svg += "</g>\n"
                y += rowHeight
            }
            svg += "</g>\n"
        }
        svg += text(
            latencyAxis.x + latencyAxis.width + 8,
            top - 22,
            "p50 / p99",
            "fill=\"#495057\""
        )
        svg += "</svg>\n"
        return svg
    }
}
