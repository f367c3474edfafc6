import Foundation
import PixelBuffers
import SurfaceCompression

/// The corpus folder, found relative to this file (…/Tests/SurfaceCompressionTests/This.swift → …/Corpus).
let corpusURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Corpus")

/// Every PNG of the corpus, as "set/name.png".
func corpusImages() -> [String] {
    var names: [String] = []
    for set in ["kodak", "skimage", "synthetic"] {
        let folder = corpusURL.appendingPathComponent(set)
        let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        names += files.filter { $0.hasSuffix(".png") }.sorted().map { "\(set)/\($0)" }
    }
    return names
}

/// A deterministic generator (SplitMix64), so failures reproduce.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Bytes per row of the tightly packed planes of `format` (make_frames.py's layout).
func packedRowBytes(_ format: PixelFormat, width: Int) -> [Int] {
    format.planes.map { width / $0.horizontalSubsampling * $0.bytesPerElement }
}

/// Makes a base-format pixel buffer holding tightly packed plane bytes (Y then CbCr, or BGRA).
func makeBuffer(
    _ packed: [UInt8],
    width: Int,
    height: Int,
    format: PixelFormat,
    alignment: Int = 64
) throws -> PixelBuffer {
    let buffer = try PixelBuffer(width: width, height: height, pixelFormat: format, bytesPerRowAlignment: alignment)
    try buffer.lock()
    defer { try? buffer.unlock() }
    var offset = 0
    for (index, plane) in format.planes.enumerated() {
        let rowBytes = width / plane.horizontalSubsampling * plane.bytesPerElement
        let rows = height / plane.verticalSubsampling
        let bytesPerRow = buffer.bytesPerRow(ofPlane: index)
        try buffer.withUnsafeMutableBytes(ofPlane: index) { bytes in
            packed.withUnsafeBytes { source in
                for row in 0..<rows {
                    (bytes.baseAddress! + row * bytesPerRow).copyMemory(
                        from: source.baseAddress! + offset + row * rowBytes,
                        byteCount: rowBytes
                    )
                }
            }
        }
        offset += rowBytes * rows
    }
    precondition(offset == packed.count, "packed bytes do not fit \(format) \(width)x\(height)")
    return buffer
}

/// The tightly packed bytes of a base-format buffer.
func packed(_ buffer: PixelBuffer) throws -> [UInt8] {
    try buffer.lock([.readOnly])
    defer { try? buffer.unlock([.readOnly]) }
    return try buffer.packedBytes()
}

/// Appends an 8-bit sample value as `format` stores it: one byte, or (10-bit formats) value × 4 MSB-aligned in a
/// little-endian 16-bit word.
func appendSample(_ value: Int, _ format: PixelFormat, to bytes: inout [UInt8]) {
    if format.bitDepth > 8 {
        let word = UInt16(value * 4 & 0x3FF) << 6
        bytes.append(UInt8(word & 0xFF))
        bytes.append(UInt8(word >> 8))
    } else {
        bytes.append(UInt8(value & 0xFF))
    }
}

/// Packed bytes of a synthetic image: a smooth gradient with some noise and a flat block, so every mode appears.
func syntheticBytes(_ format: PixelFormat, width: Int, height: Int, seed: UInt64, noise: Int = 8) -> [UInt8] {
    var random = SplitMix(seed: seed)
    var bytes: [UInt8] = []
    for (index, plane) in format.planes.enumerated() {
        let w = width / plane.horizontalSubsampling
        let h = height / plane.verticalSubsampling
        for y in 0..<h {
            for x in 0..<w {
                for s in 0..<plane.samplesPerElement {
                    let flat = x < w / 4 && y < h / 4
                    let base = flat ? 100 + s : (x * 3 + y * 2 + s * 40 + index * 17) % 200
                    let value = flat || noise == 0 ? base : base + Int(random.next() % UInt64(noise))
                    appendSample(value, format, to: &bytes)
                }
            }
        }
    }
    return bytes
}

/// Compresses with `options`, decompresses with `decodeOptions`, and returns the compressed buffer and output.
func roundTrip(
    _ source: PixelBuffer,
    options: SurfaceCodec.Options = .init(),
    decodeOptions: SurfaceCodec.Options = .init()
) throws -> (compressed: PixelBuffer, statistics: SurfaceCodec.Statistics, output: PixelBuffer) {
    let compressed = try SurfaceCodec.makeCompressedBuffer(
        width: source.width,
        height: source.height,
        format: source.pixelFormat,
        tileSize: options.tileSize
    )
    let statistics = try SurfaceCodec.compress(source, into: compressed, options: options)
    let output = try PixelBuffer(width: source.width, height: source.height, pixelFormat: source.pixelFormat)
    try SurfaceCodec.decompress(compressed, into: output, options: decodeOptions)
    return (compressed, statistics, output)
}

/// Packed bytes of a screen-like image: a light page with rows of "glyphs" (a few 5×7 bitmaps repeated in two
/// inks), a title bar with a horizontal gradient, and a coloured side panel. Most residual blocks are zero and
/// the same blocks repeat, as in text and user interfaces.
func screenBytes(_ format: PixelFormat, width: Int, height: Int, seed: UInt64) -> [UInt8] {
    var random = SplitMix(seed: seed)
    let glyphs: [[UInt8]] = (0..<12).map { _ in (0..<7).map { _ in UInt8(truncatingIfNeeded: random.next()) & 0x1F } }
    let text = (0..<4096).map { _ in Int(random.next() % 13) }  // 12: a space
    var bytes: [UInt8] = []
    for (index, plane) in format.planes.enumerated() {
        let w = width / plane.horizontalSubsampling
        let h = height / plane.verticalSubsampling
        let xScale = plane.horizontalSubsampling
        let yScale = plane.verticalSubsampling
        for y in 0..<h {
            for x in 0..<w {
                for s in 0..<plane.samplesPerElement {
                    let px = x * xScale
                    let py = y * yScale
                    var value: Int
                    if py < 16 {
                        value = 60 + px * 120 / max(width, 1) + s * 9 + index * 5  // title bar
                    } else if px < width / 6 {
                        value = 90 + s * 30 + index * 11  // side panel
                    } else {
                        value = index == 0 || format.planes.count == 1 ? 235 - s * 3 : 128  // page
                        let cellX = (px - width / 6) / 6
                        let cellY = (py - 16) / 10
                        let gx = (px - width / 6) % 6
                        let gy = (py - 16) % 10
                        let character = text[(cellY * 97 + cellX) % text.count]
                        if character < 12, gx < 5, gy < 7, glyphs[character][gy] >> gx & 1 == 1 {
                            let ink = cellY % 3 == 0 ? 20 : 70
                            value =
                                index == 0 || format.planes.count == 1 ? ink + s * 20 : 128 + (cellY % 3 == 0 ? 30 : 0)
                        }
                    }
                    appendSample(value, format, to: &bytes)
                }
            }
        }
    }
    return bytes
}
