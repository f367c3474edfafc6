import Foundation
import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// The encoder's two efforts (``SurfaceCodec/Effort``): `fast` (the default, no HC search, the tile above through
/// the fast search) and `best` (the HC searches). Both write the same layout, decoded bit-exactly by one decoder.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct EncoderEffortTests {
    static let formats: [PixelFormat] = [.yuv420BiPlanarVideoRange8, .yuv420BiPlanarVideoRange10, .bgra8]

    static func encode(
        _ bytes: [UInt8],
        _ format: PixelFormat,
        width: Int,
        height: Int,
        effort: SurfaceCodec.Effort,
        threads: Int = 1
    ) throws -> (compressed: [UInt8], decoded: [UInt8], modes: [String: Int]) {
        let source = try makeBuffer(bytes, width: width, height: height, format: format)
        let context = SurfaceCodecContext(threadCount: threads, effort: effort, policy: .alwaysSplit)
        let compressed = try SurfaceCodec.makeCompressedBuffer(width: width, height: height, format: format)
        let used = try context.compress(source, into: compressed).compressedByteCount
        let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
        try context.decompress(compressed, into: output)
        try compressed.lock([.readOnly])
        defer { try? compressed.unlock([.readOnly]) }
        let surface = compressed.surface.withUnsafeBytes { Array($0[0..<used]) }
        return (surface, try packed(output), try SurfaceCodec.modeCounts(of: compressed))
    }

    @Test(arguments: formats)
    func bothEffortsDecodeScreenContentBitExactly(_ format: PixelFormat) throws {
        let (width, height) = (384, 64 * 9)
        let bytes = screenBytes(format, width: width, height: height, seed: 31)
        let fast = try Self.encode(bytes, format, width: width, height: height, effort: .fast)
        let best = try Self.encode(bytes, format, width: width, height: height, effort: .best)
        #expect(fast.decoded == bytes)
        #expect(best.decoded == bytes)
        // The efforts differ on screen content: both store it as zstd frames (layout version 8), best at a higher
        // level, so its surface is smaller.
        #expect(fast.compressed != best.compressed)
        #expect(fast.modes["zstd", default: 0] > 0, "\(fast.modes)")
        #expect(best.modes["zstd", default: 0] > 0, "\(best.modes)")
        #expect(best.compressed.count < fast.compressed.count)
    }

    /// Photograph-like content (a gradient with noise) never reaches the LZ4 modes, so both efforts write the same
    /// bytes: `best` costs nothing there and gains nothing.
    @Test(arguments: formats)
    func bothEffortsWriteTheSameBytesForPhotographs(_ format: PixelFormat) throws {
        let (width, height) = (320, 256)
        let bytes = syntheticBytes(format, width: width, height: height, seed: 32, noise: 24)
        let fast = try Self.encode(bytes, format, width: width, height: height, effort: .fast)
        let best = try Self.encode(bytes, format, width: width, height: height, effort: .best)
        #expect(fast.decoded == bytes)
        #expect(fast.compressed == best.compressed)
    }

    /// Each thread encodes whole chains of bands, so the fast encoder's bytes do not depend on the thread count.
    @Test(arguments: formats)
    func theFastEncoderWritesTheSameBytesOnAnyNumberOfThreads(_ format: PixelFormat) throws {
        let (width, height) = (256, 64 * 17)
        let bytes = screenBytes(format, width: width, height: height, seed: 33)
        let one = try Self.encode(bytes, format, width: width, height: height, effort: .fast, threads: 1)
        let three = try Self.encode(bytes, format, width: width, height: height, effort: .fast, threads: 3)
        #expect(one.decoded == bytes)
        #expect(three.compressed == one.compressed)
    }

    @Test func theDefaultEffortIsFast() {
        #expect(SurfaceCodec.Options().effort == .fast)
        #expect(SurfaceCodecContext().effort == .fast)
    }
}
