import CSurfaceCodecKernels
import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// Layout version 6: LZ4 blocks stored with their literals Huffman-coded (modes 18 and 22…28,
/// docs/COMPRESSED-LAYOUT.md §6.6). Round trips compare every byte; hand-made coded blocks break each validity rule
/// and must each give their typed error.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct CodedLiteralsTests {
    static let formats: [PixelFormat] = [
        .yuv420BiPlanarVideoRange8, .yuv420BiPlanarFullRange8, .yuv420BiPlanarVideoRange10, .bgra8,
    ]

    @Test(arguments: formats)
    func screenContentCodesLiteralsAndDecodesExactly(_ format: PixelFormat) throws {
        let width = CodedScreen.width
        let height = CodedScreen.height
        let screen = try CodedScreen(format)
        let (bytes, compressed, coded) = (screen.bytes, screen.compressed, screen.statistics)
        let (_, plain, _) = try ScreenContentTests.compress(bytes, format, width: width, height: height)
        // Only kept where smaller, and the rest of the choice is version 5's: never larger than version 5.
        let plainUsed = try SurfaceCodec.bytesUsed(of: plain)
        #expect(coded.compressedByteCount < plainUsed)
        for threads in [1, 2] {
            let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
            try SurfaceCodec.decompress(compressed, into: output, options: .split(threads))
            #expect(try packed(output) == bytes)
        }
        // Tile rows decoded in batches: each batch's Up chain is rebuilt from coded blocks above it.
        let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
        for start in stride(from: 0, to: 11, by: 3) {
            try TileAboveTests.decode(compressed, tiles: start..<min(start + 3, 11), into: output)
        }
        #expect(try packed(output) == bytes)
    }

    /// liblz4's blocks of varied inputs (runs, text-like bytes, noise, a single repeated byte) code and rebuild to
    /// the same bytes, or are refused by the encoder when coding would not make them smaller.
    @Test func lz4BlocksRebuildExactly() throws {
        var random = SplitMix(seed: 5)
        var codedCount = 0
        for round in 0..<60 {
            let count = 1 + Int(random.next() % 20000)
            var input = [UInt8](repeating: 0, count: count)
            for i in 0..<count {
                switch round % 4 {
                case 0: input[i] = UInt8(truncatingIfNeeded: i / 7 % 9)
                case 1: input[i] = UInt8(truncatingIfNeeded: 97 + random.next() % 20)
                case 2: input[i] = UInt8(truncatingIfNeeded: random.next())
                default: input[i] = 42
                }
            }
            var block = [UInt8](repeating: 0, count: count + count / 255 + 16)
            let blockCount = input.withUnsafeBytes { i in
                block.withUnsafeMutableBytes { b in
                    LZ4Block.compress(i.baseAddress!, count: count, into: b.baseAddress!, capacity: b.count)
                }
            }
            try #require(blockCount > 0)
            var coded = [UInt8](repeating: 0, count: blockCount + 400)
            let codedCount_ = block.withUnsafeBytes { b in
                coded.withUnsafeMutableBytes { c in
                    LZ4Block.codeLiterals(b.baseAddress!, count: blockCount, into: c.baseAddress!, capacity: c.count)
                }
            }
            if codedCount_ == 0 { continue }
            codedCount += 1
            let (result, rebuilt) = Self.decode(Array(coded[0..<codedCount_]), capacity: blockCount)
            #expect(result == blockCount)
            #expect(rebuilt == Array(block[0..<blockCount]))
        }
        #expect(codedCount > 40)
    }

    // MARK: Hand-made coded blocks

    /// Decodes `payload` with `capacity` bytes for the rebuilt block (an array of exactly that size, so a write
    /// past it would be caught by the address sanitizer in Fuzz/run.sh's build, and shows as a crash here).
    static func decode(_ payload: [UInt8], capacity: Int) -> (Int, [UInt8]) {
        var out = [UInt8](repeating: 0, count: capacity)
        let result = payload.withUnsafeBytes { p in
            out.withUnsafeMutableBytes { o in
                csck_huff_lz4_decode(
                    p.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    p.count,
                    o.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    o.count
                )
            }
        }
        return (result, Array(out[0..<max(0, min(result, capacity))]))
    }

    /// A coded block: `L`, `S`, the bitmap of `symbols`, their length nibbles, the bit stream, the sequences.
    static func block(
        literals: UInt32,
        sequenceCount: UInt32? = nil,
        symbols: [UInt8],
        nibbles: [UInt8],
        bits: [UInt8],
        sequences: [UInt8]
    ) -> [UInt8] {
        var payload: [UInt8] = []
        for v in [literals, sequenceCount ?? UInt32(sequences.count)] {
            payload += [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)]
        }
        var bitmap = [UInt8](repeating: 0, count: 32)
        for s in symbols { bitmap[Int(s) / 8] |= 1 << (s % 8) }
        return payload + bitmap + nibbles + bits + sequences
    }

    /// "abc" with a = 0, b = 10, c = 11 (lengths 1, 2, 2): bits 0 | 01 | 11 from bit 0 = 0b11010; one sequence of
    /// three literals (token 0x30), so the block is 30 61 62 63.
    static func abc(
        nibbles: [UInt8] = [0x21, 0x02],
        bits: [UInt8] = [0x1A],
        sequences: [UInt8] = [0x30],
        literals: UInt32 = 3,
        sequenceCount: UInt32? = nil
    ) -> [UInt8] {
        block(
            literals: literals,
            sequenceCount: sequenceCount,
            symbols: [0x61, 0x62, 0x63],
            nibbles: nibbles,
            bits: bits,
            sequences: sequences
        )
    }

    @Test func aHandMadeBlockRebuildsExactly() {
        let (result, rebuilt) = Self.decode(Self.abc(), capacity: 4)
        #expect(result == 4)
        #expect(rebuilt == [0x30, 0x61, 0x62, 0x63])
        // A match after the literals: token 0x34 (3 literals, match length 4 + 4), offset 1 (little-endian), then a
        // last sequence of no literals. The rebuilt block interleaves them again.
        let withMatch = Self.abc(sequences: [0x34, 0x01, 0x00, 0x00])
        let (matchResult, matchRebuilt) = Self.decode(withMatch, capacity: 7)
        #expect(matchResult == 7)
        #expect(matchRebuilt == [0x34, 0x61, 0x62, 0x63, 0x01, 0x00, 0x00])
    }

    @Test func sizesThatDoNotAddUpAreRefused() {
        let bad = Int(CSCK_HUFF_BAD_SIZE)
        #expect(Self.decode(Array(Self.abc()[0..<39]), capacity: 64).0 == bad)  // shorter than the fixed header
        #expect(Self.decode(Array(Self.abc()[0..<41]), capacity: 64).0 == bad)  // the length nibbles cut off
        #expect(Self.decode(Self.abc(sequenceCount: 0), capacity: 64).0 == bad)  // no sequence stream
        #expect(Self.decode(Self.abc(sequenceCount: 3), capacity: 64).0 == bad)  // more than the payload holds
        #expect(Self.decode(Self.abc(sequenceCount: 0xFFFF_FFFF), capacity: 64).0 == bad)
        #expect(Self.decode(Self.abc(), capacity: 3).0 == bad)  // S + L above the component's raw bytes
        #expect(Self.decode(Self.abc(literals: 0xFFFF_FFFF), capacity: 64).0 == bad)
    }

    @Test func invalidCodeLengthsAreRefused() {
        let bad = Int(CSCK_HUFF_BAD_TABLE)
        #expect(Self.decode(Self.abc(nibbles: [0x2C, 0x02]), capacity: 64).0 == bad)  // a length of 12
        #expect(Self.decode(Self.abc(nibbles: [0x20, 0x02]), capacity: 64).0 == bad)  // a listed symbol of length 0
        #expect(Self.decode(Self.abc(nibbles: [0x21, 0x12]), capacity: 64).0 == bad)  // the unused nibble not zero
        #expect(Self.decode(Self.abc(nibbles: [0x11, 0x01]), capacity: 64).0 == bad)  // three codes of one bit
    }

    @Test func invalidBitStreamsAreRefused() {
        let bad = Int(CSCK_HUFF_BAD_CODE)
        // Lengths 1, 2, 3: codes 0, 10, 110; 111 is no code's start.
        #expect(Self.decode(Self.abc(nibbles: [0x21, 0x03], bits: [0x07]), capacity: 64).0 == bad)
        #expect(Self.decode(Self.abc(bits: [0x1A | 0x80]), capacity: 64).0 == bad)  // a padding bit set
        #expect(Self.decode(Self.abc(bits: [0x1A, 0x00]), capacity: 64).0 == bad)  // a byte too many
        #expect(Self.decode(Self.abc(bits: []), capacity: 64).0 == bad)  // the codes run past the stream
        // No literals, no code: valid only with an empty stream.
        let empty = Self.block(literals: 0, symbols: [], nibbles: [], bits: [0x00], sequences: [0x00])
        #expect(Self.decode(empty, capacity: 64).0 == bad)
        let emptyValid = Self.block(literals: 0, symbols: [], nibbles: [], bits: [], sequences: [0x00])
        #expect(Self.decode(emptyValid, capacity: 64).0 == 1)
    }

    @Test func sequenceStreamsThatDoNotUseExactlyTheLiteralsAreRefused() {
        let bad = Int(CSCK_HUFF_BAD_SEQUENCES)
        #expect(Self.decode(Self.abc(sequences: [0x40]), capacity: 64).0 == bad)  // asks for 4 of 3 literals
        #expect(Self.decode(Self.abc(sequences: [0x20]), capacity: 64).0 == bad)  // leaves one literal over
        #expect(Self.decode(Self.abc(sequences: [0x30, 0x01]), capacity: 64).0 == bad)  // an offset cut off
        #expect(Self.decode(Self.abc(sequences: [0x3F, 0x01, 0x00]), capacity: 64).0 == bad)  // match length cut off
        #expect(Self.decode(Self.abc(sequences: [0x3F, 0x01, 0x00, 0xFF]), capacity: 64).0 == bad)
        #expect(Self.decode(Self.abc(sequences: [0xF0]), capacity: 64).0 == bad)  // literal length bytes cut off
        #expect(Self.decode(Self.abc(sequences: [0xF0, 0xFF, 0xFF]), capacity: 64).0 == bad)
    }

    // MARK: In a surface

    static func codedSurface(_ format: PixelFormat = .yuv420BiPlanarVideoRange8) throws -> PixelBuffer {
        let bytes = screenBytes(format, width: 640, height: 128, seed: 32)
        let (_, compressed, _) = try ScreenContentTests.compress(bytes, format, width: 640, height: 128, layoutVersion: 6)
        #expect(try SurfaceCodec.modeCounts(of: compressed)["codedLiterals", default: 0] > 0)
        return compressed
    }

    /// The first entry whose mode byte has coded literals, and the table's entry count.
    static func firstCodedEntry(_ bytes: UnsafeMutableRawBufferPointer) -> (index: Int, entries: Int)? {
        let count = Int(bytes.load(fromByteOffset: 28, as: UInt32.self))
        guard let index = (0..<count).first(where: { bytes[DamagedSurfaceTests.modeOffset($0)] >= 16 }) else {
            return nil
        }
        return (index, count)
    }

    @Test func codedModesAreRefusedWhereTheyDoNotExist() throws {
        // In a surface that states version 5.
        var compressed = try Self.codedSurface()
        try DamagedSurfaceTests.damage(compressed, reseal: true) { bytes in
            bytes.storeBytes(of: UInt16(5), toByteOffset: 4, as: UInt16.self)
        }
        try DamagedSurfaceTests.expectDecode(compressed, fails: .invalidTileMode)
        // On a base mode whose payload is not an LZ4 block (packed8 + 16), and past the last mode (12 + 16 + 1).
        for mode: UInt8 in [16, 17, 19, 21, 29, 0xFF] {
            compressed = try Self.codedSurface()
            try DamagedSurfaceTests.damage(compressed, reseal: true) { bytes in
                if let (index, _) = Self.firstCodedEntry(bytes) { bytes[DamagedSurfaceTests.modeOffset(index)] = mode }
            }
            try DamagedSurfaceTests.expectDecode(compressed, fails: .invalidTileMode)
        }
    }

    @Test func aDamagedCodedBlockIsACorruptPayload() throws {
        // Each edit breaks one rule of §6.6 in the first coded entry; checksums are off, so the structure is what
        // refuses it.
        let edits: [(String, (UnsafeMutableRawBufferPointer, Int) -> Void)] = [
            ("literal count", { $0.storeBytes(of: UInt32(0xFFFF_FFF0), toByteOffset: $1, as: UInt32.self) }),
            ("sequence count", { $0.storeBytes(of: UInt32(0), toByteOffset: $1 + 4, as: UInt32.self) }),
            ("bitmap", { $0[$1 + 8] ^= 0xFF }),
        ]
        for (name, edit) in edits {
            let compressed = try Self.codedSurface()
            try DamagedSurfaceTests.damage(compressed) { bytes in
                guard let (index, entries) = Self.firstCodedEntry(bytes) else { return }
                edit(bytes, DamagedSurfaceTests.payloadOffset(bytes, entry: index, entryCount: entries))
            }
            let output = try PixelBuffer(width: 640, height: 128, pixelFormat: .yuv420BiPlanarVideoRange8)
            #expect(throws: CompressionError.self, "\(name)") {
                try SurfaceCodec.decompress(compressed, into: output, options: .init(verifiesChecksums: false))
            }
            do {
                try SurfaceCodec.decompress(compressed, into: output, options: .init(verifiesChecksums: false))
            } catch {
                #expect(error.code == .corruptPayload, "\(name)")
            }
        }
    }
}
