import Foundation
import SurfaceCompression
import Testing

@testable import FrameBus

/// `SurfaceCodecContext.decompress(_:width:height:format:plane0:plane1:)`, the entry point `fb_codec_decompress` decodes
/// through straight into a caller's planes: bit-exact into planes of any stride, and its own checks of the planes
/// (the C ABI checks them first; this one must not rely on that).
@Suite(.timeLimit(.minutes(5))) struct CodecMemoryDecodeTests {
    static let width = 96
    static let height = 64

    /// A 420v frame compressed, as bytes in ordinary memory.
    static func compressedFrame(_ codec: SurfaceCodecContext) throws -> (raw: PixelBuffer, bytes: [UInt8]) {
        let raw = try PixelBuffer(width: width, height: height, pixelFormat: .yuv420BiPlanarVideoRange8)
        try raw.lock()
        for plane in 0..<raw.planeCount {
            try raw.withUnsafeMutableBytes(ofPlane: plane) { bytes in
                for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: (index / 5) &* 3 &+ plane) }
            }
        }
        try raw.unlock()
        let maximum = try SurfaceCodec.maximumCompressedByteCount(
            width: width,
            height: height,
            format: .yuv420BiPlanarVideoRange8
        )
        let compressed = try PixelBuffer(
            width: width,
            height: height,
            compressedFormat: .compressedYUV420BiPlanarVideoRange8,
            opaqueByteCount: maximum
        )
        let used = try codec.compress(raw, into: compressed).compressedByteCount
        try compressed.lock(.readOnly)
        defer { try? compressed.unlock(.readOnly) }
        let bytes = compressed.surface.withUnsafeBytes { Array($0.prefix(used)) }
        return (raw, bytes)
    }

    /// Decodes into planes of `stride` bytes per row (both planes) starting `shift` bytes into their memory.
    static func decode(
        _ codec: SurfaceCodecContext,
        _ bytes: [UInt8],
        stride: Int,
        shift: Int = 0,
        width: Int = width,
        rows: Int = height
    ) throws -> (y: [UInt8], cbcr: [UInt8]) {
        var y = [UInt8](repeating: 0xA5, count: shift + stride * rows)
        var cbcr = [UInt8](repeating: 0xA5, count: shift + stride * rows / 2)
        try y.withUnsafeMutableBytes { yBytes in
            try cbcr.withUnsafeMutableBytes { cBytes in
                try bytes.withUnsafeBytes { source in
                    try codec.decompress(
                        source,
                        width: width,
                        height: rows,
                        format: .yuv420BiPlanarVideoRange8,
                        plane0: CodecDestinationPlane(base: yBytes.baseAddress! + shift, bytesPerRow: stride),
                        plane1: CodecDestinationPlane(base: cBytes.baseAddress! + shift, bytesPerRow: stride)
                    )
                }
            }
        }
        return (y, cbcr)
    }

    @Test func decodesBitExactIntoPlanesOfAnyEvenStride() throws {
        let codec = SurfaceCodecContext(threadCount: 2)
        let (raw, bytes) = try Self.compressedFrame(codec)
        try raw.lock(.readOnly)
        defer { try? raw.unlock(.readOnly) }
        for stride in [Self.width, Self.width + 2, Self.width + 64] {
            let (y, cbcr) = try Self.decode(codec, bytes, stride: stride)
            for (plane, decoded) in [(0, y), (1, cbcr)] {
                let layout = raw.planeLayout(plane)
                try raw.withUnsafeBytes(ofPlane: plane) { expected in
                    for row in 0..<layout.height {
                        let want = Array(expected[row * layout.bytesPerRow..<row * layout.bytesPerRow + Self.width])
                        let got = Array(decoded[row * stride..<row * stride + Self.width])
                        #expect(want == got, "stride \(stride) plane \(plane) row \(row)")
                        // The padding after a row's samples is never written.
                        #expect(decoded[row * stride + Self.width..<(row + 1) * stride].allSatisfy { $0 == 0xA5 })
                    }
                }
            }
        }
    }

    @Test func refusesPlanesThatDoNotFitBeforeWriting() throws {
        let codec = SurfaceCodecContext(threadCount: 1)
        let (_, bytes) = try Self.compressedFrame(codec)
        /// The code of the CompressionError `body` throws; nil when it succeeds.
        func code(_ body: () throws -> Void) -> CompressionError.Code? {
            do {
                try body()
                return nil
            } catch {
                return (error as? CompressionError)?.code
            }
        }
        // Rows shorter than a row of samples.
        #expect(code { _ = try Self.decode(codec, bytes, stride: Self.width - 2) } == .invalidArgument)
        // CbCr (2-byte pairs) at an odd address or with an odd stride.
        #expect(code { _ = try Self.decode(codec, bytes, stride: Self.width, shift: 1) } == .invalidArgument)
        #expect(code { _ = try Self.decode(codec, bytes, stride: Self.width + 1) } == .invalidArgument)
        // A stride whose span overflows.
        #expect(
            code {
                try bytes.withUnsafeBytes { source in
                    var one: UInt8 = 0
                    try withUnsafeMutableBytes(of: &one) { plane in
                        let huge = CodecDestinationPlane(base: plane.baseAddress!, bytesPerRow: Int.max / 2)
                        try codec.decompress(
                            source,
                            width: Self.width,
                            height: Self.height,
                            format: .yuv420BiPlanarVideoRange8,
                            plane0: huge,
                            plane1: huge
                        )
                    }
                }
            } == .invalidArgument
        )
        // Another size than the header's, and truncated bytes.
        #expect(
            code { _ = try Self.decode(codec, bytes, stride: Self.width + 2, width: Self.width + 2) } == .formatMismatch
        )
        #expect(
            code { _ = try Self.decode(codec, Array(bytes.prefix(bytes.count / 2)), stride: Self.width) } == .truncated
        )
        // The intact bytes still decode afterwards.
        #expect(code { _ = try Self.decode(codec, bytes, stride: Self.width) } == nil)
    }
}
