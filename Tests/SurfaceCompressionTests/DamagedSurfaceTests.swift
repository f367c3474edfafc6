import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// Damaged compressed surfaces: each must give the right typed error, never a crash or an out-of-bounds read.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct DamagedSurfaceTests {
    /// A compressed 96×64 420v frame with 32×32 tiles (so every mode has neighbours), and its bytes used.
    static func makeCompressed(format: PixelFormat = .yuv420BiPlanarVideoRange8) throws -> (PixelBuffer, Int) {
        let bytes = syntheticBytes(format, width: 96, height: 64, seed: 5)
        let source = try makeBuffer(bytes, width: 96, height: 64, format: format)
        let tiles = SurfaceCodec.TileSize(width: 32, height: 32)
        let compressed = try SurfaceCodec.makeCompressedBuffer(width: 96, height: 64, format: format, tileSize: tiles)
        let statistics = try SurfaceCodec.compress(source, into: compressed, options: .init(tileSize: tiles))
        return (compressed, statistics.compressedByteCount)
    }

    /// Edits the compressed bytes; `reseal` recomputes the header checksum, so only the structural checks see it.
    static func damage(
        _ buffer: PixelBuffer,
        reseal: Bool = false,
        _ edit: (UnsafeMutableRawBufferPointer) -> Void
    ) throws {
        try buffer.lock()
        defer { try? buffer.unlock() }
        buffer.surface.withUnsafeMutableBytes { bytes in
            edit(bytes)
            if reseal {
                let entries = min(
                    Int(bytes.load(fromByteOffset: 28, as: UInt32.self)),
                    (bytes.count - 64) / entryByteCount
                )
                TileCodec.sealHeader(bytes.baseAddress!, tableByteCount: entries * entryByteCount)
            }
        }
    }

    /// Table entries of the layout the encoder writes (version 2): size u32, mode u8 and 3 zero bytes,
    /// checksum u64; offsets are implied.
    static let entryByteCount = 16

    static func entryOffset(_ index: Int) -> Int { 64 + entryByteCount * index }
    static func modeOffset(_ index: Int) -> Int { entryOffset(index) + 4 }

    /// Where entry `index`'s payload starts: after the table and the payloads before it.
    static func payloadOffset(_ bytes: UnsafeMutableRawBufferPointer, entry index: Int, entryCount: Int) -> Int {
        var offset = 64 + entryByteCount * entryCount
        for i in 0..<index { offset += Int(bytes.load(fromByteOffset: entryOffset(i), as: UInt32.self)) }
        return offset
    }

    static func expectDecode(
        _ compressed: PixelBuffer,
        fails code: CompressionError.Code,
        verifiesChecksums: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let output = try PixelBuffer(
            width: compressed.width,
            height: compressed.height,
            pixelFormat: compressed.pixelFormat.base
        )
        do {
            try SurfaceCodec.decompress(compressed, into: output, options: .init(verifiesChecksums: verifiesChecksums))
            Issue.record("decoded a damaged surface; expected \(code)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        }
    }

    /// Copies the first `count` bytes of a compressed buffer into a new buffer of exactly that size.
    static func truncated(_ buffer: PixelBuffer, to count: Int) throws -> PixelBuffer {
        let copy = try PixelBuffer(
            width: buffer.width,
            height: buffer.height,
            compressedFormat: buffer.pixelFormat,
            opaqueByteCount: count
        )
        try buffer.lock([.readOnly])
        defer { try? buffer.unlock([.readOnly]) }
        try copy.lock()
        defer { try? copy.unlock() }
        buffer.surface.withUnsafeBytes { source in
            copy.surface.withUnsafeMutableBytes { target in
                target.baseAddress!.copyMemory(from: source.baseAddress!, byteCount: count)
            }
        }
        return copy
    }

    @Test func truncatedSurfacesAreReportedAsTruncated() throws {
        let (compressed, used) = try Self.makeCompressed()
        for count in [1, 10, 63] {
            try Self.expectDecode(try Self.truncated(compressed, to: count), fails: .truncated)
            #expect(throws: CompressionError(code: .truncated, operation: "SurfaceCodec.bytesUsed")) {
                try SurfaceCodec.bytesUsed(of: try Self.truncated(compressed, to: count))
            }
        }
        for count in [64, 100, used / 2, used - 1] {
            try Self.expectDecode(try Self.truncated(compressed, to: count), fails: .truncated)
        }
        // Exactly the bytes used is enough: nothing past them is read.
        let exact = try Self.truncated(compressed, to: used)
        let output = try PixelBuffer(width: 96, height: 64, pixelFormat: .yuv420BiPlanarVideoRange8)
        try SurfaceCodec.decompress(exact, into: output)
    }

    @Test func aWrongMagicOrVersionIsRejected() throws {
        var (compressed, _) = try Self.makeCompressed()
        try Self.damage(compressed) { $0[0] ^= 0x20 }
        try Self.expectDecode(compressed, fails: .badMagic)
        for version in [0, 9, 0x101] {  // 9: the first version after the current one (8)
            (compressed, _) = try Self.makeCompressed()
            try Self.damage(compressed) { $0.storeBytes(of: UInt16(version), toByteOffset: 4, as: UInt16.self) }
            try Self.expectDecode(compressed, fails: .unsupportedVersion)
        }
    }

    @Test func impossibleHeaderFieldsAreRejected() throws {
        let edits: [(String, (UnsafeMutableRawBufferPointer) -> Void)] = [
            ("header size", { $0.storeBytes(of: UInt16(60), toByteOffset: 6, as: UInt16.self) }),
            ("unknown format", { $0.storeBytes(of: UInt32(0x1234_5678), toByteOffset: 8, as: UInt32.self) }),
            ("zero width", { $0.storeBytes(of: UInt32(0), toByteOffset: 12, as: UInt32.self) }),
            ("huge height", { $0.storeBytes(of: UInt32(1 << 30), toByteOffset: 16, as: UInt32.self) }),
            ("odd tile width", { $0.storeBytes(of: UInt32(31), toByteOffset: 20, as: UInt32.self) }),
            ("zero tile height", { $0.storeBytes(of: UInt32(0), toByteOffset: 24, as: UInt32.self) }),
            ("entry count", { $0.storeBytes(of: UInt32(5), toByteOffset: 28, as: UInt32.self) }),
            ("bytes used below the table", { $0.storeBytes(of: UInt64(100), toByteOffset: 32, as: UInt64.self) }),
            ("bytes used past the worst case", { $0.storeBytes(of: UInt64.max, toByteOffset: 32, as: UInt64.self) }),
            ("reserved", { $0[50] = 1 }),
        ]
        for (name, edit) in edits {
            let (compressed, _) = try Self.makeCompressed()
            try Self.damage(compressed, reseal: false, edit)
            let output = try PixelBuffer(width: 96, height: 64, pixelFormat: .yuv420BiPlanarVideoRange8)
            #expect(throws: CompressionError.self, "\(name)") { try SurfaceCodec.decompress(compressed, into: output) }
            do { try SurfaceCodec.decompress(compressed, into: output) } catch {
                #expect(error.code == .invalidHeader, "\(name): \(error)")
            }
        }
    }

    @Test func aHeaderForAnotherFormatOrSizeIsAMismatch() throws {
        let (compressed, _) = try Self.makeCompressed()
        try Self.damage(compressed, reseal: true) {
            $0.storeBytes(of: UInt32(0x3432_3066), toByteOffset: 8, as: UInt32.self)
        }
        try Self.expectDecode(compressed, fails: .formatMismatch)
    }

    @Test func bitFlipsInTheHeaderTableOrPayloadFailTheChecksum() throws {
        let (_, used) = try Self.makeCompressed()
        for position in [
            13, 21, 41, Self.entryOffset(0) + 2, Self.entryOffset(7) + 13, used - 1, used / 2,
            64 + Self.entryByteCount * 18 + 3,
        ] {
            let (compressed, _) = try Self.makeCompressed()
            try Self.damage(compressed) { $0[position] ^= 0x10 }
            let output = try PixelBuffer(width: 96, height: 64, pixelFormat: .yuv420BiPlanarVideoRange8)
            do {
                try SurfaceCodec.decompress(compressed, into: output)
                Issue.record("bit flip at \(position) went unnoticed")
            } catch {
                // A flip in a checked header field may be caught by that check before the checksum.
                #expect(
                    [.checksumMismatch, .invalidHeader, .formatMismatch].contains(error.code),
                    "\(position): \(error)"
                )
            }
        }
    }

    @Test func tileSizesOutsideTheBytesUsedAreOutOfRange() throws {
        let (compressed, used) = try Self.makeCompressed()
        try Self.damage(compressed, reseal: true) {
            $0.storeBytes(of: UInt32(used + 10), toByteOffset: Self.entryOffset(4), as: UInt32.self)
        }
        try Self.expectDecode(compressed, fails: .tableOutOfRange)
        let (second, _) = try Self.makeCompressed()
        try Self.damage(second, reseal: true) {
            $0.storeBytes(of: UInt32.max, toByteOffset: Self.entryOffset(2), as: UInt32.self)
        }
        try Self.expectDecode(second, fails: .tableOutOfRange)
        // One byte more in the first entry pushes the last payload past the bytes used.
        let (third, _) = try Self.makeCompressed()
        try Self.damage(third, reseal: true) {
            let size = $0.load(fromByteOffset: Self.entryOffset(0), as: UInt32.self)
            $0.storeBytes(of: size + 1, toByteOffset: Self.entryOffset(0), as: UInt32.self)
        }
        try Self.expectDecode(third, fails: .tableOutOfRange)
    }

    @Test func payloadsThatDoNotEndAtTheBytesUsedOrAreSwappedAreRejected() throws {
        let (compressed, _) = try Self.makeCompressed()
        try Self.damage(compressed, reseal: true) {
            let size = $0.load(fromByteOffset: Self.entryOffset(5), as: UInt32.self)
            $0.storeBytes(of: size - 1, toByteOffset: Self.entryOffset(5), as: UInt32.self)
        }
        try Self.expectDecode(compressed, fails: .overlappingTiles)
        // Two entries of the same size class (Cb and Cr of one tile) swapped: the table is consistent, but each
        // payload is now checked against the other's checksum.
        let (swapped, _) = try Self.makeCompressed()
        try Self.damage(swapped, reseal: true) {
            let a = $0.load(fromByteOffset: Self.entryOffset(4), as: (UInt64, UInt64).self)
            let b = $0.load(fromByteOffset: Self.entryOffset(5), as: (UInt64, UInt64).self)
            $0.storeBytes(of: b, toByteOffset: Self.entryOffset(4), as: (UInt64, UInt64).self)
            $0.storeBytes(of: a, toByteOffset: Self.entryOffset(5), as: (UInt64, UInt64).self)
        }
        try Self.expectDecode(swapped, fails: .checksumMismatch)
    }

    @Test func unknownTileModesAreRejected() throws {
        let (compressed, _) = try Self.makeCompressed()
        try Self.damage(compressed, reseal: true) { $0[Self.modeOffset(1)] = 9 }
        try Self.expectDecode(compressed, fails: .invalidTileMode)
        // A 10-bit mode in an 8-bit surface.
        let (other, _) = try Self.makeCompressed()
        try Self.damage(other, reseal: true) {
            if $0[Self.modeOffset(1)] == TileMode.packed8.rawValue {
                $0[Self.modeOffset(1)] = TileMode.packed10.rawValue
            }
        }
        try Self.expectDecode(other, fails: .invalidTileMode)
    }

    @Test func payloadsThatDecodeToTheWrongLengthAreCorrupt() throws {
        // A packed tile whose width nibble is changed no longer adds up to its size.
        let (compressed, _) = try Self.makeCompressed()
        var damaged = false
        try Self.damage(compressed) { bytes in
            for index in 0..<18 where !damaged && bytes[Self.modeOffset(index)] == TileMode.packed8.rawValue {
                bytes[Self.payloadOffset(bytes, entry: index, entryCount: 18)] ^= 0x01
                damaged = true
            }
        }
        #expect(damaged)
        try Self.expectDecode(compressed, fails: .corruptPayload, verifiesChecksums: false)
        try Self.expectDecode(compressed, fails: .checksumMismatch, verifiesChecksums: true)
        // A raw tile whose size is not the raw size.
        let (raw, _) = try Self.makeCompressed()
        var relabelled = false
        try Self.damage(raw, reseal: true) { bytes in
            for index in 0..<18 where !relabelled && bytes[Self.modeOffset(index)] == TileMode.packed8.rawValue {
                bytes[Self.modeOffset(index)] = TileMode.raw.rawValue
                relabelled = true
            }
        }
        #expect(relabelled)
        try Self.expectDecode(raw, fails: .corruptPayload)
    }

    @Test func garbageLZ4PayloadsAreCorrupt() throws {
        // A screen-like frame (flat with a few edges) so tiles use LZ4.
        var bytes = [UInt8](repeating: 30, count: 256 * 64 * 4)
        for i in stride(from: 0, to: bytes.count, by: 37) { bytes[i] = UInt8(i % 251) }
        let source = try makeBuffer(bytes, width: 256, height: 64, format: .bgra8)
        let tiles = SurfaceCodec.TileSize(width: 64, height: 64)
        let compressed = try SurfaceCodec.makeCompressedBuffer(width: 256, height: 64, format: .bgra8, tileSize: tiles)
        // Version 5: plain LZ4 blocks (version 6 may code their literals, CodedLiteralsTests).
        var options = SurfaceCodec.Options(tileSize: tiles)
        options.layoutVersion = 5
        try SurfaceCodec.compress(source, into: compressed, options: options)
        #expect(try SurfaceCodec.modeCounts(of: compressed)["lz4", default: 0] > 0)
        var damaged = false
        try Self.damage(compressed) { bytes in
            for index in 0..<16 where !damaged && bytes[Self.modeOffset(index)] == TileMode.lz4.rawValue {
                bytes[Self.payloadOffset(bytes, entry: index, entryCount: 16)] = 0xFF  // a literal run too long
                damaged = true
            }
        }
        try Self.expectDecode(compressed, fails: .corruptPayload, verifiesChecksums: false)
    }

    @Test(arguments: PixelFormat.baseFormats)
    func randomDamageNeverCrashesTheDecoder(_ format: PixelFormat) throws {
        var random = SplitMix(seed: UInt64(format.fourCC))
        let (reference, used) = try Self.makeCompressed(format: format)
        try reference.lock([.readOnly])
        let original = reference.surface.withUnsafeBytes { Array($0) }
        try reference.unlock([.readOnly])
        let output = try PixelBuffer(width: 96, height: 64, pixelFormat: format)
        var failures = 0
        for round in 0..<150 {
            try Self.damage(reference, reseal: round % 2 == 0) { bytes in
                bytes.copyBytes(from: original)
                for _ in 0..<(1 + Int(random.next() % 4)) {
                    // Mostly the header and table, where the structure is.
                    let limit = random.next() % 3 == 0 ? used : 64 + Self.entryByteCount * 18
                    bytes[Int(random.next() % UInt64(limit))] ^= UInt8(1 << (random.next() % 8))
                }
            }
            do {
                try SurfaceCodec.decompress(reference, into: output, options: .init(verifiesChecksums: round % 3 != 0))
            } catch {
                failures += 1
            }
        }
        #expect(failures > 0)
    }
}
