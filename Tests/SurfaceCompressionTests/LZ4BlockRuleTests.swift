import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// The LZ4 block rule of docs/COMPRESSED-LAYOUT.md §6.8: the decoder's verdict on every LZ4 block is the rule's, not
/// liblz4's. Each boundary of the rule is tried on both sides, and a block the rule accepts must decode with liblz4
/// to the size the rule gives.
@Suite struct LZ4BlockRuleTests {
    /// A sequence of `literals` literal bytes and, unless it is the last, a match at `offset` of `matchLength` bytes.
    static func sequence(literals: Int, offset: Int? = nil, matchLength: Int = 4) -> [UInt8] {
        var bytes: [UInt8] = []
        let literalCode = min(literals, 15)
        let matchCode = offset == nil ? 0 : min(matchLength - 4, 15)
        bytes.append(UInt8(literalCode << 4 | matchCode))
        if literals >= 15 {
            var rest = literals - 15
            while rest >= 255 {
                bytes.append(255)
                rest -= 255
            }
            bytes.append(UInt8(rest))
        }
        bytes += (0..<literals).map { UInt8(truncatingIfNeeded: 0x41 + $0 % 26) }
        guard let offset else { return bytes }
        bytes += [UInt8(offset & 0xFF), UInt8(offset >> 8)]
        if matchLength - 4 >= 15 {
            var rest = matchLength - 4 - 15
            while rest >= 255 {
                bytes.append(255)
                rest -= 255
            }
            bytes.append(UInt8(rest))
        }
        return bytes
    }

    static func check(_ block: [UInt8], capacity: Int, dictionary: Int = 0) -> Int {
        // An empty block gets a pointer to a byte it must not read (count 0).
        let bytes = block.isEmpty ? [0xEE] : block
        return bytes.withUnsafeBytes {
            LZ4Block.check($0.baseAddress!, count: block.count, capacity: capacity, dictionaryCount: dictionary)
        }
    }

    /// liblz4's size for `block` with `dictionary` zero bytes right before the output.
    static func liblz4(_ block: [UInt8], capacity: Int, dictionary: Int = 0) -> Int {
        var area = [UInt8](repeating: 0, count: dictionary + capacity + 1)
        return block.withUnsafeBytes { b in
            area.withUnsafeMutableBytes { a in
                dictionary == 0
                    ? LZ4Block.decompress(b.baseAddress!, count: b.count, into: a.baseAddress!, capacity: capacity)
                    : LZ4Block.decompress(
                        b.baseAddress!,
                        count: b.count,
                        dictionary: UnsafeRawPointer(a.baseAddress!),
                        dictionaryCount: dictionary,
                        into: a.baseAddress! + dictionary,
                        capacity: capacity
                    )
            }
        }
    }

    /// Expects the rule's verdict, and for an accepted block liblz4's agreement on the size.
    static func expect(
        _ block: [UInt8],
        capacity: Int,
        dictionary: Int = 0,
        valid: Bool,
        size: Int? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let checked = check(block, capacity: capacity, dictionary: dictionary)
        #expect((checked >= 0) == valid, "rule gave \(checked)", sourceLocation: sourceLocation)
        if valid {
            if let size { #expect(checked == size, sourceLocation: sourceLocation) }
            #expect(
                liblz4(block, capacity: capacity, dictionary: dictionary) == checked,
                "liblz4 disagrees on a valid block",
                sourceLocation: sourceLocation
            )
        }
    }

    @Test func aNonLastSequencesLiteralsEndAtMostTwelveBeforeTheCapacity() {
        // 4 literals, a match of 4, then 8 literals: 16 bytes; the first literals end at 4.
        let block = Self.sequence(literals: 4, offset: 4) + Self.sequence(literals: 8)
        Self.expect(block, capacity: 16, valid: true, size: 16)  // 4 ≤ 16 − 12
        Self.expect(block, capacity: 15, valid: false)  // and the last literals do not fit
        let longer = Self.sequence(literals: 5, offset: 5) + Self.sequence(literals: 7)
        Self.expect(longer, capacity: 17, valid: true, size: 16)  // 5 ≤ 17 − 12
        Self.expect(longer, capacity: 16, valid: false)  // 5 > 16 − 12
    }

    @Test func aMatchEndsAtMostFiveBeforeTheCapacity() {
        // Literals end at 4, the match of 8 at 12, then 5 literals: 17 bytes.
        let block = Self.sequence(literals: 4, offset: 4, matchLength: 8) + Self.sequence(literals: 5)
        Self.expect(block, capacity: 17, valid: true, size: 17)  // 12 ≤ 17 − 5
        // With a match length byte, 4 last literals keep 8 bytes after the first literals: the match of 19 ends at
        // 23, the output at 27.
        let long = Self.sequence(literals: 4, offset: 4, matchLength: 19) + Self.sequence(literals: 4)
        Self.expect(long, capacity: 28, valid: true, size: 27)  // 23 ≤ 28 − 5
        Self.expect(long, capacity: 27, valid: false)  // 23 > 27 − 5
    }

