import Foundation
import Glibc
import Testing
import TestSupport

#if canImport(FoundationXML)
import FoundationXML
#endif

/// The checked-in `bench bus --json` output the plot tests draw.
private func fixtureURL(_ name: String) -> URL {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures").appendingPathComponent(name)
}

private func temporaryFile(_ name: String) -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("fbplot-\(UUID().uuidString)-\(name)")
}

/// The elements of an SVG the tests look at, from a real XML parser (a parse error is a failed test).
private final class SVGReader: NSObject, XMLParserDelegate {
    struct Element {
        var name: String
        var attributes: [String: String]
        var text = ""
    }

    var elements: [Element] = []
    var rootName: String?
    var rootNamespace: String?
    private var open: [Int] = []

    static func read(_ data: Data) throws -> SVGReader {
        let reader = SVGReader()
        let parser = XMLParser(data: data)
        parser.delegate = reader
        guard parser.parse() else {
            throw TestSupportError("SVG is not well-formed: \(parser.parserError.map { "\($0)" } ?? "?")")
        }
        return reader
    }

    func parser(
        _ parser: XMLParser,
        didStartElement elementName: String,
        namespaceURI: String?,
        qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        if rootName == nil {
            rootName = elementName
            rootNamespace = attributes["xmlns"]
        }
        elements.append(Element(name: elementName, attributes: attributes))
        open.append(elements.count - 1)
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if let index = open.last { elements[index].text += string }
    }

    func parser(
        _ parser: XMLParser,
        didEndElement elementName: String,
        namespaceURI: String?,
        qualifiedName: String?
    ) {
        _ = open.popLast()
    }

    /// The rows drawn, in document order.
    var rows: [[String: String]] { elements.filter { $0.attributes["class"] == "row" }.map(\.attributes) }
    var texts: [String] { elements.filter { $0.name == "text" || $0.name == "title" }.map(\.text) }
}

