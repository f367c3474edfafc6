import CSurfaceCodecKernels
import TestSupport
import Testing

@testable import SurfaceCompression

/// The one-pass decoder of coded blocks (csck_huff_lz4_decompress, docs/COMPRESSED-LAYOUT.md §6.6) against the
/// definition: rebuild the LZ4 block B (csck_huff_lz4_decode) and give it to liblz4, with the same dictionary right
/// before the output. Every comparison is of every byte; buffers are exactly as large as the bounds given, so a
/// read or write past them shows in Fuzz/run.sh's address-sanitized build.
@Suite(.heavyWork, .timeLimit(.minutes(10))) struct CodedBlockOnePassTests {
    /// What one decoding gave: the decoded size (negative: refused) and the output's first `max(0, size)` bytes.
    struct Outcome: Equatable {
        var size: Int
        var bytes: [UInt8]
        var refused: Bool { size < 0 }
    }

    /// Decodes `payload` by the definition: B rebuilt into `blockCapacity` bytes, then liblz4 into `capacity` bytes
    /// after `dictionary`.
    static func reference(_ payload: [UInt8], dictionary: [UInt8], capacity: Int, blockCapacity: Int) -> Outcome {
        var block = [UInt8](repeating: 0, count: blockCapacity)
        let blockCount = payload.withUnsafeBytes { p in
            block.withUnsafeMutableBytes { b in
                LZ4Block.decodeLiterals(p.baseAddress!, count: p.count, into: b.baseAddress!, capacity: b.count)
            }
        }
        guard blockCount > 0 else { return Outcome(size: -1, bytes: []) }
        return Self.lz4(Array(block[0..<blockCount]), dictionary: dictionary, capacity: capacity)
    }

    /// liblz4 on `block`, `dictionary` right before the output (its prefix path, as the decoder arranges it).
    static func lz4(_ block: [UInt8], dictionary: [UInt8], capacity: Int) -> Outcome {
        var area = dictionary + [UInt8](repeating: 0, count: capacity)
        let size = block.withUnsafeBytes { b in
            area.withUnsafeMutableBytes { a in
                let output = a.baseAddress! + dictionary.count
                guard !dictionary.isEmpty else {
                    return LZ4Block.decompress(b.baseAddress!, count: b.count, into: output, capacity: capacity)
                }
                return LZ4Block.decompress(
                    b.baseAddress!,
                    count: b.count,
                    dictionary: UnsafeRawPointer(a.baseAddress!),
                    dictionaryCount: dictionary.count,
                    into: output,
                    capacity: capacity
                )
            }
        }
        // liblz4's negative answers vary with where it stopped: all are one refusal here.
        return Outcome(
            size: max(size, -1),
            bytes: size >= 0 ? Array(area[dictionary.count..<dictionary.count + size]) : []
        )
    }

    /// Decodes `payload` in one pass as TileCodec does, falling back to the definition where the one-pass decoder
    /// answers CSCK_HUFF_UNDECIDED. Also returns whether it did.
    static func onePass(
        _ payload: [UInt8],
        dictionary: [UInt8],
        capacity: Int,
        blockCapacity: Int
    ) -> (Outcome, undecided: Bool) {
        var area = dictionary + [UInt8](repeating: 0, count: capacity)
        var scratch = [UInt8](repeating: 0, count: blockCapacity)
        let size = payload.withUnsafeBytes { p in
            area.withUnsafeMutableBytes { a in
                scratch.withUnsafeMutableBytes { s in
                    LZ4Block.decompressCoded(
                        p.baseAddress!,
                        count: p.count,
                        blockCapacity: blockCapacity,
                        dictionaryCount: dictionary.count,
                        into: a.baseAddress! + dictionary.count,
                        capacity: capacity,
                        scratch: s.baseAddress!,
                        scratchCapacity: s.count
                    )
                }
            }
        }
        if size == LZ4Block.undecided {
            return (
                Self.reference(payload, dictionary: dictionary, capacity: capacity, blockCapacity: blockCapacity), true
            )
        }
        let bytes = size >= 0 ? Array(area[dictionary.count..<dictionary.count + size]) : []
        return (Outcome(size: size < 0 ? -1 : size, bytes: bytes), false)
    }

    /// Inputs of screen-like kinds (runs, periods of 2 to 7 bytes, text-like bytes, noise, one repeated byte), each
    /// compressed by liblz4 (fast, or HC with a dictionary its matches reach into) and coded.
    static func codedBlocks(rounds: Int, seed: UInt64) -> [(payload: [UInt8], dictionary: [UInt8], size: Int)] {
        var random = SplitMix(seed: seed)
        var state = [UInt8](repeating: 0, count: LZ4Block.highCompressionStateByteCount)
        var blocks: [(payload: [UInt8], dictionary: [UInt8], size: Int)] = []
        for round in 0..<rounds {
            let count = 1 + Int(random.next() % 30000)
            let period = 2 + Int(random.next() % 6)
            var input = [UInt8](repeating: 0, count: count)
            for i in 0..<count {
                switch round % 5 {
                case 0: input[i] = UInt8(truncatingIfNeeded: i / 7 % 9)
                case 1: input[i] = UInt8(truncatingIfNeeded: 97 + random.next() % 20)
                case 2:
                    input[i] =
                        i % 97 < 60
                        ? UInt8(truncatingIfNeeded: i % period * 37) : UInt8(truncatingIfNeeded: random.next())
                case 3: input[i] = random.next() % 8 == 0 ? UInt8(truncatingIfNeeded: random.next()) : 42
                default: input[i] = UInt8(truncatingIfNeeded: random.next() % 3)
                }
            }
            // Every other input with a dictionary: the input's own bytes a little changed, as the band above is.
            let dictionary: [UInt8] =
                round % 2 == 0 ? [] : input.prefix(65536).map { random.next() % 16 == 0 ? $0 &+ 1 : $0 }
            var block = [UInt8](repeating: 0, count: count + count / 255 + 16)
            let blockCount = input.withUnsafeBytes { i in
                block.withUnsafeMutableBytes { b in
                    dictionary.withUnsafeBytes { d in
                        dictionary.isEmpty
                            ? LZ4Block.compress(i.baseAddress!, count: count, into: b.baseAddress!, capacity: b.count)
                            : state.withUnsafeMutableBytes { s in
                                LZ4Block.compressHC(
                                    i.baseAddress!,
                                    count: count,
                                    dictionary: d.baseAddress!,
                                    dictionaryCount: d.count,
                                    into: b.baseAddress!,
                                    capacity: b.count,
                                    state: s.baseAddress!
                                )
                            }
                    }
                }
            }
            // A block larger than its input is never an entry's (§6.6 rule 1 refuses it, as both decoders do).
            guard blockCount > 0, blockCount <= count else { continue }
            var coded = [UInt8](repeating: 0, count: blockCount + 400)
            let codedCount = block.withUnsafeBytes { b in
                coded.withUnsafeMutableBytes { c in
                    LZ4Block.codeLiterals(b.baseAddress!, count: blockCount, into: c.baseAddress!, capacity: c.count)
                }
            }
            guard codedCount > 0 else { continue }
            blocks.append((Array(coded[0..<codedCount]), dictionary, count))
        }
        return blocks
    }

    /// Blocks liblz4's encoders make decode in one pass (never undecided) to exactly their input, at the exact output
    /// size (an lz4 entry) and with room to spare (a packed payload's capacity).
    @Test func theEncodersBlocksDecodeInOnePassExactly() {
        let blocks = Self.codedBlocks(rounds: 80, seed: 61)
        #expect(blocks.count > 50)
        var withDictionary = 0
        for (index, (payload, dictionary, size)) in blocks.enumerated() {
            if !dictionary.isEmpty { withDictionary += 1 }
            for capacity in [size, size + 1, size + 40] {
                let expected = Self.reference(payload, dictionary: dictionary, capacity: capacity, blockCapacity: size)
                let (outcome, undecided) = Self.onePass(
                    payload,
                    dictionary: dictionary,
                    capacity: capacity,
                    blockCapacity: size
                )
                #expect(!undecided, "block \(index), capacity \(capacity)")
                #expect(expected.size == size, "block \(index)")
                #expect(outcome == expected, "block \(index), capacity \(capacity)")
            }
        }
        #expect(withDictionary > 20)
    }

    /// Damaged blocks (bytes of the sequence stream, the bit stream or the counts changed) and output capacities
    /// around the block's end get the definition's verdict: refused by both, or decoded by both to the same bytes.
    /// Some are answered undecided, and then decided by liblz4.
    @Test func damagedBlocksAndTightCapacitiesGetTheDefinitionsVerdict() {
        var random = SplitMix(seed: 62)
        var decoded = 0
        var refused = 0
        var undecidedCount = 0
        for (index, (payload, dictionary, size)) in Self.codedBlocks(rounds: 60, seed: 63).enumerated() {
            let sequenceBytes = Int(payload[4]) | Int(payload[5]) << 8 | Int(payload[6]) << 16 | Int(payload[7]) << 24
            for trial in 0..<40 {
                var damaged = payload
                let edits = 1 + Int(random.next() % 3)
                for _ in 0..<(trial == 0 ? 0 : edits) {
                    let where_ = random.next() % 10
                    let position: Int
                    if where_ < 7 {
                        position = payload.count - 1 - Int(random.next() % UInt64(sequenceBytes))  // the sequences
                    } else if where_ < 9 {
                        position = 40 + Int(random.next() % UInt64(payload.count - 40))  // lengths, bits
                    } else {
                        position = Int(random.next() % 8)  // L, S
                    }
                    damaged[position] = random.next() % 2 == 0 ? UInt8(truncatingIfNeeded: random.next()) : 0
                }
                // The exact size, a little less, a little more: the block's end meets the output's in every way.
                let capacity = max(1, size - 20 + Int(random.next() % 41))
                let blockCapacity = max(1, size + Int(random.next() % 16))
                let expected = Self.reference(
                    damaged,
                    dictionary: dictionary,
                    capacity: capacity,
                    blockCapacity: blockCapacity
                )
                let (outcome, undecided) = Self.onePass(
                    damaged,
                    dictionary: dictionary,
                    capacity: capacity,
                    blockCapacity: blockCapacity
                )
                #expect(outcome == expected, "block \(index), trial \(trial)")
                if undecided { undecidedCount += 1 }
                if expected.refused { refused += 1 } else { decoded += 1 }
            }
        }
        // The comparison meant something on each side.
        #expect(decoded > 300)
        #expect(refused > 300)
        #expect(undecidedCount > 20)
    }

    /// Hand-made blocks around the rules where liblz4 decides: "abc" then a match, as CodedLiteralsTests builds them.
    @Test func handMadeMatchesDecodeOrAreDecidedByLiblz4() {
        // Token 0x34: 3 literals, match length 8, offset 1; a last sequence of 5 literals (token 0x50). Literals
        // "abc" + "abcab" coded with a = 0, b = 10, c = 11.
        func block(_ sequences: [UInt8], literals: [UInt8]) -> [UInt8] {
            var bits: [UInt8] = []
            var accumulator = 0
            var filled = 0
            for literal in literals {
                let (code, length) = literal == 0x61 ? (0, 1) : literal == 0x62 ? (1, 2) : (3, 2)
                accumulator |= code << filled
                filled += length
                while filled >= 8 {
                    bits.append(UInt8(accumulator & 0xFF))
                    accumulator >>= 8
                    filled -= 8
                }
            }
            if filled > 0 { bits.append(UInt8(accumulator)) }
            return CodedLiteralsTests.block(
                literals: UInt32(literals.count),
                symbols: [0x61, 0x62, 0x63],
                nibbles: [0x21, 0x02],
                bits: bits,
                sequences: sequences
            )
        }
        let literals: [UInt8] = [0x61, 0x62, 0x63, 0x61, 0x62, 0x63, 0x61, 0x62]
        let good = block([0x34, 0x01, 0x00, 0x50], literals: literals)
        let (outcome, undecided) = Self.onePass(good, dictionary: [], capacity: 16, blockCapacity: 16)
        #expect(!undecided)
        #expect(
            outcome.bytes == [0x61, 0x62, 0x63] + [UInt8](repeating: 0x63, count: 8) + [0x61, 0x62, 0x63, 0x61, 0x62]
        )
        // Offset 0; an offset reaching before the output; the same with a 2-byte dictionary that it then reaches
        // into; the output one byte short; a match into the output's last 5 bytes: all liblz4's to judge. Then the
        // two boundaries exactly: 5 literals ending 11 bytes before the output's end (liblz4 refuses: a non-last
        // sequence's literals must end 12 before it) or 12; a match (length 19: one length byte) ending 4 bytes
        // before the end (refused: the last 5 bytes are literals) or 5.
        let abcab: [UInt8] = [0x61, 0x62, 0x63, 0x61, 0x62]
        let twelve = abcab + [0x63] + abcab + [0x63]
        let cases: [([UInt8], [UInt8], [UInt8], Int, Bool)] = [
            ([0x34, 0x00, 0x00, 0x50], literals, [], 16, true),
            ([0x34, 0x05, 0x00, 0x50], literals, [], 16, true),
            ([0x34, 0x05, 0x00, 0x50], literals, [0x70, 0x71], 16, false),
            ([0x34, 0x01, 0x00, 0x50], literals, [], 15, true),
            ([0x34, 0x01, 0x00, 0x50], literals, [], 17, false),
            ([0x50, 0x01, 0x00, 0x70], twelve, [], 16, true),
            ([0x50, 0x01, 0x00, 0x70], twelve, [], 17, false),
            ([0x1F, 0x01, 0x00, 0x00, 0x40], abcab, [], 24, true),
            ([0x1F, 0x01, 0x00, 0x00, 0x40], abcab, [], 25, false),
        ]
        var refused = 0
        for (index, (sequences, literals, dictionary, capacity, liblz4Decides)) in cases.enumerated() {
            let payload = block(sequences, literals: literals)
            let expected = Self.reference(payload, dictionary: dictionary, capacity: capacity, blockCapacity: 32)
            let (outcome, undecided) = Self.onePass(
                payload,
                dictionary: dictionary,
                capacity: capacity,
                blockCapacity: 32
            )
            #expect(undecided == liblz4Decides, "case \(index)")
            #expect(outcome == expected, "case \(index)")
            if expected.refused { refused += 1 }
        }
        #expect(refused >= 4)  // 1, 3 (its last literals do not fit), 5 and 7 at least
    }
}
