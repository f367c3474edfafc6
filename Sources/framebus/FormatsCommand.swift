import ArgumentParser
import FrameBus
import FrameBusBench

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
