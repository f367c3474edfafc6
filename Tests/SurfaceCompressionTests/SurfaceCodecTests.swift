import ImageSources
import PixelBuffers
@testable import SurfaceCompression
import Testing
import TestSupport

@Suite(.heavyWork, .timeLimit(.minutes(20))) struct SurfaceCodecTests {
    static let tileSizes: [SurfaceCodec.TileSize] = [
        .default, .init(width: 64, height: 64), .init(width: 16, height: 2), .init(width: nil, height: 16),
    ]

    @Test(arguments: corpusImages())
    func everyCorpusImageRoundTripsBitExactInEveryFormat(_ name: String) async throws {
        // Seconds of debug-build codec work per image: off the cooperative pool (see heavyWork).
        let results = try await heavyWork { () throws -> [(String, Bool, Bool, Double)] in
            let image = try RGBImage(contentsOfPNGFile: corpusURL.appendingPathComponent(name).path).croppedToEven()
            return try PixelFormat.baseFormats.map { format in
                let bytes = image.convertedBytes(to: format)
                let source = try makeBuffer(bytes, width: image.width, height: image.height, format: format)
                let result = try roundTrip(source)
                return (
                    "\(format)", try packed(result.output) == bytes,
                    result.statistics.compressedByteCount == (try SurfaceCodec.bytesUsed(of: result.compressed)),
                    result.statistics.ratio
                )
            }
        }
        #expect(results.count == PixelFormat.baseFormats.count)
        for (format, exact, sizeAgrees, ratio) in results {
            #expect(exact, "\(name) \(format)")
            #expect(sizeAgrees, "\(name) \(format): compressedByteCount differs from bytesUsed")
            #expect(ratio > 1, "\(name) \(format) ratio \(ratio)")
        }
    }

    @Test(arguments: PixelFormat.baseFormats)
    func sizesThatAreNotMultiplesOfTheTileRoundTrip(_ format: PixelFormat) throws {
        let sizes =
            [(2, 2), (2, 4), (4, 2), (18, 34), (66, 66), (130, 62), (64, 64), (34, 130)]
            + (format == .bgra8 ? [(1, 1), (1, 7), (7, 1), (17, 33), (65, 3)] : [])
        for (width, height) in sizes {
            let bytes = syntheticBytes(format, width: width, height: height, seed: UInt64(width * 1000 + height))
            let source = try makeBuffer(bytes, width: width, height: height, format: format)
            for tileSize in Self.tileSizes {
                let result = try roundTrip(source, options: .split(2, tileSize: tileSize))
                #expect(try packed(result.output) == bytes, "\(format) \(width)x\(height) tiles \(tileSize)")
            }
        }
    }

    @Test(arguments: PixelFormat.baseFormats)
    func solidFramesBecomeAFewBytesPerTile(_ format: PixelFormat) throws {
        let width = 256
        let height = 128
        let bytes = syntheticBytes(format, width: width, height: height, seed: 1, noise: 0).enumerated().map {
            format.bitDepth > 8 ? ($0.offset % 2 == 0 ? 0x40 : 0x81) : UInt8(77)
        }
        let source = try makeBuffer(bytes, width: width, height: height, format: format)
        let result = try roundTrip(source, options: .init(tileSize: .init(width: 64, height: 64)))
        #expect(try packed(result.output) == bytes)
        #expect(try SurfaceCodec.modeCounts(of: result.compressed).keys.sorted() == ["solid"])
        let tiles = (width / 64) * (height / 64) * format.planes.map(\.samplesPerElement).reduce(0, +)
        #expect(
            result.statistics.compressedByteCount == 64 + tiles * 16 + tiles * format.planes[0].bytesPerElement
                / format.planes[0].samplesPerElement
        )
    }

    @Test(arguments: PixelFormat.baseFormats)
    func randomNoiseFallsBackToRawAndNeverExceedsTheWorstCase(_ format: PixelFormat) throws {
        let width = 192
        let height = 96
        var random = SplitMix(seed: 42)
        let count = packedRowBytes(format, width: width).enumerated().map {
            $0.element * height / format.planes[$0.offset].verticalSubsampling
        }.reduce(0, +)
        let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let source = try makeBuffer(bytes, width: width, height: height, format: format)
        for tileSize in Self.tileSizes {
            let result = try roundTrip(source, options: .init(tileSize: tileSize))
            #expect(try packed(result.output) == bytes)
            let worst = try SurfaceCodec.maximumCompressedByteCount(
                width: width,
                height: height,
                format: format,
                tileSize: tileSize
            )
            #expect(result.statistics.compressedByteCount <= worst)
            #expect(try SurfaceCodec.modeCounts(of: result.compressed).keys.sorted() == ["raw"])
            #expect(worst - count < 64 + 16 * 4 * (width / 2) * (height / 2))  // only header and table on top
        }
    }

    @Test(arguments: [PixelFormat.yuv420BiPlanarVideoRange10, .yuv420BiPlanarFullRange10])
    func tenBitSamplesWithPaddingBitsSetKeepEveryBit(_ format: PixelFormat) throws {
        let width = 128
        let height = 64
        var bytes = syntheticBytes(format, width: width, height: height, seed: 7)
        var random = SplitMix(seed: 9)
        // Set low (padding) bits in a few scattered samples of the left half only, so both the 10-bit and the
        // 16-bit paths run.
        for _ in 0..<40 {
            let row = Int(random.next() % UInt64(height))
            let column = Int(random.next() % UInt64(width / 2))
            bytes[(row * width + column) * 2] |= UInt8(1 + random.next() % 63)
        }
        let source = try makeBuffer(bytes, width: width, height: height, format: format)
        let result = try roundTrip(source, options: .init(tileSize: .init(width: 64, height: 64)))
        #expect(try packed(result.output) == bytes)
        let modes = try SurfaceCodec.modeCounts(of: result.compressed)
        #expect(modes["packed16", default: 0] > 0)
        #expect(modes["packed10", default: 0] > 0)
    }

    @Test func singleThreadedAndParallelEncodingWriteIdenticalBytes() throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let bytes = syntheticBytes(format, width: 320, height: 200, seed: 3)
        let source = try makeBuffer(bytes, width: 320, height: 200, format: format)
        var outputs: [[UInt8]] = []
        for threads in [1, 2, 3, 8] {
            let result = try roundTrip(
                source,
                options: .split(threads, tileSize: .init(width: 64, height: 16)),
                decodeOptions: .split(threads)
            )
            #expect(try packed(result.output) == bytes)
            try result.compressed.lock([.readOnly])
            defer { try? result.compressed.unlock([.readOnly]) }
            outputs.append(
                result.compressed.surface.withUnsafeBytes { Array($0.prefix(result.statistics.compressedByteCount)) }
            )
        }
        #expect(Set(outputs).count == 1)
    }

    @Test(arguments: [SurfaceCodec.TileSize.default, .init(width: 64, height: 64), .init(width: 32, height: 6)])
    func tileRowsDecodeIntoASmallScratchBuffer(_ tileSize: SurfaceCodec.TileSize) throws {
        for format in PixelFormat.baseFormats {
            let width = 200
            let height = 134
            let bytes = syntheticBytes(format, width: width, height: height, seed: 11)
            let source = try makeBuffer(bytes, width: width, height: height, format: format)
            let result = try roundTrip(source, options: .init(tileSize: tileSize))
            let rowHeight = try SurfaceCodec.tileRowHeight(of: result.compressed)
            #expect(rowHeight == min(tileSize.height, height))
            let scratch = try PixelBuffer(width: width, height: rowHeight, pixelFormat: format)
            var assembled = [[UInt8]](repeating: [], count: format.planes.count)
            var covered = 0
            try SurfaceCodec.decodeTileRows(of: result.compressed, into: scratch) { rows in
                #expect(rows.lowerBound == covered)
                covered = rows.upperBound
                for (index, plane) in format.planes.enumerated() {
                    let rowBytes = width / plane.horizontalSubsampling * plane.bytesPerElement
                    let bytesPerRow = scratch.bytesPerRow(ofPlane: index)
                    try? scratch.withUnsafeBytes(ofPlane: index) { planeBytes in
                        for row in 0..<rows.count / plane.verticalSubsampling {
                            assembled[index] += planeBytes[row * bytesPerRow..<row * bytesPerRow + rowBytes]
                        }
                    }
                }
            }
            #expect(covered == height)
            #expect(assembled.flatMap { $0 } == bytes, "\(format) \(tileSize)")
        }
    }

    @Test func mismatchedBuffersAreRejected() throws {
        let source = try makeBuffer(
            syntheticBytes(.bgra8, width: 8, height: 8, seed: 1),
            width: 8,
            height: 8,
            format: .bgra8
        )
        let wrongFormat = try SurfaceCodec.makeCompressedBuffer(width: 8, height: 8, format: .yuv420BiPlanarVideoRange8)
        #expect(throws: CompressionError.self) { try SurfaceCodec.compress(source, into: wrongFormat) }
        let small = try PixelBuffer(width: 8, height: 8, compressedFormat: .compressedBGRA8, opaqueByteCount: 100)
        #expect { try SurfaceCodec.compress(source, into: small) } throws: {
            ($0 as? CompressionError)?.code == .destinationTooSmall
        }
        let compressed = try SurfaceCodec.makeCompressedBuffer(width: 8, height: 8, format: .bgra8)
        try SurfaceCodec.compress(source, into: compressed)
        let wrongSize = try PixelBuffer(width: 8, height: 10, pixelFormat: .bgra8)
        #expect { try SurfaceCodec.decompress(compressed, into: wrongSize) } throws: {
            ($0 as? CompressionError)?.code == .formatMismatch
        }
    }
}
