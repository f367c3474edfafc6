import Foundation
import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// The layout version follows the modes a surface uses, not the kind of image (docs/COMPRESSED-LAYOUT.md, the
/// introduction): a photograph with a repetitive band (a caption, a border, a letterbox with a logo) gets the screen
/// modes there, so its surface needs a later version than 2, and the document must not promise otherwise.
@Suite(.heavyWork) struct PhotographLayoutVersionTests {
    static let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs/COMPRESSED-LAYOUT.md")

    @Test func aPhotographWithACaptionBandNeedsALaterVersionThan2() throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let (width, height) = (512, 64 * 3)
        // A noisy gradient (no LZ4 mode wins there), with its middle band of 64 rows taken from a screen image.
        let photo = syntheticBytes(format, width: width, height: height, seed: 41, noise: 24)
        let screen = screenBytes(format, width: width, height: height, seed: 42)
        var bytes = photo
        let chroma = width * height
        for y in 64..<128 {
            bytes.replaceSubrange(y * width..<(y + 1) * width, with: screen[y * width..<(y + 1) * width])
        }
        for y in 32..<64 {
            bytes.replaceSubrange(
                chroma + y * width..<chroma + (y + 1) * width,
                with: screen[chroma + y * width..<chroma + (y + 1) * width]
            )
        }
        let source = try makeBuffer(bytes, width: width, height: height, format: format)
        let (compressed, _, output) = try roundTrip(source)
        #expect(try packed(output) == bytes)
        try compressed.lock([.readOnly])
        let version = compressed.surface.withUnsafeBytes { Int($0.load(fromByteOffset: 4, as: UInt16.self)) }
        try compressed.unlock([.readOnly])
        let modes = try SurfaceCodec.modeCounts(of: compressed)
        #expect(version > 2, "modes \(modes)")
        // The photograph's own bands stay in version 2's modes.
        #expect((modes["packed8"] ?? 0) > 0)
        let text = try String(contentsOf: Self.document, encoding: .utf8).replacingOccurrences(of: "\n", with: " ")
        #expect(!text.contains("So photographs stay readable by a decoder that knows only version 2"))
        #expect(text.contains("The version follows the modes, not the kind of image"))
    }
}