@Suite(.timeLimit(.minutes(20))) struct BenchPlotTests {
    @Test func plotDrawsEachCaseWithFramebusBesideEachPeer() async throws {
        let output = temporaryFile("bench.svg")
        defer { try? FileManager.default.removeItem(at: output) }
        let command = try await startFramebus([
            "bench", "plot", fixtureURL("bench-bus-small.json").path, "-o", output.path,
        ])
        let status = try await command.exitStatus(within: 300)
        #expect(status == 0, "\(command.output)")
        let svg = try SVGReader.read(try Data(contentsOf: output))
        #expect(svg.rootName == "svg")
        #expect(svg.rootNamespace == "http://www.w3.org/2000/svg")

        // Every case and rate, framebus first, the peers of the same run, the floor of the same rate last; no
        // fan-out row, no row without numbers.
        let drawn = svg.rows.map { [$0["data-case"] ?? "", $0["data-rate"] ?? "", $0["data-transport"] ?? ""] }
        #expect(
            drawn == [
                ["420v 1920x1080", "100", "framebus"],
                ["420v 1920x1080", "100", "gst-zerocopy"],
                ["420v 1920x1080", "100", "gst-copy"],
                ["420v 1920x1080", "100", "stream-copy"],
                ["floor", "100", "seqpacket-floor"],
                ["420v 1920x1080", "0", "framebus"],
                ["420v 1920x1080", "0", "gst-zerocopy"],
                ["floor", "0", "seqpacket-floor"],
                ["BGRA 3840x2160", "100", "framebus"],
                ["BGRA 3840x2160", "100", "evil\"<&>'"],
                ["floor", "100", "seqpacket-floor"],
            ]
        )
        // The values are the fixture's.
        let zeroCopy = try #require(
            svg.rows.first { $0["data-transport"] == "gst-zerocopy" && $0["data-rate"] == "0" }
        )
        #expect(zeroCopy["data-p50"].flatMap(Double.init) == 47.1)
        #expect(zeroCopy["data-p99"].flatMap(Double.init) == 127.9)
        #expect(zeroCopy["data-p999"].flatMap(Double.init) == 140.1)
        #expect(zeroCopy["data-fps"].flatMap(Double.init) == 150153)
        // Each row is a latency line, a p50–p99 bar, a p50 dot and a frames/s bar.
        let classes = svg.elements.map { $0.attributes["class"] ?? "" }
        for mark in ["p999", "p99", "p50", "fps"] {
            #expect(classes.filter { $0 == mark }.count == drawn.count, "\(mark)")
        }
        // Ratios both ways: where the peer is lower, the plot says so.
        let texts = svg.texts
        #expect(texts.contains { $0.contains("0.53× gst-zerocopy") && $0.contains("0.09× gst-copy") })
        #expect(texts.contains { $0.contains("2.12× gst-zerocopy (peer lower)") })
        #expect(texts.contains { $0.contains("framebus frames/s = 0.33× gst-zerocopy (peer faster)") })
        // Details only the GStreamer rows have reach the tooltips.
        #expect(
            texts.contains { $0.hasPrefix("gst-copy 420v 1920x1080 100 Hz") && $0.contains("max 3950.7 µs, 2 gaps") }
        )
        #expect(texts.contains { $0.contains("GStreamer 1.22.0") })
    }

    @Test func plotRefusesJSONThatIsNotBenchBusOutput() async throws {
        let input = temporaryFile("not-bench.json")
        let output = temporaryFile("bench.svg")
        defer {
            try? FileManager.default.removeItem(at: input)
            try? FileManager.default.removeItem(at: output)
        }
        try Data(#"{"benchmark": "something else", "rows": []}"#.utf8).write(to: input)
        let command = try await startFramebus(["bench", "plot", input.path, "-o", output.path])
        let status = try await command.exitStatus(within: 300)
        #expect(status != 0)
        #expect(command.output.contains("no \"results\" array"), "\(command.output)")
        #expect(!FileManager.default.fileExists(atPath: output.path))
    }

    @Test func benchBusSaysWhyTheGStreamerRowsAreSkipped() async throws {
        let json = temporaryFile("bench.json")
        defer { try? FileManager.default.removeItem(at: json) }
        // As on a machine without GStreamer's development files: pkg-config finds nothing.
        var environment = ProcessInfo.processInfo.environment
        environment["PKG_CONFIG_LIBDIR"] = "/nonexistent-framebus-test"
        environment["PKG_CONFIG_PATH"] = ""
        environment["FRAMEBUS_GST_SHM_BENCH"] = nil
        let command = try await startFramebus(
            [
                "bench", "bus", "--transports", "framebus,gst-zerocopy,gst-copy", "--cases", "420v:64x48",
                "--rates", "100", "--frames", "5", "--json", json.path,
            ],
            environment: environment
        )
        let status = try await command.exitStatus(within: 300)
        #expect(status == 0, "\(command.output)")
        #expect(
            command.output.contains("gstreamer: skipped — pkg-config does not find gstreamer-1.0"),
            "\(command.output)"
        )
        let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: json)) as? [String: Any])
        let gstreamer = try #require(object["gstreamer"] as? [String: Any])
        #expect((gstreamer["skipped"] as? String)?.contains("libgstreamer1.0-dev") == true)
        let transports = (object["results"] as? [[String: Any]] ?? []).compactMap { $0["transport"] as? String }
        #expect(transports == ["framebus"])
    }

    @Test(.enabled(if: gstreamerDevelopmentFilesFound(), "pkg-config finds no gstreamer-1.0 / gstreamer-app-1.0"))
    func benchBusMeasuresGStreamerShmBesideTheBus() async throws {
        let json = temporaryFile("bench.json")
        defer { try? FileManager.default.removeItem(at: json) }
        let command = try await startFramebus([
            "bench", "bus", "--transports", "framebus,gst-zerocopy,gst-copy", "--cases", "420v:320x240",
            "--rates", "1000", "--frames", "30", "--json", json.path,
        ])
        let status = try await command.exitStatus(within: 600)
        #expect(status == 0, "\(command.output)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: json)) as? [String: Any])
        let results = object["results"] as? [[String: Any]] ?? []
        for transport in ["framebus", "gst-zerocopy", "gst-copy"] {
            let row = try #require(results.first { $0["transport"] as? String == transport }, "\(command.output)")
            // 30 frames at 1 kHz are 4 × 30 sent; every one arrives, stamped, on a transport that blocks.
            #expect(number(row["frames"]) == 120, "\(transport): \(row)")
            #expect(row["format"] as? String == "420v")
            #expect(number(row["p50us"]) ?? 0 > 0, "\(transport): \(row)")
        }
        let details = (object["gstreamer"] as? [String: Any])?["rows"] as? [[String: Any]] ?? []
        #expect(details.count == 2)
        for detail in details {
            #expect(number(detail["gaps"]) == 0, "\(detail)")
            #expect(number(detail["frameBytes"]) == Double(320 * 240 * 3 / 2), "\(detail)")
            #expect(number(detail["shmBytes"]) ?? 0 >= Double(30 * 320 * 240 * 3 / 2), "\(detail)")
        }
        #expect(command.output.contains("framebus / gst-zerocopy  420v 320x240 1000 Hz: p50"), "\(command.output)")
    }

    @Test func benchBusPollerRowTakesEveryFrameAndIsJudgedAgainstTheFloor() async throws {
        let json = temporaryFile("bench.json")
        defer { try? FileManager.default.removeItem(at: json) }
        let command = try await startFramebus([
            "bench", "bus", "--transports", "seqpacket-floor,framebus-poller", "--cases", "420v:64x48",
            "--rates", "1000", "--frames", "10", "--json", json.path,
        ])
        let status = try await command.exitStatus(within: 600)
        #expect(status == 0, "\(command.output)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: json)) as? [String: Any])
        let results = object["results"] as? [[String: Any]] ?? []
        let row = try #require(results.first { $0["transport"] as? String == "framebus-poller" }, "\(command.output)")
        // 10 frames at 1 kHz are 4 × 10 sent; the pool blocks rather than drops, so the polling thread takes all.
        #expect(number(row["frames"]) == 40, "\(row)")
        #expect(number(row["p50us"]) ?? 0 > 0, "\(row)")
        #expect(command.output.contains("framebus-poller 420v 64x48 1000 Hz: p50"), "\(command.output)")
        #expect(command.output.contains("× seqpacket-floor (≤ 1.3×"), "\(command.output)")
    }

    @Test func benchBusFanoutFloorsWakeEveryProcessForEveryFrame() async throws {
        let json = temporaryFile("bench.json")
        defer { try? FileManager.default.removeItem(at: json) }
        let command = try await startFramebus([
            "bench", "bus", "--transports", "fanout-floor", "--fanout", "1,3", "--fanout-rate", "200",
            "--fanout-frames", "40", "--json", json.path,
        ])
        let status = try await command.exitStatus(within: 600)
        #expect(status == 0, "\(command.output)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: json)) as? [String: Any])
        let results = object["results"] as? [[String: Any]] ?? []
        let transports = results.compactMap { $0["transport"] as? String }
        #expect(
            transports == ["floor-fanout-efd-1", "floor-fanout-efd-3", "floor-fanout-futex-1", "floor-fanout-futex-3"],
            "\(command.output)"
        )
        for row in results {
            // The worst process's count of frames received: one that slept through frames counts them (an
            // eventfd's value, the word's step), so every process of every row has all 40.
            #expect(number(row["frames"]) == 40, "\(row)")
            #expect(number(row["p50us"]) ?? 0 > 0, "\(row)")
        }
        #expect(command.output.contains("floor-fanout-efd-3 vs -1: publisher CPU/frame"), "\(command.output)")
        #expect(command.output.contains("floor-fanout-futex-3 vs -1: publisher CPU/frame"), "\(command.output)")
    }
}

/// A JSON number, whichever way JSONSerialization boxed it.
private func number(_ value: Any?) -> Double? { (value as? NSNumber)?.doubleValue }

/// Whether pkg-config finds GStreamer's development files (the harness is built from them). Evaluated once, when
/// the tests are planned, outside any test.
private func gstreamerDevelopmentFilesFound() -> Bool {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["pkg-config", "--exists", "gstreamer-1.0", "gstreamer-app-1.0"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
}
