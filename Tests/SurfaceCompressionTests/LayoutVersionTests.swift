import Foundation
import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// A newer publisher and an older subscriber must never be silently incompatible: the encoder writes layout
/// version 2, and the decoder reads version 1 surfaces exactly.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct LayoutVersionTests {
    static func fourCCName(_ fourCC: UInt32) -> String {
        String(decoding: [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: fourCC >> $0) }, as: UTF8.self)
    }

    /// Each version 1 surface written by the old encoder decodes; encoding the decoded image again as version 1
    /// gives back exactly the old bytes, so the decoded image is the one that was encoded (the encoder is
    /// deterministic and lossless). The same surface also decodes through the public API.
    @Test(arguments: layoutVersion1Surfaces.indices)
    func version1SurfacesFromTheOldEncoderDecodeExactly(index: Int) throws {
        let surface = try #require(Data(base64Encoded: layoutVersion1Surfaces[index]).map { [UInt8]($0) })
        try surface.withUnsafeBytes { bytes in
            let header = try TileCodec.parse(bytes.baseAddress!, count: bytes.count)
            #expect(header.grid.layoutVersion == 1)
            let grid = header.grid
            let image = UnsafeMutableRawPointer.allocate(byteCount: grid.rawImageByteCount, alignment: 64)
            defer { image.deallocate() }
            let rowBytes = grid.format.kind == .bgra ? grid.width * 4 : grid.width * grid.format.bytesPerSample
            let planes = ImagePlanes(
                plane0: image,
                bytesPerRow0: rowBytes,
                plane1: grid.format.kind == .bgra ? image : image + rowBytes * grid.height,
                bytesPerRow1: rowBytes
            )
            try TileCodec.decode(header, from: bytes.baseAddress!, tiles: 0..<grid.tileCount, into: planes, threads: 1)
            let again = UnsafeMutableRawPointer.allocate(byteCount: grid.maximumByteCount, alignment: 64)
            defer { again.deallocate() }
            let used = TileCodec.encode(grid, baseFourCC: header.baseFourCC, from: planes, into: again, threads: 1)
            #expect(used == bytes.count)
            #expect(Array(UnsafeRawBufferPointer(start: again, count: used)) == surface)

            // Through the public API: a compressed pixel buffer holding the old bytes.
            let format = try PixelFormat(Self.fourCCName(header.baseFourCC))
            let compressed = try PixelBuffer(
                width: grid.width,
                height: grid.height,
                compressedFormat: try #require(format.compressedVariant),
                opaqueByteCount: bytes.count
            )
            try compressed.lock()
            compressed.surface.withUnsafeMutableBytes { $0.copyMemory(from: bytes) }
            try compressed.unlock()
            let output = try PixelBuffer(width: grid.width, height: grid.height, pixelFormat: format)
            try SurfaceCodec.decompress(compressed, into: output)
            #expect(try packed(output) == Array(UnsafeRawBufferPointer(start: image, count: grid.rawImageByteCount)))
        }
    }

    @Test func theEncoderWritesVersion2WithWhole64BitPayloadChecksums() throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let bytes = syntheticBytes(format, width: 64, height: 32, seed: 3)
        let source = try makeBuffer(bytes, width: 64, height: 32, format: format)
        let result = try roundTrip(source, options: .init(tileSize: .init(width: 32, height: 16)))
        try result.compressed.lock([.readOnly])
        defer { try? result.compressed.unlock([.readOnly]) }
        try result.compressed.surface.withUnsafeBytes { bytes in
            #expect(bytes.load(fromByteOffset: 4, as: UInt16.self) == 2)
            let header = try TileCodec.parse(bytes.baseAddress!, count: bytes.count)
            #expect(header.grid.entryByteCount == 16)
            for (index, entry) in header.entries.enumerated() {
                let stored = bytes.loadUnaligned(fromByteOffset: 64 + 16 * index + 8, as: UInt64.self)
                let computed = Checksum.hash(bytes.baseAddress! + entry.offset, count: entry.byteCount)
                #expect(stored == computed)
            }
        }
    }

    /// Version 1 stores offsets: one that does not continue where the previous payload ended is rejected.
    @Test func aVersion1OffsetThatLeavesAGapIsRejected() throws {
        var surface = try #require(Data(base64Encoded: layoutVersion1Surfaces[2]).map { [UInt8]($0) })
        try surface.withUnsafeMutableBytes { (bytes) throws in
            #expect(try TileCodec.parse(bytes.baseAddress!, count: bytes.count).grid.layoutVersion == 1)
            let offset = bytes.load(fromByteOffset: 64 + 16, as: UInt32.self)
            bytes.storeBytes(of: offset + 1, toByteOffset: 64 + 16, as: UInt32.self)
            TileCodec.sealHeader(
                bytes.baseAddress!,
                tableByteCount: 16 * Int(bytes.load(fromByteOffset: 28, as: UInt32.self))
            )
            let error = #expect(throws: CompressionError.self) {
                try TileCodec.parse(bytes.baseAddress!, count: bytes.count)
            }
            #expect(error?.code == .overlappingTiles)
        }
    }

    /// A flip confined to the high half of a stored checksum is caught (v1 could not: it ignored those bits).
    @Test func aChangeInTheHighHalfOfAPayloadChecksumIsDetected() throws {
        let (compressed, _) = try DamagedSurfaceTests.makeCompressed()
        try DamagedSurfaceTests.damage(compressed, reseal: true) { $0[DamagedSurfaceTests.entryOffset(2) + 15] ^= 0x10 }
        try DamagedSurfaceTests.expectDecode(compressed, fails: .checksumMismatch)
    }
}
