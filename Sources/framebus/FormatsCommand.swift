import ArgumentParser
import FrameBus

/// `framebus formats`: the pixel formats FrameBus knows.
struct FormatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "formats",
        abstract: "List the pixel formats: FourCC, description, planes, bits, range, DRM fourcc, compressed variant."
    )

    func run() {
        let header = ["FourCC", "Description", "Planes", "Bits", "Range", "DRM", "Compressed"]
        let rows: [[String]] = PixelFormat.all.map { format in
            [
                format.name, format.summary, format.isCompressed ? "opaque" : String(format.planes.count),
                String(format.bitDepth), format.range.rawValue, format.drmFormatName,
                format.compressedVariant?.name ?? "base: \(format.base.name)",
            ]
        }
        print(TextTable.render(header: header, rows: rows))
    }
}

/// Plain-text tables for the command line.
enum TextTable {
    static func render(header: [String], rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            let padded = zip(cells, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }
            return String(padded.joined(separator: "  ").reversed().drop(while: { $0 == " " }).reversed())
        }
        let rule = widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")
        return ([line(header), rule] + rows.map(line)).joined(separator: "\n")
    }
}
