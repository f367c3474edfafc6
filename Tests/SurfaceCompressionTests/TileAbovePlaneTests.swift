import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// The Y of an `lz4Up` band decoded straight into the output plane, with the Y of the band above, already there, as
/// its LZ4 dictionary (docs/COMPRESSED-LAYOUT.md §6.5, "Decoding order and cost"): only where the plane's rows are
/// contiguous and only this process can write it (a pixel buffer's memfd), the band above decoded by the same worker
/// in the same call. Every other plane (padded rows, memory a caller hands over) takes the private area. Each decode
/// is compared byte for byte with the source, and the number of in-plane decodes is checked, so a test that claims
/// the path ran fails if it did not.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct TileAbovePlaneTests {
    static let width = 640
    static let bands = 11

    /// Screen content (``screenBytes``); for 10-bit formats with a padding bit set in every Y sample, so that the Y
    /// is not a packed10 payload and takes `lz4Up` (a packed10 Y takes `packed10LZ4Up`).
    static func image(_ format: PixelFormat, height: Int) -> [UInt8] {
        var bytes = screenBytes(format, width: width, height: height, seed: 21)
        if format.bitDepth > 8 {
            for index in stride(from: 0, to: width * height * 2, by: 2) { bytes[index] |= 1 }
        }
        return bytes
    }

    /// Per tile: the Y mode (component 0), for a grid of full-width bands.
    /// Coded literals (layout version 6) count as their base mode.
    static func yModes(_ compressed: PixelBuffer, components: Int) throws -> [TileMode] {
        try compressed.lock([.readOnly])
        defer { try? compressed.unlock([.readOnly]) }
        return compressed.surface.withUnsafeBytes { bytes in
            let count = Int(bytes.load(fromByteOffset: 28, as: UInt32.self))
            return stride(from: 0, to: count, by: components).map { index in
                let mode = bytes[DamagedSurfaceTests.modeOffset(index)]
                return TileMode(
                    rawValue: mode >= TileMode.codedLiteralsFlag ? mode - TileMode.codedLiteralsFlag : mode
                )!
            }
        }
    }

    /// The tiles whose Y may decode in the plane with the plane as dictionary: an `lz4Up` Y whose tile above holds
    /// samples (its inner payload is its Y), among `tiles`, minus the first tile of each worker's run (`starts`).
    static func planeTiles(_ yModes: [TileMode], tiles: Range<Int>, starts: Set<Int>) -> Int {
        tiles.filter { t in
            t > 0 && !starts.contains(t) && yModes[t] == .lz4Up && yModes[t - 1].innerMode == nil
        }.count
    }

    /// Where each of `workers` workers starts in `tiles` (``DecodeTilesJob``'s split).
    static func workerStarts(_ tiles: Range<Int>, workers: Int) -> Set<Int> {
        Set((0..<workers).map { tiles.lowerBound + tiles.count * $0 / workers })
    }

    /// Decodes `tiles` with a workspace of its own and returns what its workers did: how many Y entries decoded in
    /// the plane with the plane as dictionary, how many inner payloads of tiles above were decoded again.
    static func decodeCounting(
        _ compressed: PixelBuffer,
        tiles: Range<Int>,
        into output: PixelBuffer,
        threads: Int = 1
    ) throws -> TileCodec.DecodeTally {
        let workspace = CodecWorkspace(policy: .alwaysSplit)
        try TileAboveTests.decode(compressed, tiles: tiles, into: output, threads: threads, workspace: workspace)
        return workspace.decodeTally
    }

    static let arguments: [(PixelFormat, Int)] = [
        (.yuv420BiPlanarVideoRange8, 5), (.yuv420BiPlanarVideoRange8, 6), (.yuv420BiPlanarVideoRange10, 5),
        (.yuv420BiPlanarVideoRange10, 6), (.bgra8, 6),
    ]

    /// Screen content whose Y takes `lz4Up`: into a pixel buffer with contiguous rows, every `lz4Up` Y below a band
    /// this worker decoded decodes in the plane (exactly that many, on 1 and 2 threads), and the frame is exact; a
    /// pixel buffer with padded rows and planes in caller memory take the private area (none in the plane), exact
    /// too (the last band shorter than the others). BGRA has no Y plane: none in the plane. Layout version 5 gives liblz4 the block, version 6 its coded
    /// literals to the one-pass decoder.
    @Test(arguments: arguments)
    func lz4UpYDecodesInThePrivatePlaneAndOnlyThere(_ format: PixelFormat, layoutVersion: Int) throws {
        let width = Self.width
        // The last band is 42 rows: shorter than the others, its rows end the plane.
        let height = 64 * Self.bands - 22
        let bytes = Self.image(format, height: height)
        let (_, compressed, _) = try ScreenContentTests.compress(
            bytes,
            format,
            width: width,
            height: height,
            layoutVersion: layoutVersion
        )
        let components = format == .bgra8 ? 4 : 3
        let yModes = try Self.yModes(compressed, components: components)
        let all = 0..<Self.bands
        if format != .bgra8 {
            #expect(Self.planeTiles(yModes, tiles: all, starts: [0]) > 1, "\(yModes)")
        }
        if layoutVersion == 6 {
            #expect(try SurfaceCodec.modeCounts(of: compressed)["codedLiterals", default: 0] > 0)
        }
        for threads in [1, 2] {
            let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
            #expect(output.bytesPerRow(ofPlane: 0) == width * (format == .bgra8 ? 4 : format.bitDepth > 8 ? 2 : 1))
            let tally = try Self.decodeCounting(compressed, tiles: all, into: output, threads: threads)
            let starts = Self.workerStarts(all, workers: threads)
            let expected = format == .bgra8 ? 0 : Self.planeTiles(yModes, tiles: all, starts: starts)
            #expect(tally.planeDictionaryDecodes == expected, "\(threads) threads")
            if threads == 1 { #expect(tally.reloadedInnerPayloads == 0) }
            #expect(try packed(output) == bytes, "\(threads) threads")
        }
        // Rows padded to 1024 (or 2048, 4096) bytes: the band above's Y is not right before this band's rows.
        let padded = try PixelBuffer(width: width, height: height, pixelFormat: format, bytesPerRowAlignment: 1024)
        #expect(padded.bytesPerRow(ofPlane: 0) > width * (format.bitDepth > 8 ? 2 : 1))
        #expect(try Self.decodeCounting(compressed, tiles: all, into: padded).planeDictionaryDecodes == 0)
        #expect(try packed(padded) == bytes)
        // Planes in memory the caller hands over (it may be another process's): never read back as a dictionary.
        let context = SurfaceCodecContext(threadCount: 1)
        let rowBytes = packedRowBytes(format, width: width)
        var plane0 = [UInt8](repeating: 0, count: rowBytes[0] * height)
        var plane1 = [UInt8](repeating: 0, count: format == .bgra8 ? 0 : rowBytes[1] * height / 2)
        try compressed.lock([.readOnly])
        defer { try? compressed.unlock([.readOnly]) }
        try compressed.surface.withUnsafeBytes { source in
            try plane0.withUnsafeMutableBytes { p0 in
                try plane1.withUnsafeMutableBytes { p1 in
                    try context.decompress(
                        source,
                        width: width,
                        height: height,
                        format: format,
                        plane0: CodecDestinationPlane(base: p0.baseAddress!, bytesPerRow: rowBytes[0]),
                        plane1: format == .bgra8
                            ? nil : CodecDestinationPlane(base: p1.baseAddress!, bytesPerRow: rowBytes[1])
                    )
                }
            }
        }
        #expect(context.workspace.withLock { $0.decodeTally.planeDictionaryDecodes } == 0)
        #expect(plane0 + plane1 == bytes)
    }

    /// Tile row by tile row (decodeTileRows into a scratch of 4 tile rows, the batch decoded on 1 and 2 threads):
    /// the first band of a batch reads its chain from the surface into the private area, the others decode in the
    /// scratch's plane; single tile rows and short runs decoded on their own likewise. All exact.
    @Test(arguments: [PixelFormat.yuv420BiPlanarVideoRange8, .yuv420BiPlanarVideoRange10])
    func tileRowsDecodeInThePlaneAfterTheFirstBandOfABatch(_ format: PixelFormat) throws {
        let width = Self.width
        let height = 64 * Self.bands
        let bytes = Self.image(format, height: height)
        let (_, compressed, _) = try ScreenContentTests.compress(
            bytes,
            format,
            width: width,
            height: height,
            layoutVersion: 6
        )
        let yModes = try Self.yModes(compressed, components: 3)
        for threads in [1, 2] {
            let workspace = CodecWorkspace(policy: .alwaysSplit)
            let scratch = try PixelBuffer(width: width, height: 64 * 4, pixelFormat: format)
            var assembled = [[UInt8]](repeating: [], count: 2)
            var count = 0
            var expected = 0
            try CodecDriver.decodeTileRows(
                of: compressed,
                into: scratch,
                threads: threads,
                verifyChecksums: true,
                workspace: workspace
            ) { rows in
                count += workspace.decodeTally.planeDictionaryDecodes
                let tiles = rows.lowerBound / 64..<(rows.upperBound + 63) / 64
                expected += Self.planeTiles(yModes, tiles: tiles, starts: Self.workerStarts(tiles, workers: threads))
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
            #expect(expected > 0)
            #expect(count == expected, "\(threads) threads")
            #expect(assembled.flatMap { $0 } == bytes, "\(threads) threads")
        }
        for tiles in [3..<4, 2..<6, 9..<11] {
            let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
            let count = try Self.decodeCounting(compressed, tiles: tiles, into: output).planeDictionaryDecodes
            #expect(count == Self.planeTiles(yModes, tiles: tiles, starts: [tiles.lowerBound]), "tiles \(tiles)")
            let range = tiles.lowerBound * 64..<tiles.upperBound * 64
            #expect(
                TileAboveTests.rowsOf(try packed(output), format, width: width, height: height, pixelRows: range)
                    == TileAboveTests.rowsOf(bytes, format, width: width, height: height, pixelRows: range),
                "tiles \(tiles)"
            )
        }
    }

    /// A copy of `compressed` whose entry `index` holds `payload` under mode byte `modeByte`: sizes, the payload's
    /// checksum, the bytes used and the header checksum rewritten, every other payload as it was.
    static func replacing(
        _ compressed: PixelBuffer,
        entry index: Int,
        modeByte: UInt8,
        payload: [UInt8]
    ) throws -> PixelBuffer {
        let result = try SurfaceCodec.makeCompressedBuffer(
            width: compressed.width,
            height: compressed.height,
            format: compressed.pixelFormat
        )
        try compressed.lock([.readOnly])
        defer { try? compressed.unlock([.readOnly]) }
        try result.lock()
        defer { try? result.unlock() }
        compressed.surface.withUnsafeBytes { old in
            result.surface.withUnsafeMutableBytes { new in
                let count = Int(old.load(fromByteOffset: 28, as: UInt32.self))
                let payloadStart = 64 + 16 * count
                new.baseAddress!.copyMemory(from: old.baseAddress!, byteCount: payloadStart)
                var read = payloadStart
                var write = payloadStart
                for i in 0..<count {
                    let size = Int(old.load(fromByteOffset: 64 + 16 * i, as: UInt32.self))
                    if i == index {
                        payload.withUnsafeBytes { bytes in
                            (new.baseAddress! + write).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
                            new.storeBytes(of: UInt32(bytes.count), toByteOffset: 64 + 16 * i, as: UInt32.self)
                            new[64 + 16 * i + 4] = modeByte
                            new.storeBytes(
                                of: Checksum.hash(bytes.baseAddress!, count: bytes.count),
                                toByteOffset: 64 + 16 * i + 8,
                                as: UInt64.self
                            )
                        }
                        write += payload.count
                    } else {
                        (new.baseAddress! + write).copyMemory(from: old.baseAddress! + read, byteCount: size)
                        write += size
                    }
                    read += size
                }
                new.storeBytes(of: UInt64(write), toByteOffset: 32, as: UInt64.self)
                TileCodec.sealHeader(new.baseAddress!, tableByteCount: 16 * count)
            }
        }
        return result
    }

    /// A packed8LZ4Up Y below a band whose Y decoded in the plane takes that Y as its dictionary from a private copy
    /// of its last 64 KiB (no chain decoded again), and decodes to the same samples as the same packed8 payload
    /// stored as packed8LZ4 (no dictionary); the block cannot be decoded without its dictionary. Into a plane with
    /// contiguous rows (the in-plane path) and one with padded rows, all other rows exact.
    @Test func aPackedUpYBelowABandDecodedInThePlaneTakesItsTailPrivately() throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let width = Self.width
        let height = 64 * Self.bands
        let bytes = Self.image(format, height: height)
        let (_, compressed, _) = try ScreenContentTests.compress(bytes, format, width: width, height: height)
        let yModes = try Self.yModes(compressed, components: 3)
        // Tile 7 (the last of the first chain) gets a packed8 payload whose residuals are tile 6's Y, which decodes
        // in the plane.
        #expect(Self.planeTiles(yModes, tiles: 6..<7, starts: []) == 1, "\(yModes)")
        let raw = width * 64
        let aboveY = Array(bytes[6 * raw..<7 * raw])
        let blocks = raw / 8
        let packedPayload =
            [UInt8](repeating: 0x88, count: blocks / 2) + [UInt8](repeating: 0, count: blocks / 8) + aboveY
        var plain = [UInt8](repeating: 0, count: raw)
        let plainCount = LZ4Block.compress(packedPayload, into: &plain)
        #expect(plainCount > 0)
        let state = UnsafeMutableRawPointer.allocate(byteCount: LZ4Block.highCompressionStateByteCount, alignment: 64)
        defer { state.deallocate() }
        var up = [UInt8](repeating: 0, count: raw)
        let upCount = packedPayload.withUnsafeBytes { source in
            aboveY.withUnsafeBytes { dictionary in
                up.withUnsafeMutableBytes { output in
                    LZ4Block.compressHC(
                        source.baseAddress!,
                        count: source.count,
                        dictionary: dictionary.baseAddress!,
                        dictionaryCount: dictionary.count,
                        into: output.baseAddress!,
                        capacity: output.count,
                        state: state
                    )
                }
            }
        }
        #expect(upCount > 0 && upCount < plainCount)
        up.removeLast(up.count - upCount)
        var withoutDictionary = [UInt8](repeating: 0, count: packedPayload.count)
        #expect(LZ4Block.decompress(up, count: up.count, into: &withoutDictionary) != packedPayload.count)
        let expectedSurface = try Self.replacing(
            compressed,
            entry: 7 * 3,
            modeByte: TileMode.packed8LZ4.rawValue,
            payload: Array(plain[..<plainCount])
        )
        let upSurface = try Self.replacing(
            compressed,
            entry: 7 * 3,
            modeByte: TileMode.packed8LZ4Up.rawValue,
            payload: up
        )
        let expected = try PixelBuffer(width: width, height: height, pixelFormat: format)
        try SurfaceCodec.decompress(expectedSurface, into: expected, options: .init(threadCount: 1))
        let expectedBytes = try packed(expected)
        let outside = 0..<7 * 64
        #expect(
            TileAboveTests.rowsOf(expectedBytes, format, width: width, height: height, pixelRows: outside)
                == TileAboveTests.rowsOf(bytes, format, width: width, height: height, pixelRows: outside)
        )
        #expect(expectedBytes[7 * raw..<8 * raw] != bytes[7 * raw..<8 * raw])
        let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
        let tally = try Self.decodeCounting(upSurface, tiles: 0..<Self.bands, into: output)
        let upModes = try Self.yModes(upSurface, components: 3)
        #expect(upModes[7] == .packed8LZ4Up)
        #expect(tally.planeDictionaryDecodes == Self.planeTiles(upModes, tiles: 0..<Self.bands, starts: [0]))
        #expect(tally.reloadedInnerPayloads == 0)
        #expect(try packed(output) == expectedBytes)
        let padded = try PixelBuffer(width: width, height: height, pixelFormat: format, bytesPerRowAlignment: 1024)
        #expect(try Self.decodeCounting(upSurface, tiles: 0..<Self.bands, into: padded).planeDictionaryDecodes == 0)
        #expect(try packed(padded) == expectedBytes)
    }

    /// One literal (`0x58`), a match of `matchLength` bytes at `offset`, then the block's last literals.
    static func block(offset: Int, matchLength: Int, lastLiterals: [UInt8]) -> [UInt8] {
        func lengthBytes(_ value: Int) -> [UInt8] {
            var rest = value
            var result: [UInt8] = []
            while rest >= 255 {
                result.append(255)
                rest -= 255
            }
            return result + [UInt8(rest)]
        }
        let match = matchLength - 4
        var result: [UInt8] = [0x10 | UInt8(min(match, 15)), 0x58, UInt8(offset & 0xFF), UInt8(offset >> 8)]
        if match >= 15 { result += lengthBytes(match - 15) }
        let last = lastLiterals.count
        result.append(UInt8(min(last, 15)) << 4)
        if last >= 15 { result += lengthBytes(last - 15) }
        return result + lastLiterals
    }

    /// Hostile `lz4Up` Y blocks below a band that decoded in the plane: a match that starts exactly at the
    /// dictionary's first byte, and one that runs from the dictionary into the output, decode as §6.5 says; a match
    /// that reaches one byte before the dictionary, and one that runs past the output's end, are `corruptPayload`.
    /// The same verdicts and bytes in the plane (contiguous rows) and through the private area (padded rows), for
    /// liblz4 (layout version 5) and the one-pass decoder of coded literals (version 6).
    @Test(arguments: [5, 6])
    func hostileBlocksGetTheSameVerdictInThePlane(layoutVersion: Int) throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let width = Self.width
        let height = 64 * Self.bands
        let bytes = Self.image(format, height: height)
        let (_, compressed, _) = try ScreenContentTests.compress(
            bytes,
            format,
            width: width,
            height: height,
            layoutVersion: layoutVersion
        )
        let yModes = try Self.yModes(compressed, components: 3)
        #expect(Self.planeTiles(yModes, tiles: 2..<3, starts: []) == 1, "\(yModes)")
        let raw = width * 64
        let dictionary = Array(bytes[raw..<2 * raw])  // tile 1's Y: 40960 bytes, all within reach
        let last: [UInt8] = [1, 2, 3, 4, 5]
        let cases: [(offset: Int, matchLength: Int, valid: Bool)] = [
            (1 + dictionary.count, raw - 1 - last.count, true),  // from the dictionary's first byte
            (1 + 100, raw - 1 - last.count, true),  // from the dictionary's last 100 bytes on into the output
            (2 + dictionary.count, raw - 1 - last.count, false),  // one byte before the dictionary
            (1 + 100, raw - 1, false),  // past the output's end
        ]
        for (offset, matchLength, valid) in cases {
            let lz4 = Self.block(offset: offset, matchLength: matchLength, lastLiterals: last)
            var payload = lz4
            var modeByte = TileMode.lz4Up.rawValue
            if layoutVersion == 6 {
                payload = [UInt8](repeating: 0, count: raw)
                let coded = lz4.withUnsafeBytes { block in
                    payload.withUnsafeMutableBytes { output in
                        LZ4Block.codeLiterals(
                            block.baseAddress!,
                            count: block.count,
                            into: output.baseAddress!,
                            capacity: output.count
                        )
                    }
                }
                #expect(coded > 0)
                payload.removeLast(payload.count - coded)
                modeByte += TileMode.codedLiteralsFlag
            }
            let surface = try Self.replacing(compressed, entry: 2 * 3, modeByte: modeByte, payload: payload)
            // What §6.5 says the Y of tile 2 is: the literal, then the match copied byte by byte from D ‖ output.
            var stream = dictionary + [0x58]
            if valid {
                for _ in 0..<matchLength { stream.append(stream[stream.count - offset]) }
            }
            let expectedY = Array((stream + last)[dictionary.count...])
            for alignment in [64, 1024] {
                let output = try PixelBuffer(
                    width: width,
                    height: height,
                    pixelFormat: format,
                    bytesPerRowAlignment: alignment
                )
                let label = "offset \(offset), match \(matchLength), rows aligned to \(alignment)"
                if valid {
                    let tally = try Self.decodeCounting(surface, tiles: 0..<Self.bands, into: output)
                    #expect((tally.planeDictionaryDecodes > 0) == (alignment == 64), "\(label)")
                    let decoded = try packed(output)
                    #expect(Array(decoded[2 * raw..<3 * raw]) == expectedY, "\(label)")
                    #expect(decoded[..<(2 * raw)] == bytes[..<(2 * raw)], "\(label)")
                } else {
                    #expect(throws: CompressionError.self, "\(label)") {
                        _ = try Self.decodeCounting(surface, tiles: 0..<Self.bands, into: output)
                    }
                    do {
                        _ = try Self.decodeCounting(surface, tiles: 0..<Self.bands, into: output)
                    } catch let error as CompressionError {
                        #expect(error.code == .corruptPayload, "\(label)")
                    }
                }
            }
        }
    }
}
