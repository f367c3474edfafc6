import Foundation
import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// Screen frames at the default tile size are written in taller bands (``ScreenBands``): the header states the
/// tile size, so every decoder reads them as before; photographs and named tile sizes keep their bands.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct ScreenBandsTests {
    static let formats: [PixelFormat] = [.yuv420BiPlanarVideoRange8, .yuv420BiPlanarVideoRange10, .bgra8]

    /// The tile height a compressed surface's header states (docs/COMPRESSED-LAYOUT.md §2, offset 24).
    static func statedTileHeight(_ compressed: PixelBuffer) throws -> UInt32 {
        try compressed.lock([.readOnly])
        defer { try? compressed.unlock([.readOnly]) }
        return compressed.surface.withUnsafeBytes { $0.load(fromByteOffset: 24, as: UInt32.self) }
    }

    static func surfaceBytes(_ compressed: PixelBuffer, _ count: Int) throws -> [UInt8] {
        try compressed.lock([.readOnly])
        defer { try? compressed.unlock([.readOnly]) }
        return compressed.surface.withUnsafeBytes { Array($0.prefix(count)) }
    }

    @Test(arguments: formats)
    func aScreenFrameAtTheDefaultTileSizeIsWrittenInTallerBandsAndDecodesExactly(_ format: PixelFormat) throws {
        let (width, height) = (640, 600)
        let bytes = screenBytes(format, width: width, height: height, seed: 21)
        var surfaces: [[UInt8]] = []
        for threads in [1, 2] {
            let source = try makeBuffer(bytes, width: width, height: height, format: format)
            let compressed = try SurfaceCodec.makeCompressedBuffer(width: width, height: height, format: format)
            let statistics = try SurfaceCodec.compress(source, into: compressed, options: .split(threads))
            #expect(try Self.statedTileHeight(compressed) == UInt32(ScreenBands.rows))
            #expect(try SurfaceCodec.modeCounts(of: compressed)["zstd", default: 0] > 0)
            surfaces.append(try Self.surfaceBytes(compressed, statistics.compressedByteCount))
            for decodeThreads in [1, 2] {
                let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
                try SurfaceCodec.decompress(compressed, into: output, options: .split(decodeThreads))
                #expect(try packed(output) == bytes)
            }
        }
        // The bytes do not depend on the number of threads: each band is encoded on its own.
        #expect(surfaces[0] == surfaces[1])
    }

    @Test(arguments: formats)
    func aPhotographKeepsSixtyFourRowBands(_ format: PixelFormat) throws {
        let bytes = syntheticBytes(format, width: 320, height: 400, seed: 22, noise: 24)
        let source = try makeBuffer(bytes, width: 320, height: 400, format: format)
        let (compressed, _, output) = try roundTrip(source)
        #expect(try Self.statedTileHeight(compressed) == 64)
        #expect(try packed(output) == bytes)
    }

    /// A tile size the caller names is kept, even on screen content, and so are version 7's bands (no zstd).
    @Test func aNamedTileSizeAndLayoutVersion7KeepTheirBands() throws {
        let format = PixelFormat.bgra8
        let bytes = screenBytes(format, width: 320, height: 400, seed: 23)
        let named = SurfaceCodec.TileSize(width: nil, height: 32)
        let (_, compressed, _) = try ScreenContentTests.compress(bytes, format, width: 320, height: 400, tiles: named,
            layoutVersion: 8, effort: .fast)
        #expect(try Self.statedTileHeight(compressed) == 32)
        let (_, version7, _) = try ScreenContentTests.compress(bytes, format, width: 320, height: 400, layoutVersion: 7,
            effort: .fast)
        #expect(try Self.statedTileHeight(version7) == 64)
        let (_, version8, _) = try ScreenContentTests.compress(bytes, format, width: 320, height: 400, layoutVersion: 8,
            effort: .fast)
        #expect(try Self.statedTileHeight(version8) == UInt32(ScreenBands.rows))
    }

    /// A surface allocated for the default tile size holds the taller bands' frame, and its bytes used are fewer
    /// than the 64-row frame's on screen content (fewer entries, zstd windows across more rows).
    @Test(arguments: formats)
    func tallerBandsAreSmallerThanSixtyFourRowBandsOnScreenContent(_ format: PixelFormat) throws {
        let (width, height) = (512, 768)
        let bytes = screenBytes(format, width: width, height: height, seed: 24)
        let (_, taller, tallerStatistics) = try ScreenContentTests.compress(bytes, format, width: width, height: height,
            tiles: .default, layoutVersion: 8, effort: .fast)
        #expect(try Self.statedTileHeight(taller) == UInt32(ScreenBands.rows))
        let (_, bands, bandStatistics) = try ScreenContentTests.compress(bytes, format, width: width, height: height,
            tiles: SurfaceCodec.TileSize(width: width, height: 64), layoutVersion: 8, effort: .fast)
        #expect(try Self.statedTileHeight(bands) == 64)
        #expect(tallerStatistics.compressedByteCount < bandStatistics.compressedByteCount)
    }
}
