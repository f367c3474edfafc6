import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// The Up modes of layout version 5 (packed8LZ4Up, packed10LZ4Up, packed16LZ4Up, lz4Up): a tile's LZ4 block may
/// match into the inner payload of the tile above (docs/COMPRESSED-LAYOUT.md §6.5). Every decode is compared byte
/// for byte with the source; hostile tables and payloads must fail with a typed error.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct TileAboveTests {
    static let upModes: Set<String> = ["packed8LZ4Up", "packed10LZ4Up", "packed16LZ4Up", "lz4Up"]

    static func upEntries(_ compressed: PixelBuffer) throws -> Int {
        try SurfaceCodec.modeCounts(of: compressed).filter { upModes.contains($0.key) }.map(\.value).reduce(0, +)
    }

    /// The table's modes, entry by entry.
    static func modes(_ compressed: PixelBuffer) throws -> [TileMode] {
        try compressed.lock([.readOnly])
        defer { try? compressed.unlock([.readOnly]) }
        return compressed.surface.withUnsafeBytes { bytes in
            let count = Int(bytes.load(fromByteOffset: 28, as: UInt32.self))
            return (0..<count).map { TileMode(rawValue: bytes[DamagedSurfaceTests.modeOffset($0)])! }
        }
    }

    /// Decodes only tiles `tiles` of `compressed` into `output` (the way decodeTileRows decodes one batch): a worker
    /// that starts there has none of the tiles above, so it reads their chain from the surface.
    static func decode(
        _ compressed: PixelBuffer,
        tiles: Range<Int>,
        into output: PixelBuffer,
        threads: Int = 1,
        verifiesChecksums: Bool = true,
        innerAreaPayloads: Int = TileCodec.innerAreaPayloads,
        workspace: CodecWorkspace = CodecWorkspace(policy: .alwaysSplit)
    ) throws {
        let op = "test"
        try PixelBufferAccess.lock(compressed, readOnly: true, op)
        defer { PixelBufferAccess.unlock(compressed, readOnly: true) }
        try PixelBufferAccess.lock(output, readOnly: false, op)
        defer { PixelBufferAccess.unlock(output, readOnly: false) }
        let header = try CodecDriver.header(
            of: compressed,
            verifyChecksums: verifiesChecksums,
            workspace: CodecWorkspace(),
            op
        )
        try PixelBufferAccess.withPlanes(of: output, writable: true, op) { (planes) throws(CompressionError) in
            try PixelBufferAccess.withOpaqueBytes(of: compressed) { (bytes) throws(CompressionError) in
                try TileCodec.decode(
                    header,
                    from: bytes.baseAddress!,
                    tiles: tiles,
                    into: planes,
                    threads: threads,
                    verifyChecksums: verifiesChecksums,
                    workspace: workspace,
                    innerAreaPayloads: innerAreaPayloads
                )
                // The split is forced: as many workers as threads and tiles allow.
                if workspace.policy == .alwaysSplit {
                    #expect(workspace.lastDecodeWorkers == min(max(threads, 1), tiles.count))
                }
            }
        }
    }

    /// The rows of `bytes` (a packed base-format frame) that tile rows `rows` (of 64-pixel bands) cover, per plane.
    static func rowsOf(_ bytes: [UInt8], _ format: PixelFormat, width: Int, height: Int, pixelRows: Range<Int>) -> [UInt8] {
        var result: [UInt8] = []
        var planeStart = 0
        for plane in format.planes {
            let rowBytes = width / plane.horizontalSubsampling * plane.bytesPerElement
            let planeRows = height / plane.verticalSubsampling
            let first = pixelRows.lowerBound / plane.verticalSubsampling
            let end = pixelRows.upperBound / plane.verticalSubsampling
            result += bytes[planeStart + first * rowBytes..<planeStart + end * rowBytes]
            planeStart += planeRows * rowBytes
        }
        return result
    }

    static let formats: [PixelFormat] = [.yuv420BiPlanarVideoRange8, .bgra8, .yuv420BiPlanarVideoRange10]

    /// Screen content in 64-row bands takes Up modes, says version 5, never in the first row of a chain (rows 0 and
    /// 8), is the same bytes whatever the number of encoding threads, and decodes exactly: whole (1 and 2 threads),
    /// tile row by tile row (decodeTileRows), and from any single tile row on its own (its chain read again).
    @Test(arguments: formats)
    func screenContentReachesIntoTheTileAboveAndDecodesExactly(_ format: PixelFormat) throws {
        let width = 640
        let height = 64 * 11
        let bytes = screenBytes(format, width: width, height: height, seed: 21)
        let (_, compressed, _) = try ScreenContentTests.compress(bytes, format, width: width, height: height)
        let counts = try SurfaceCodec.modeCounts(of: compressed)
        #expect(try Self.upEntries(compressed) > 0, "\(counts)")
        #expect(try ScreenContentTests.statedVersion(compressed) == 5)
        let modes = try Self.modes(compressed)
        let components = modes.count / 11
        for row in [0, 8] {
            #expect(modes[row * components..<(row + 1) * components].allSatisfy { !$0.usesTileAbove })
        }
        // Two encoding threads: chunks are whole chains, so the same bytes.
        let source = try makeBuffer(bytes, width: width, height: height, format: format)
        let twice = try SurfaceCodec.makeCompressedBuffer(width: width, height: height, format: format)
        var options = SurfaceCodec.Options.split(2)
        options.layoutVersion = 5
        try SurfaceCodec.compress(source, into: twice, options: options)
        #expect(try packed(twice) == packed(compressed))
        for threads in [1, 2] {
            let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
            try SurfaceCodec.decompress(compressed, into: output, options: .split(threads))
            #expect(try packed(output) == bytes)
        }
        let scratch = try PixelBuffer(width: width, height: 64, pixelFormat: format)
        var assembled = [[UInt8]](repeating: [], count: format.planes.count)
        try SurfaceCodec.decodeTileRows(of: compressed, into: scratch) { rows in
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
        #expect(assembled.flatMap { $0 } == bytes)
        for row in [1, 5, 7, 9, 10] {
            let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
            try Self.decode(compressed, tiles: row..<row + 1, into: output)
            let all = try packed(output)
            let range = row * 64..<(row + 1) * 64
            #expect(
                Self.rowsOf(all, format, width: width, height: height, pixelRows: range)
                    == Self.rowsOf(bytes, format, width: width, height: height, pixelRows: range),
                "tile row \(row)"
            )
        }
    }

    /// A worker lays a chain's inner payloads end to end, each Up entry decoding right after its dictionary; when
    /// the area is full the dictionary's tail moves to the area's start. Areas of room for one or two of the
    /// largest payloads (a chain of seven Up entries outgrows them) decode the same bytes as the source: the
    /// whole frame on 1 and 2 threads, and single tile rows whose chain is read again from the surface.
    @Test(arguments: formats)
    func chainsThatOutgrowTheInnerAreaDecodeExactly(_ format: PixelFormat) throws {
        let width = 640
        let height = 64 * 11
        let bytes = screenBytes(format, width: width, height: height, seed: 29)
        let (_, compressed, _) = try ScreenContentTests.compress(bytes, format, width: width, height: height)
        let counts = try SurfaceCodec.modeCounts(of: compressed)
        #expect(try Self.upEntries(compressed) > 0, "\(counts)")
        for areaPayloads in [1, 2] {
            for threads in [1, 2] {
                let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
                try Self.decode(
                    compressed,
                    tiles: 0..<11,
                    into: output,
                    threads: threads,
                    innerAreaPayloads: areaPayloads
                )
                #expect(try packed(output) == bytes, "room for \(areaPayloads), \(threads) threads")
            }
            for row in [3, 7, 10] {
                let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
                try Self.decode(compressed, tiles: row..<row + 1, into: output, innerAreaPayloads: areaPayloads)
                let range = row * 64..<(row + 1) * 64
                let all = try packed(output)
                #expect(
                    Self.rowsOf(all, format, width: width, height: height, pixelRows: range)
                        == Self.rowsOf(bytes, format, width: width, height: height, pixelRows: range),
                    "room for \(areaPayloads), tile row \(row)"
                )
            }
        }
    }

    /// Up modes exist only from version 5: the same table under a version 4 header is refused.
    @Test func upModesInAVersion4SurfaceAreRefused() throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let (_, compressed, _) = try ScreenContentTests.compress(
            screenBytes(format, width: 320, height: 256, seed: 22),
            format,
            width: 320,
            height: 256
        )
        #expect(try Self.upEntries(compressed) > 0)
        try DamagedSurfaceTests.damage(compressed, reseal: true) {
            $0.storeBytes(of: UInt16(4), toByteOffset: 4, as: UInt16.self)
        }
        try DamagedSurfaceTests.expectDecode(compressed, fails: .invalidTileMode)
    }

    /// An Up entry in the first tile row of a chain (row 0, which has no tile above, and row 8) is refused by the
    /// table check, before any payload is read.
    @Test(arguments: [0, 8])
    func anUpEntryInTheFirstRowOfAChainIsRefused(row: Int) throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let (_, compressed, _) = try ScreenContentTests.compress(
            screenBytes(format, width: 320, height: 64 * 10, seed: 23),
            format,
            width: 320,
            height: 64 * 10
        )
        #expect(try ScreenContentTests.statedVersion(compressed) == 5)
        try DamagedSurfaceTests.damage(compressed, reseal: true) {
            $0[DamagedSurfaceTests.modeOffset(row * 3)] = TileMode.packed8LZ4Up.rawValue
        }
        try DamagedSurfaceTests.expectDecode(compressed, fails: .invalidTileMode)
    }

    /// The tile above is the dictionary: when its payload is bad, the Up entry below fails too, also when it is
    /// decoded on its own (the decoder then reads the chain from the surface): a broken LZ4 stream is corrupt, a
    /// flipped byte a checksum mismatch. Relabelling an Up entry as the same mode without the dictionary, or the
    /// reverse, never decodes.
    @Test func anUpEntryWhoseDictionaryIsBadFails() throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let width = 640
        let height = 64 * 4
        let bytes = screenBytes(format, width: width, height: height, seed: 24)
        let (_, reference, _) = try ScreenContentTests.compress(bytes, format, width: width, height: height)
        let modes = try Self.modes(reference)
        // An Up entry of the Y component whose dictionary entry (the tile above) is an LZ4 block.
        guard
            let index = modes.indices.first(where: {
                $0 >= 3 && modes[$0].usesTileAbove && [.lz4, .lz4Up, .packed8LZ4, .packed8LZ4Up].contains(modes[$0 - 3])
            })
        else {
            Issue.record("no Up entry below an LZ4 entry: \(modes)")
            return
        }
        let tile = index / 3
        for verifies in [false, true] {
            let (_, compressed, _) = try ScreenContentTests.compress(bytes, format, width: width, height: height)
            try DamagedSurfaceTests.damage(compressed) { surface in
                // The first token of the LZ4 block above: 15 literals and an extension byte of 255 each, so the
                // literal run overruns the block.
                let offset = DamagedSurfaceTests.payloadOffset(surface, entry: index - 3, entryCount: modes.count)
                surface[offset] = 0xFF
                surface[offset + 1] = 0xFF
            }
            let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
            #expect {
                try Self.decode(compressed, tiles: tile..<tile + 1, into: output, verifiesChecksums: verifies)
            } throws: { error in
                (error as? CompressionError)?.code == (verifies ? .checksumMismatch : .corruptPayload)
            }
        }
        // Relabelled: an Up entry read without its dictionary, a plain LZ4 entry read with one.
        for (from, to) in [(TileMode.packed8LZ4Up, TileMode.packed8LZ4), (.lz4Up, .lz4)] where modes.contains(from) {
            let (_, compressed, _) = try ScreenContentTests.compress(bytes, format, width: width, height: height)
            try DamagedSurfaceTests.damage(compressed, reseal: true) { surface in
                for i in modes.indices where modes[i] == from { surface[DamagedSurfaceTests.modeOffset(i)] = to.rawValue }
            }
            let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
            do {
                try SurfaceCodec.decompress(compressed, into: output, options: .init(verifiesChecksums: false))
                // A block that never reaches into the dictionary decodes the same either way; any other must fail.
                #expect(try packed(output) == bytes)
            } catch let error as CompressionError {
                #expect(error.code == .corruptPayload)
            }
        }
    }

    /// liblz4's bound with a dictionary: a match may reach back into the dictionary, never before it.
    @Test func aMatchBeforeTheDictionaryIsRefused() throws {
        // One literal, then a match of 4 at distance 100; then the required last literals (5).
        let block: [UInt8] = [0x10, 0x41, 100, 0, 0x50, 0x42, 0x43, 0x44, 0x45, 0x46]
        let dictionary = (0..<200).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let output = [UInt8](repeating: 0, count: 64)
        for (count, fits) in [(200, true), (99, true), (98, false), (0, false)] {
            // The dictionary right before the output, as the decoder lays it out.
            var contiguous = Array(dictionary[(200 - count)...]) + output
            let written = contiguous.withUnsafeMutableBytes { bytes in
                block.withUnsafeBytes { input in
                    LZ4Block.decompress(
                        input.baseAddress!,
                        count: block.count,
                        dictionary: UnsafeRawPointer(bytes.baseAddress!),
                        dictionaryCount: count,
                        into: bytes.baseAddress! + count,
                        capacity: output.count
                    )
                }
            }
            #expect((written == 10) == fits, "dictionary of \(count) bytes: \(written)")
            if fits {
                // Distance 100 from output position 1 is dictionary byte count − 99.
                let start = count - 99
                let decoded = Array(contiguous[count..<count + 10])
                #expect(decoded[0] == 0x41)
                #expect(Array(decoded[1..<5]) == Array(contiguous[start..<start + 4]))
                #expect(Array(decoded[5...]) == [0x42, 0x43, 0x44, 0x45, 0x46])
            }
        }
    }
}