    @Test func aNonLastSequencesLiteralsEndAtMostEightBeforeTheBlocksEnd() {
        // After the first literals: offset (2), token (1) and the last literals, 5 of them: exactly 8 bytes.
        Self.expect(
            Self.sequence(literals: 4, offset: 4) + Self.sequence(literals: 5),
            capacity: 100,
            valid: true,
            size: 13
        )
        Self.expect(Self.sequence(literals: 4, offset: 4) + Self.sequence(literals: 4), capacity: 100, valid: false)
        // A match length byte counts among the 8 bytes too.
        Self.expect(
            Self.sequence(literals: 4, offset: 4, matchLength: 19) + Self.sequence(literals: 4),
            capacity: 100,
            valid: true,
            size: 27
        )
    }

    @Test func matchLengthBytesEndAtMostFourBeforeTheBlocksEnd() {
        // Three match length bytes (a match of 529), then a token and 3 literals: 4 bytes after them. With 2 last
        // literals the first literals still have 8 bytes after them, the length bytes only 3.
        let block = Self.sequence(literals: 4, offset: 4, matchLength: 529) + Self.sequence(literals: 3)
        Self.expect(block, capacity: 1000, valid: true, size: 536)
        let cut = Self.sequence(literals: 4, offset: 4, matchLength: 529) + Self.sequence(literals: 2)
        Self.expect(cut, capacity: 1000, valid: false)
    }

    @Test func anOffsetIsFromOneToThePositionPlusTheDictionary() {
        for (offset, dictionary, valid) in [
            (4, 0, true), (5, 0, false), (0, 0, false), (0, 100, false), (104, 100, true),
            (105, 100, false),
        ] {
            Self.expect(
                Self.sequence(literals: 4, offset: offset) + Self.sequence(literals: 8),
                capacity: 64,
                dictionary: dictionary,
                valid: valid
            )
        }
    }

    @Test func theLastSequenceEndsTheBlockAndFitsTheCapacity() {
        Self.expect(Self.sequence(literals: 20), capacity: 20, valid: true, size: 20)
        Self.expect(Self.sequence(literals: 20), capacity: 19, valid: false)
        Self.expect([0x00], capacity: 0, valid: true, size: 0)
        Self.expect(Array(Self.sequence(literals: 20).dropLast()), capacity: 40, valid: false)  // literals cut off
        Self.expect([0xF0, 255], capacity: 1000, valid: false)  // a length byte cut off
        Self.expect([], capacity: 10, valid: false)
    }

    /// A 64×8 `&8v0` frame whose Y (every row the same 16 random bytes four times) is one `lz4` entry; its block
    /// replaced by one of the same length whose match has offset 0 (liblz4 1.9.4 accepts it and copies the output
    /// onto itself): the decoder must refuse it, and take the same block with offset 4.
    @Test func anLZ4EntryWithOffsetZeroIsCorrupt() throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let (width, height) = (64, 8)
        var random = SplitMix(seed: 7)
        let pattern = (0..<16).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let luma = Array([[UInt8]](repeating: pattern, count: width / 16 * height).joined())
        let bytes = luma + [UInt8](repeating: 128, count: width * height / 2)
        func makeCompressed() throws -> PixelBuffer {
            let source = try makeBuffer(bytes, width: width, height: height, format: format)
            // Version 7: from version 8 the fast encoder stores this Y as a zstd frame, not an LZ4 block.
            var options = SurfaceCodec.Options()
            options.layoutVersion = 7
            let (compressed, _, output) = try roundTrip(source, options: options)
            #expect(try packed(output) == bytes)
            return compressed
        }
        let modes = try TileAboveTests.modes(try makeCompressed())
        try #require(modes.first == .lz4, "Y is \(modes)")
        let reference = try makeCompressed()
        try reference.lock([.readOnly])
        let length = reference.surface.withUnsafeBytes { Int($0.load(fromByteOffset: 64, as: UInt32.self)) }
        try reference.unlock([.readOnly])
        // 4 literals, a match, then `last` literals: 512 bytes of output; `last` chosen so that the block has the
        // entry's length.
        let raw = width * height
        func block(offset: Int, last: Int) -> [UInt8] {
            Self.sequence(literals: 4, offset: offset, matchLength: raw - 4 - last) + Self.sequence(literals: last)
        }
        let last = try #require((5...300).first { block(offset: 4, last: $0).count == length }, "\(length) bytes")
        #expect(Self.check(block(offset: 4, last: last), capacity: raw) == raw)
        #expect(Self.check(block(offset: 0, last: last), capacity: raw) < 0)
        for (offset, valid) in [(4, true), (0, false)] {
            let damaged = try makeCompressed()
            try DamagedSurfaceTests.damage(damaged, reseal: true) { surface in
                let start = DamagedSurfaceTests.payloadOffset(surface, entry: 0, entryCount: modes.count)
                for (i, byte) in block(offset: offset, last: last).enumerated() { surface[start + i] = byte }
            }
            let decoded = try PixelBuffer(width: width, height: height, pixelFormat: format)
            if valid {
                try SurfaceCodec.decompress(damaged, into: decoded, options: .init(verifiesChecksums: false))
                #expect(Array(try packed(decoded)[0..<4]) == Array(block(offset: 4, last: last)[1..<5]))
            } else {
                #expect {
                    try SurfaceCodec.decompress(damaged, into: decoded, options: .init(verifiesChecksums: false))
                } throws: { error in
                    (error as? CompressionError)?.code == .corruptPayload
                }
            }
        }
    }
}
