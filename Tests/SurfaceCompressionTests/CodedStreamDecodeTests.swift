import CSurfaceCodecKernels
import TestSupport
import Testing

@testable import SurfaceCompression

/// The decoders' fast paths for coded blocks (docs/COMPRESSED-LAYOUT.md §6.6, §6.7), checked against an encoder
/// written here from the document and against liblz4: decoding tables of every longest code length 1…11 (complete
/// and incomplete codes, built by doubling), stream ends at and around the decoders' 5-symbol steps, a stream whose
/// last code is cut or followed by a pattern no code starts, and match copies of every period 1…40 and of the wide
/// and chunked paths (offsets 32…127, 128 and up), ending where liblz4's rules let a match end.
@Suite(.heavyWork, .timeLimit(.minutes(4))) struct CodedStreamDecodeTests {
    // MARK: A canonical Huffman encoder, from §6.6

    /// Symbols (distinct) with their code lengths: codes ordered by (length, symbol value), DEFLATE's rule.
    struct Code {
        let symbols: [UInt8]
        let lengths: [Int]
        /// The code (most significant bit first) of each symbol, by symbol value.
        var codes: [Int: (code: Int, length: Int)] {
            let order = zip(symbols, lengths).sorted { ($0.1, $0.0) < ($1.1, $1.0) }
            var result: [Int: (code: Int, length: Int)] = [:]
            var code = 0
            var previous = order.first?.1 ?? 0
            for (symbol, length) in order {
                code <<= length - previous
                previous = length
                result[Int(symbol)] = (code, length)
                code += 1
            }
            return result
        }
        /// The 32-byte bitmap and the length nibbles, in increasing symbol order, low nibble first.
        var description: [UInt8] {
            var bitmap = [UInt8](repeating: 0, count: 32)
            for s in symbols { bitmap[Int(s) / 8] |= 1 << (s % 8) }
            let byValue = zip(symbols, lengths).sorted { $0.0 < $1.0 }.map(\.1)
            var nibbles = [UInt8](repeating: 0, count: (byValue.count + 1) / 2)
            for (k, l) in byValue.enumerated() { nibbles[k / 2] |= UInt8(l) << (4 * (k % 2)) }
            return bitmap + nibbles
        }
        /// The bit stream of `data` (bits from each byte's least significant bit, each code first bit first), and
        /// then `extra` (a pattern of `extraLength` bits) if given.
        func bits(_ data: [UInt8], extra: Int = 0, extraLength: Int = 0) -> [UInt8] {
            let table = codes
            var out: [UInt8] = []
            var position = 0
            func put(_ bit: Int) {
                if position % 8 == 0 { out.append(0) }
                out[position / 8] |= UInt8(bit) << (position % 8)
                position += 1
            }
            for d in data {
                let (code, length) = table[Int(d)]!
                for i in stride(from: length - 1, through: 0, by: -1) { put(code >> i & 1) }
            }
            for i in stride(from: extraLength - 1, through: 0, by: -1) { put(extra >> i & 1) }
            return out
        }
    }

    /// A code whose longest length is `longest`: lengths 1, 2, …, longest − 1, longest, longest (complete), or
    /// without the last (incomplete). Symbol values fall as lengths grow, so canonical order is not value order.
    static func code(longest: Int, complete: Bool) -> Code {
        var lengths = longest == 1 ? [1] : Array(1...longest)
        if complete { lengths.append(longest) }
        let symbols = lengths.indices.map { UInt8(250 - 13 * $0) }
        return Code(symbols: symbols, lengths: lengths)
    }

    /// `n` symbols of `code`, short and long ones mixed, the last one among the longest.
    static func data(_ code: Code, count n: Int, random: inout SplitMix) -> [UInt8] {
        guard n > 0 else { return [] }
        var data = (0..<n).map { _ in code.symbols[Int(random.next() % UInt64(code.symbols.count))] }
        data[n - 1] = code.symbols[code.symbols.count - 1]
        return data
    }

    static func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }

    /// The literal length part of an LZ4 sequence with `run` literals and match nibble `match`: token, length bytes.
    static func literalLength(_ run: Int, match: Int = 0) -> (token: UInt8, bytes: [UInt8]) {
        guard run >= 15 else { return (UInt8(run << 4 | match), []) }
        var rest = run - 15
        var bytes: [UInt8] = []
        while rest >= 255 {
            bytes.append(255)
            rest -= 255
        }
        return (UInt8(0xF0 | match), bytes + [UInt8(rest)])
    }

    /// A one-sequence block of the literals `data` coded with `code`: the sequence-coded form (§6.7, the literals
    /// Huffman-coded, the rest stored), the coded-literals form (§6.6), and the LZ4 block B both stand for.
    static func blocks(_ code: Code, _ data: [UInt8], bits: [UInt8]) -> (v7: [UInt8], v6: [UInt8], b: [UInt8]) {
        let (token, lengthBytes) = literalLength(data.count)
        let literals = code.description + bits
        var v7 = le32(data.count) + le32(1) + le32(lengthBytes.count)
        v7 += le32(literals.count) + le32(1) + le32(0) + le32(0) + le32(lengthBytes.count) + [1, 0, 0, 0, 0]
        v7 += literals + [token] + lengthBytes
        let v6 = le32(data.count) + le32(1 + lengthBytes.count) + literals + [token] + lengthBytes
        return (v7, v6, [token] + lengthBytes + data)
    }

    /// Rebuilds B from a sequence-coded block (csck_seq_lz4_decode) into exactly `capacity` bytes.
    static func rebuild7(_ payload: [UInt8], capacity: Int) -> (Int, [UInt8]) {
        var out = [UInt8](repeating: 0, count: capacity)
        var scratch = [UInt8](repeating: 0, count: capacity)
        let result = payload.withUnsafeBytes { p in
            out.withUnsafeMutableBytes { o in
                scratch.withUnsafeMutableBytes { s in
                    csck_seq_lz4_decode(
                        p.baseAddress!.assumingMemoryBound(to: UInt8.self), p.count,
                        o.baseAddress!.assumingMemoryBound(to: UInt8.self), o.count,
                        s.baseAddress!.assumingMemoryBound(to: UInt8.self), s.count)
                }
            }
        }
        return (result, Array(out[0..<max(0, min(result, capacity))]))
    }

    /// Rebuilds B from a coded-literals block (csck_huff_lz4_decode) into exactly `capacity` bytes.
    static func rebuild6(_ payload: [UInt8], capacity: Int) -> (Int, [UInt8]) {
        var out = [UInt8](repeating: 0, count: capacity)
        let result = payload.withUnsafeBytes { p in
            out.withUnsafeMutableBytes { o in
                csck_huff_lz4_decode(
                    p.baseAddress!.assumingMemoryBound(to: UInt8.self), p.count,
                    o.baseAddress!.assumingMemoryBound(to: UInt8.self), o.count)
            }
        }
        return (result, Array(out[0..<max(0, min(result, capacity))]))
    }

    /// Guard bytes after the output: a decoder must write nothing at or past `capacity`.
    static let guardCount = 64

    /// The one-pass decoders (`sequences`: csck_seq_lz4_decompress, else csck_huff_lz4_decompress) into `capacity`
    /// bytes followed by guard bytes; returns the result, the output and whether the guard bytes are untouched.
    static func decompress(_ payload: [UInt8], sequences: Bool, blockCapacity: Int, capacity: Int)
        -> (Int, [UInt8], Bool)
    {
        var out = [UInt8](repeating: 0xEE, count: capacity + guardCount)
        var scratch = [UInt8](repeating: 0, count: blockCapacity)
        let result = payload.withUnsafeBytes { p in
            out.withUnsafeMutableBytes { o in
                scratch.withUnsafeMutableBytes { s in
                    let f = sequences ? csck_seq_lz4_decompress : csck_huff_lz4_decompress
                    return f(
                        p.baseAddress!.assumingMemoryBound(to: UInt8.self), p.count, blockCapacity,
                        o.baseAddress!.assumingMemoryBound(to: UInt8.self), 0, capacity,
                        s.baseAddress!.assumingMemoryBound(to: UInt8.self), s.count)
                }
            }
        }
        let intact = out[capacity...].allSatisfy { $0 == 0xEE }
        return (result, Array(out[0..<max(0, min(result, capacity))]), intact)
    }

    // MARK: Tables and stream ends

    /// Every longest code length 1…11, complete and incomplete, each symbol count 1…41 (every position relative to
    /// the decoders' 5-symbol steps) and a long run: both rebuilders and both one-pass decoders give the literals
    /// byte for byte.
    @Test func everyCodeLengthDecodesExactly() throws {
        var random = SplitMix(seed: 1601)
        for longest in 1...11 {
            for complete in [true, false] where longest > 1 || complete {
                let code = Self.code(longest: longest, complete: complete)
                for n in Array(1...41) + [300, 1000] {
                    let data = Self.data(code, count: n, random: &random)
                    let (v7, v6, b) = Self.blocks(code, data, bits: code.bits(data))
                    let label = "longest \(longest) complete \(complete) n \(n)"
                    let (r7, b7) = Self.rebuild7(v7, capacity: b.count)
                    #expect(r7 == b.count && b7 == b, "v7 rebuild, \(label)")
                    let (r6, b6) = Self.rebuild6(v6, capacity: b.count)
                    #expect(r6 == b.count && b6 == b, "v6 rebuild, \(label)")
                    for sequences in [true, false] {
                        let (r, out, intact) = Self.decompress(
                            sequences ? v7 : v6, sequences: sequences, blockCapacity: b.count, capacity: n)
                        #expect(r == n && out == data && intact, "one pass, sequences \(sequences), \(label)")
                    }
                }
            }
        }
    }

    /// A stream one code short (its last code cut off, the padding bits zero), a stream with one code too many,
    /// and an incomplete code met by a pattern no code starts with as the stream's last code: refused by every
    /// decoder, whatever the count's position relative to the 5-symbol steps.
    @Test func streamsThatEndWrongAreRefused() throws {
        var random = SplitMix(seed: 1602)
        for longest in [2, 5, 8, 9, 11] {
            let incomplete = Self.code(longest: longest, complete: false)
            let complete = Self.code(longest: longest, complete: true)
            for n in [1, 4, 5, 6, 9, 10, 11, 15, 16, 17, 40] {
                let label = "longest \(longest) n \(n)"
                // n codes written, the last byte dropped: the last code is cut (the decoder reads zeros past the
                // stream's end, which no code may use).
                let short = Self.data(complete, count: n, random: &random)
                var cases: [(String, [UInt8], [UInt8])] = []
                cases.append(("short", short, Array(complete.bits(short).dropLast())))
                // n + 1 codes written (the extra one longest), n claimed.
                cases.append(("long", short, complete.bits(short + [complete.symbols.last!])))
                // The incomplete code's missing pattern (all ones, `longest` bits) after n − 1 codes.
                let data = Self.data(incomplete, count: n, random: &random)
                let invalid = incomplete.bits(Array(data.dropLast()), extra: (1 << longest) - 1, extraLength: longest)
                cases.append(("invalid", data, invalid))
                for (name, data, bits) in cases {
                    let code = name == "invalid" ? incomplete : complete
                    let (v7, v6, b) = Self.blocks(code, data, bits: bits)
                    #expect(Self.rebuild7(v7, capacity: b.count).0 < 0, "v7 \(name), \(label)")
                    #expect(Self.rebuild6(v6, capacity: b.count).0 < 0, "v6 \(name), \(label)")
                    for sequences in [true, false] {
                        let (r, _, intact) = Self.decompress(
                            sequences ? v7 : v6, sequences: sequences, blockCapacity: b.count, capacity: n)
                        #expect(r < 0 && intact, "one pass, sequences \(sequences), \(name), \(label)")
                    }
                }
            }
        }
    }

    // MARK: Match copies

    /// A block of `period` distinct literals, a match of `length` bytes from `period` back, then `tail` literals;
    /// B as an LZ4 block.
    static func matchBlock(period: Int, length: Int, tail: Int) -> [UInt8] {
        let head = (0..<period).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) }
        let matchNibble = min(length - 4, 15)
        let (token, lengthBytes) = literalLength(period, match: matchNibble)
        var b = [token] + lengthBytes + head + [UInt8(period & 0xFF), UInt8(period >> 8)]
        if matchNibble == 15 {
            var rest = length - 19
            while rest >= 255 {
                b.append(255)
                rest -= 255
            }
            b.append(UInt8(rest))
        }
        let (lastToken, lastBytes) = literalLength(tail)
        return b + [lastToken] + lastBytes + (0..<tail).map { UInt8(truncatingIfNeeded: 200 + $0) }
    }

    /// Match periods 1…40 and far ones (the 32-byte steps, the chunked copy from 128 bytes back), lengths short and
    /// long, ending 5, 6 and 21 bytes before the output's end (liblz4's last match ends 5 before it at the latest):
    /// both one-pass decoders give liblz4's output byte for byte (or leave the block to liblz4 where it refuses it)
    /// and write nothing past the output.
    @Test func matchesOfEveryPeriodNearTheEndDecodeExactly() throws {
        var scratch = [UInt8](repeating: 0, count: 1 << 16)
        for period in Array(1...40) + [63, 64, 100, 127, 128, 129, 200, 1000, 4000] {
            for length in [4, 5, 15, 16, 17, 18, 19, 31, 32, 33, 100, 127, 128, 129, 255, 300, 1000, 5000] {
                for tail in [5, 6, 21] {
                    let b = Self.matchBlock(period: period, length: length, tail: tail)
                    let n = period + length + tail
                    let label = "period \(period) length \(length) tail \(tail)"
                    var reference = [UInt8](repeating: 0, count: n)
                    // liblz4 refuses a first sequence whose literals end within 12 bytes of the output's end
                    // (length + tail < 12): the one-pass decoders must then leave the block to it.
                    let lz4 = LZ4Block.decompress(b, count: b.count, into: &reference)
                    let expected = lz4 == n ? n : Int(CSCK_HUFF_UNDECIDED)
                    if lz4 != n { reference = [] }
                    var coded = [UInt8](repeating: 0, count: b.count + 400)
                    let v7Count = b.withUnsafeBytes { bb in
                        coded.withUnsafeMutableBytes { c in
                            scratch.withUnsafeMutableBytes { s in
                                LZ4Block.codeSequences(
                                    bb.baseAddress!, count: b.count, into: c.baseAddress!, capacity: c.count,
                                    scratch: s.baseAddress!)
                            }
                        }
                    }
                    try #require(v7Count > 0)
                    let v7 = Array(coded[0..<v7Count])
                    let (r7, out7, intact7) = Self.decompress(v7, sequences: true, blockCapacity: b.count, capacity: n)
                    #expect(r7 == expected && out7 == reference && intact7, "v7, \(label)")
                    // The same B as a coded-literals block, the literals coded with a fixed 8-bit code.
                    let literals = Array(b[(1 + Self.literalLength(period).bytes.count)...].prefix(period))
                        + Array(b.suffix(tail))
                    let flat = Code(symbols: Array(0...255), lengths: Array(repeating: 8, count: 256))
                    let sequenceBytes = b.count - literals.count
                    var sequencePart: [UInt8] = []
                    let headLength = 1 + Self.literalLength(period).bytes.count
                    sequencePart += b[0..<headLength]
                    sequencePart += b[(headLength + period)..<(b.count - tail)]
                    try #require(sequencePart.count == sequenceBytes)
                    let v6 = Self.le32(literals.count) + Self.le32(sequenceBytes) + flat.description
                        + flat.bits(literals) + sequencePart
                    let (r6, out6, intact6) = Self.decompress(v6, sequences: false, blockCapacity: b.count, capacity: n)
                    #expect(r6 == expected && out6 == reference && intact6, "v6, \(label)")
                }
            }
        }
    }
}
