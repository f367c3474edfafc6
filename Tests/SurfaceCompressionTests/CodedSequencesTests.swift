import CSurfaceCodecKernels
import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// Layout version 7: LZ4 blocks stored as coded sequences (modes 34 and 38…44, docs/COMPRESSED-LAYOUT.md §6.7): five
/// streams (literals, tokens, offset low bytes, offset high bytes, length bytes), each Huffman-coded or stored.
/// Round trips compare every byte and count the entries that used the mode; hand-made blocks break each validity
/// rule once and must each give their error.
@Suite(.heavyWork, .timeLimit(.minutes(8))) struct CodedSequencesTests {
    static let formats: [PixelFormat] = [.yuv420BiPlanarVideoRange8, .yuv420BiPlanarVideoRange10, .bgra8]

    /// The screen image of CodedScreen (eleven 64-row bands) at version 7, with the version-6 surface beside it.
    static func screen(_ format: PixelFormat) throws -> (bytes: [UInt8], compressed: PixelBuffer, used: Int, v6: Int) {
        let bytes = screenBytes(format, width: CodedScreen.width, height: CodedScreen.height, seed: 31)
        let (_, compressed, statistics) = try ScreenContentTests.compress(
            bytes,
            format,
            width: CodedScreen.width,
            height: CodedScreen.height,
            layoutVersion: 7
        )
        let v6 = try CodedScreen(format)
        return (bytes, compressed, statistics.compressedByteCount, v6.statistics.compressedByteCount)
    }

    @Test(arguments: formats)
    func screenContentCodesSequencesAndDecodesExactly(_ format: PixelFormat) throws {
        let (bytes, compressed, used, v6Used) = try Self.screen(format)
        let modes = try SurfaceCodec.modeCounts(of: compressed)
        // The path under test ran: entries with coded sequences, and the surface states version 7.
        #expect(modes["codedSequences", default: 0] > 0, "\(modes)")
        #expect(try ScreenContentTests.statedVersion(compressed) == 7)
        // Kept only where smaller than the version-6 choice: the surface is smaller than version 6's.
        #expect(used < v6Used)
        for threads in [1, 2] {
            let output = try PixelBuffer(width: CodedScreen.width, height: CodedScreen.height, pixelFormat: format)
            try SurfaceCodec.decompress(compressed, into: output, options: .split(threads))
            #expect(try packed(output) == bytes, "threads \(threads)")
        }
        // Batches of tile rows: each one's Up chain is rebuilt from the sequence-coded blocks above it.
        let output = try PixelBuffer(width: CodedScreen.width, height: CodedScreen.height, pixelFormat: format)
        for start in stride(from: 0, to: 11, by: 3) {
            try TileAboveTests.decode(compressed, tiles: start..<min(start + 3, 11), into: output)
        }
        #expect(try packed(output) == bytes)
    }

    /// decodeTileRows on a version-7 surface, one and two tile rows at a time and on 2 threads: the rows handed over
    /// assemble into exactly the image.
    @Test(arguments: [1, 2])
    func decodeTileRowsDecodesVersion7Exactly(rowsAtOnce: Int) throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let (bytes, compressed, _, _) = try Self.screen(format)
        #expect(try SurfaceCodec.modeCounts(of: compressed)["codedSequences", default: 0] > 0)
        let width = CodedScreen.width
        let scratch = try PixelBuffer(width: width, height: 64 * rowsAtOnce, pixelFormat: format)
        var assembled = [[UInt8]](repeating: [], count: 2)
        try SurfaceCodec.decodeTileRows(of: compressed, into: scratch, options: .split(2)) { rows in
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
    }

    /// Photographs (noisy gradients) round trip exactly at version 7 in every format; their LZ4 tiles are rarely
    /// small enough to be tried, and whatever the encoder chose decodes to the same bytes.
    @Test(arguments: formats)
    func photoLikeContentRoundTripsExactly(_ format: PixelFormat) throws {
        let bytes = syntheticBytes(format, width: 320, height: 192, seed: 77, noise: 24)
        let source = try makeBuffer(bytes, width: 320, height: 192, format: format)
        for threads in [1, 2] {
            var options = SurfaceCodec.Options.split(threads)
            options.layoutVersion = 7
            let (_, _, output) = try roundTrip(source, options: options, decodeOptions: .split(threads))
            #expect(try packed(output) == bytes)
        }
    }

    /// liblz4's blocks of varied inputs code as sequences and rebuild to the same bytes; the one-pass decoder gives
    /// exactly liblz4's output.
    @Test func lz4BlocksRebuildAndDecodeExactly() throws {
        var random = SplitMix(seed: 9)
        var codedCount = 0
        for round in 0..<60 {
            let count = 64 + Int(random.next() % 20000)
            var input = [UInt8](repeating: 0, count: count)
            for i in 0..<count {
                switch round % 4 {
                case 0: input[i] = UInt8(truncatingIfNeeded: i / 7 % 9)
                case 1: input[i] = UInt8(truncatingIfNeeded: 97 + random.next() % 20)
                case 2: input[i] = UInt8(truncatingIfNeeded: random.next() % 4 == 0 ? random.next() : UInt64(i / 3))
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
            var streams = [UInt8](repeating: 0, count: blockCount)
            let codedBytes = block.withUnsafeBytes { b in
                coded.withUnsafeMutableBytes { c in
                    streams.withUnsafeMutableBytes { s in
                        LZ4Block.codeSequences(
                            b.baseAddress!,
                            count: blockCount,
                            into: c.baseAddress!,
                            capacity: c.count,
                            scratch: s.baseAddress!
                        )
                    }
                }
            }
            try #require(codedBytes > 0)
            codedCount += 1
            let payload = Array(coded[0..<codedBytes])
            let (result, rebuilt) = Self.decode(payload, capacity: blockCount)
            #expect(result == blockCount)
            // Whether any byte differs, not the arrays: a failure message stays short.
            #expect(zip(rebuilt, block).contains { $0.0 != $0.1 } == false, "round \(round)")
            let (decoded, output) = Self.decompress(payload, blockCapacity: blockCount, capacity: count)
            #expect(decoded == count)
            #expect(output.count == count && !zip(output, input).contains { $0.0 != $0.1 }, "round \(round)")
        }
        #expect(codedCount == 60)
    }

    // MARK: Hand-made sequence-coded blocks

    /// Rebuilds `payload`'s LZ4 block into an array of exactly `capacity` bytes (csck_seq_lz4_decode).
    static func decode(_ payload: [UInt8], capacity: Int) -> (Int, [UInt8]) {
        var out = [UInt8](repeating: 0, count: capacity)
        var scratch = [UInt8](repeating: 0, count: capacity)
        let result = payload.withUnsafeBytes { p in
            out.withUnsafeMutableBytes { o in
                scratch.withUnsafeMutableBytes { s in
                    csck_seq_lz4_decode(
                        p.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        p.count,
                        o.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        o.count,
                        s.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        s.count
                    )
                }
            }
        }
        return (result, Array(out[0..<max(0, min(result, capacity))]))
    }

    /// Decodes `payload` in one pass (csck_seq_lz4_decompress) into exactly `capacity` bytes, no dictionary.
    static func decompress(_ payload: [UInt8], blockCapacity: Int, capacity: Int) -> (Int, [UInt8]) {
        var out = [UInt8](repeating: 0, count: capacity)
        var scratch = [UInt8](repeating: 0, count: blockCapacity)
        let result = payload.withUnsafeBytes { p in
            out.withUnsafeMutableBytes { o in
                scratch.withUnsafeMutableBytes { s in
                    csck_seq_lz4_decompress(
                        p.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        p.count,
                        blockCapacity,
                        o.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        0,
                        o.count,
                        s.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        s.count
                    )
                }
            }
        }
        return (result, Array(out[0..<max(0, min(result, capacity))]))
    }

    /// One stream: stored (kind 0) or Huffman-coded (kind 1: symbols with codes, their nibbles, the bit stream).
    enum Stream {
        case stored([UInt8])
        case huffman(symbols: [UInt8], nibbles: [UInt8], bits: [UInt8])

        var bytes: [UInt8] {
            switch self {
            case .stored(let bytes): return bytes
            case .huffman(let symbols, let nibbles, let bits):
                var bitmap = [UInt8](repeating: 0, count: 32)
                for s in symbols { bitmap[Int(s) / 8] |= 1 << (s % 8) }
                return bitmap + nibbles + bits
            }
        }
        var kind: UInt8 {
            if case .stored = self { return 0 }
            return 1
        }
    }

    static func le32(_ v: UInt32) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)] }

    /// A sequence-coded block: L, Q, E, the five stored sizes (or `sizes`), the five kinds (or `kinds`), the streams.
    static func block(
        literals: UInt32,
        sequences: UInt32,
        lengthBytes: UInt32,
        _ streams: [Stream],
        sizes: [UInt32]? = nil,
        kinds: [UInt8]? = nil
    ) -> [UInt8] {
        var payload = le32(literals) + le32(sequences) + le32(lengthBytes)
        for (i, s) in streams.enumerated() { payload += le32(sizes?[i] ?? UInt32(s.bytes.count)) }
        payload += kinds ?? streams.map(\.kind)
        for s in streams { payload += s.bytes }
        return payload
    }

    /// "abc" Huffman-coded with a = 0, b = 10, c = 11 (lengths 1, 2, 2): bits 0 | 01 | 11 from bit 0 = 0b11010.
    static let abcLiterals = Stream.huffman(symbols: [0x61, 0x62, 0x63], nibbles: [0x21, 0x02], bits: [0x1A])

    /// Two sequences: token 0x3F (3 literals, a match of 15 + 4 + 2 bytes), offset 3, match length byte 2; then the
    /// last, token 0x50 with 5 literals. B = 3F 61 62 63 03 00 02 50 61 62 63 61 62: "abc" repeated to 24 bytes, then
    /// "abcab". The tokens are Huffman-coded (0x3F → 0, 0x50 → 1), the rest stored.
    static func sample(
        literals: Stream = .stored(Array("abcabcab".utf8)),
        tokens: Stream = .huffman(symbols: [0x3F, 0x50], nibbles: [0x11], bits: [0x02]),
        low: Stream = .stored([0x03]),
        high: Stream = .stored([0x00]),
        lengths: Stream = .stored([0x02]),
        literalCount: UInt32 = 8,
        sequenceCount: UInt32 = 2,
        lengthCount: UInt32 = 1,
        sizes: [UInt32]? = nil,
        kinds: [UInt8]? = nil
    ) -> [UInt8] {
        block(
            literals: literalCount,
            sequences: sequenceCount,
            lengthBytes: lengthCount,
            [literals, tokens, low, high, lengths],
            sizes: sizes,
            kinds: kinds
        )
    }
    static let sampleBlock: [UInt8] = [0x3F, 0x61, 0x62, 0x63, 0x03, 0x00, 0x02, 0x50, 0x61, 0x62, 0x63, 0x61, 0x62]
    static let sampleOutput: [UInt8] = Array(String(repeating: "abc", count: 8).utf8) + Array("abcab".utf8)

    @Test func aHandMadeBlockRebuildsAndDecodesExactly() {
        let (result, rebuilt) = Self.decode(Self.sample(), capacity: 13)
        #expect(result == 13)
        #expect(rebuilt == Self.sampleBlock)
        // The same block decoded by liblz4 and by the one-pass decoder.
        var output = [UInt8](repeating: 0, count: 29)
        let lz4 = Self.sampleBlock.withUnsafeBytes { b in
            output.withUnsafeMutableBytes { o in LZ4Block.decompress(b.baseAddress!, count: 13, into: o.baseAddress!, capacity: 29) }
        }
        #expect(lz4 == 29)
        #expect(output == Self.sampleOutput)
        let (count, decoded) = Self.decompress(Self.sample(), blockCapacity: 13, capacity: 29)
        #expect(count == 29)
        #expect(decoded == Self.sampleOutput)
        // Literals Huffman-coded too: "abc" alone in a one-sequence block (token 0x30, no offsets, no lengths).
        let abc = Self.block(
            literals: 3,
            sequences: 1,
            lengthBytes: 0,
            [Self.abcLiterals, .stored([0x30]), .stored([]), .stored([]), .stored([])]
        )
        #expect(Self.decode(abc, capacity: 4) == (4, [0x30, 0x61, 0x62, 0x63]))
    }

    @Test func sizesThatDoNotAddUpAreRefused() {
        let bad = Int(CSCK_HUFF_BAD_SIZE)
        #expect(Self.decode(Array(Self.sample()[0..<36]), capacity: 64).0 == bad)  // shorter than the fixed header
        #expect(Self.decode(Self.sample(sequenceCount: 0), capacity: 64).0 == bad)  // no sequence
        // Stream sizes that do not add up to the payload: one byte short, one byte over, a size near 2^32.
        #expect(Self.decode(Array(Self.sample().dropLast()), capacity: 64).0 == bad)
        #expect(Self.decode(Self.sample() + [0], capacity: 64).0 == bad)
        #expect(Self.decode(Self.sample(sizes: [8, 35, 1, 1, 0xFFFF_FFFF]), capacity: 64).0 == bad)
        // A stored stream whose size is not its symbol count (the sizes still add up).
        #expect(Self.decode(Self.sample(lengths: .stored([0x02, 0x00])), capacity: 64).0 == bad)
        // S + L above the component's raw bytes; counts near 2^32.
        #expect(Self.decode(Self.sample(), capacity: 12).0 == bad)
        #expect(Self.decode(Self.sample(literalCount: 0xFFFF_FFFF), capacity: 64).0 == bad)
        #expect(Self.decode(Self.sample(sequenceCount: 0xFFFF_FFFF), capacity: 64).0 == bad)
        #expect(Self.decode(Self.sample(lengthCount: 0xFFFF_FFFF), capacity: 64).0 == bad)
    }

    @Test func invalidKindsAndCodeLengthsAreRefused() {
        let bad = Int(CSCK_HUFF_BAD_TABLE)
        #expect(Self.decode(Self.sample(kinds: [0, 2, 0, 0, 0]), capacity: 64).0 == bad)  // kind 2
        let tokens: (UInt8) -> Stream = { .huffman(symbols: [0x3F, 0x50], nibbles: [$0], bits: [0x02]) }
        #expect(Self.decode(Self.sample(tokens: tokens(0x1C)), capacity: 64).0 == bad)  // a length of 12
        #expect(Self.decode(Self.sample(tokens: tokens(0x10)), capacity: 64).0 == bad)  // a listed symbol of length 0
        // Three one-bit codes (over-subscribed); an odd count with its unused nibble set.
        let three = Stream.huffman(symbols: [0x3F, 0x50, 0x51], nibbles: [0x11, 0x01], bits: [0x02])
        #expect(Self.decode(Self.sample(tokens: three), capacity: 64).0 == bad)
        let odd = Stream.huffman(symbols: [0x61, 0x62, 0x63], nibbles: [0x21, 0x12], bits: [0x1A])
        let abc = Self.block(literals: 3, sequences: 1, lengthBytes: 0, [odd, .stored([0x30]), .stored([]), .stored([]), .stored([])])
        #expect(Self.decode(abc, capacity: 64).0 == bad)
        // A Huffman stream cut inside its description.
        let cut = Self.sample(tokens: .huffman(symbols: [0x3F, 0x50], nibbles: [], bits: []))
        #expect(Self.decode(cut, capacity: 64).0 == Int(CSCK_HUFF_BAD_SIZE))
    }

    @Test func invalidBitStreamsAreRefused() {
        let bad = Int(CSCK_HUFF_BAD_CODE)
        let tokens: ([UInt8]) -> Stream = { .huffman(symbols: [0x3F, 0x50], nibbles: [0x11], bits: $0) }
        #expect(Self.decode(Self.sample(tokens: tokens([0x02 | 0x80])), capacity: 64).0 == bad)  // a padding bit set
        #expect(Self.decode(Self.sample(tokens: tokens([0x02, 0x00])), capacity: 64).0 == bad)  // trailing byte
        #expect(Self.decode(Self.sample(tokens: tokens([])), capacity: 64).0 == bad)  // ends early
        // Lengths 1 and 2 only (0, 10): the pattern 11 starts no code.
        let incomplete = Stream.huffman(symbols: [0x3F, 0x50], nibbles: [0x21], bits: [0x03])
        #expect(Self.decode(Self.sample(tokens: incomplete), capacity: 64).0 == bad)
        // The offset high bytes as a Huffman stream of one symbol: its one code then a stray set bit.
        let high = Stream.huffman(symbols: [0x00], nibbles: [0x01], bits: [0x02])
        #expect(Self.decode(Self.sample(high: high), capacity: 64).0 == bad)
        #expect(Self.decode(Self.sample(high: .huffman(symbols: [0x00], nibbles: [0x01], bits: [0x00])), capacity: 64).0 == 13)
    }

    @Test func sequencesThatDoNotUseExactlyTheStreamsAreRefused() {
        let bad = Int(CSCK_HUFF_BAD_SEQUENCES)
        // The last sequence asks for 6 of the 5 literals left; or leaves one over.
        let tokens: (UInt8) -> Stream = { .huffman(symbols: [0x3F, $0], nibbles: [0x11], bits: [0x02]) }
        #expect(Self.decode(Self.sample(tokens: tokens(0x60)), capacity: 64).0 == bad)
        #expect(Self.decode(Self.sample(tokens: tokens(0x40)), capacity: 64).0 == bad)
        // A match length byte of 255 needs another: the length stream runs out.
        #expect(Self.decode(Self.sample(lengths: .stored([0xFF])), capacity: 64).0 == bad)
        // A length byte no sequence uses (E = 2, the second never read).
        #expect(Self.decode(Self.sample(lengths: .stored([0x02, 0x05]), lengthCount: 2), capacity: 64).0 == bad)
        // No length byte where the first token needs one (E = 0).
        #expect(Self.decode(Self.sample(lengths: .stored([]), lengthCount: 0), capacity: 64).0 == bad)
        // Literal length bytes: token 0xF0 with 15 + 0 literals, but only 8 literals exist.
        let manyLiterals = Stream.huffman(symbols: [0x3F, 0xF0], nibbles: [0x11], bits: [0x02])
        #expect(Self.decode(Self.sample(tokens: manyLiterals, lengths: .stored([0x02, 0x00]), lengthCount: 2), capacity: 64).0 == bad)
    }

    /// Offset 0 and an offset reaching before the output: the one-pass decoder leaves them to liblz4 (undecided), and
    /// liblz4 refuses the rebuilt block with the offset before the output (its verdict on offset 0 stands, whatever it
    /// is: §6.6).
    @Test func offsetsLiblz4RefusesAreLeftToIt() {
        for offset: UInt8 in [0, 9] {
            let payload = Self.sample(low: .stored([offset]))
            let (result, _) = Self.decompress(payload, blockCapacity: 13, capacity: 29)
            #expect(result == Int(CSCK_HUFF_UNDECIDED), "offset \(offset)")
            let (count, rebuilt) = Self.decode(payload, capacity: 13)
            #expect(count == 13)
            var output = [UInt8](repeating: 0, count: 29)
            let lz4 = rebuilt.withUnsafeBytes { b in
                output.withUnsafeMutableBytes { o in LZ4Block.decompress(b.baseAddress!, count: 13, into: o.baseAddress!, capacity: 29) }
            }
            if offset == 9 { #expect(lz4 < 0) }
        }
    }

    // MARK: In a surface

    static func sequenceSurface() throws -> PixelBuffer {
        let bytes = screenBytes(.yuv420BiPlanarVideoRange8, width: 640, height: 128, seed: 32)
        let (_, compressed, _) = try ScreenContentTests.compress(
            bytes,
            .yuv420BiPlanarVideoRange8,
            width: 640,
            height: 128,
            layoutVersion: 7
        )
        #expect(try SurfaceCodec.modeCounts(of: compressed)["codedSequences", default: 0] > 0)
        return compressed
    }

    /// The first entry whose mode byte has coded sequences, and the table's entry count.
    static func firstSequenceEntry(_ bytes: UnsafeMutableRawBufferPointer) -> (index: Int, entries: Int)? {
        let count = Int(bytes.load(fromByteOffset: 28, as: UInt32.self))
        guard let index = (0..<count).first(where: { bytes[DamagedSurfaceTests.modeOffset($0)] >= 32 }) else {
            return nil
        }
        return (index, count)
    }

    @Test func sequenceModesAreRefusedWhereTheyDoNotExist() throws {
        // In a surface that states version 6 (the version rule).
        var compressed = try Self.sequenceSurface()
        try DamagedSurfaceTests.damage(compressed, reseal: true) { bytes in
            bytes.storeBytes(of: UInt16(6), toByteOffset: 4, as: UInt16.self)
        }
        try DamagedSurfaceTests.expectDecode(compressed, fails: .invalidTileMode)
        // On base modes whose payload is not an LZ4 block (raw, solid, packed8 + 32), past the last (12 + 32 + 1).
        for mode: UInt8 in [32, 33, 35, 45, 48] {
            compressed = try Self.sequenceSurface()
            try DamagedSurfaceTests.damage(compressed, reseal: true) { bytes in
                if let (index, _) = Self.firstSequenceEntry(bytes) { bytes[DamagedSurfaceTests.modeOffset(index)] = mode }
            }
            try DamagedSurfaceTests.expectDecode(compressed, fails: .invalidTileMode)
        }
    }

    @Test func aDamagedSequenceCodedBlockIsACorruptPayload() throws {
        // Each edit breaks one rule of §6.7 in the first sequence-coded entry; checksums are off, so the structure is
        // what refuses it.
        let edits: [(String, (UnsafeMutableRawBufferPointer, Int) -> Void)] = [
            ("literal count", { $0.storeBytes(of: UInt32(0xFFFF_FFF0), toByteOffset: $1, as: UInt32.self) }),
            ("sequence count", { $0.storeBytes(of: UInt32(0), toByteOffset: $1 + 4, as: UInt32.self) }),
            ("length count", { $0.storeBytes(of: UInt32(0x7FFF_FFFF), toByteOffset: $1 + 8, as: UInt32.self) }),
            ("stream size", { $0[$1 + 12] &+= 1 }),
            ("kind", { $0[$1 + 33] = 7 }),
        ]
        for (_, edit) in edits {
            let compressed = try Self.sequenceSurface()
            try DamagedSurfaceTests.damage(compressed) { bytes in
                guard let (index, entries) = Self.firstSequenceEntry(bytes) else { return }
                edit(bytes, DamagedSurfaceTests.payloadOffset(bytes, entry: index, entryCount: entries))
            }
            try DamagedSurfaceTests.expectDecode(compressed, fails: .corruptPayload, verifiesChecksums: false)
        }
    }
}
