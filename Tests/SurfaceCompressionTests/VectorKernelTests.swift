import CSurfaceCodecKernels
import Glibc
import TestSupport
import Testing

@testable import SurfaceCompression

/// Every kernel tier this processor runs (on x86-64: AVX2, SSE4.1 and the portable Swift code; on arm64: NEON and
/// portable) decodes and packs exactly what the portable Swift code does, for any payload: encoded components and
/// arbitrary ones (what a payload rewritten in shared memory gives), every width 1...300 and height 1...70
/// (partial last blocks, the careful path near the payload's end), contiguous and strided into a larger plane.
/// The NEON tier is also checked on this machine under emulation (NEONKernelTests).
@Suite(.heavyWork, .timeLimit(.minutes(10))) struct VectorKernelTests {
    static let tiers = Kernels.availableTiers
    static let vectorTiers = tiers.filter { $0 != .portable }

    /// (width, height): every width 1...300 with a random height, every height 1...70 with a random width.
    static let cases: [(Int, Int)] = {
        var random = SplitMix(seed: 77)
        let byWidth = (1...300).map { ($0, 1 + Int(random.next() % 70)) }
        let byHeight = (1...70).map { (1 + Int(random.next() % 300), $0) }
        return byWidth + byHeight
    }()

    /// The cases split into groups that run in parallel.
    static let groups = 0..<10
    static func cases(in group: Int) -> ArraySlice<(Int, Int)> {
        let size = (cases.count + groups.count - 1) / groups.count
        return cases[min(cases.count, group * size)..<min(cases.count, (group + 1) * size)]
    }

    @Test func theTiersAreTheProcessorsBestFirst() {
        #expect(Self.tiers.last == .portable)
        // The best tier, unless FRAMEBUS_CODEC_KERNELS names another available one (BenchCodecKernelsTests).
        if getenv("FRAMEBUS_CODEC_KERNELS") == nil { #expect(Kernels.selectedTier == Self.tiers[0]) }
        #expect(Self.tiers.contains(Kernels.selectedTier))
        #if arch(x86_64)
        #expect(!Self.tiers.contains(.neon))
        // AVX2 implies SSE4.1: a processor that has AVX2 runs all three x86 tiers.
        if Self.tiers.contains(.avx2) { #expect(Self.tiers == [.avx2, .sse41, .portable]) }
        #elseif arch(arm64)
        #expect(Self.tiers == [.neon, .portable])
        #endif
        Kernels.withTier(.portable) {
            #expect(Kernels.tier == .portable)
            #expect(!Kernels.decodesStrided)
        }
    }

    // MARK: Payloads


    /// Samples of a smooth image with noise of the given range.
    static func samples8(width: Int, height: Int, noise: UInt64, _ random: inout SplitMix) -> [UInt8] {
        (0..<width * height).map { i in
            UInt8(truncatingIfNeeded: (i % width) * 3 + (i / width) * 5)
                &+ UInt8(truncatingIfNeeded: random.next() % noise)
        }
    }

    /// `samples` encoded with the portable encoder: the mode and the payload.
    static func encode8(_ samples: [UInt8], width: Int, height: Int) -> (TileMode, [UInt8]) {
        let stride = (width + 16) * height * 2 + 128
        var scratch = [UInt8](repeating: 0, count: stride * 4)
        var copy = samples + [UInt8](repeating: 0, count: 64)
        return scratch.withUnsafeMutableBytes { s in
            let base = s.baseAddress!
            let choice = copy.withUnsafeMutableBufferPointer { samples in
                ComponentCodec.encode8(
                    samples: samples.baseAddress!,
                    width: width,
                    height: height,
                    residuals: base.assumingMemoryBound(to: UInt8.self),
                    residuals2: (base + stride).assumingMemoryBound(to: UInt8.self),
                    packed: base + 2 * stride,
                    alternative: base + 3 * stride,
                    usesVectorKernels: Kernels.tier != .portable
                )
            }
            return (choice.mode, Array(UnsafeRawBufferPointer(start: choice.payload, count: choice.byteCount)))
        }
    }

    // MARK: packed8 decode

    /// Decodes a packed8 `payload` under `tier` into contiguous rows; nil for a refusal.
    static func decode8(_ payload: [UInt8], width: Int, height: Int, tier: Kernels.Tier) -> [UInt8]? {
        Kernels.withTier(tier) {
            var output = [UInt8](repeating: 0xEE, count: width * height + 64)
            var controls = [UInt8](repeating: 0, count: width * height + 64)
            let ok = payload.withUnsafeBytes { p in
                output.withUnsafeMutableBufferPointer { x in
                    controls.withUnsafeMutableBufferPointer { c in
                        ComponentCodec.decodePacked8(
                            p.baseAddress!,
                            count: p.count,
                            width: width,
                            height: height,
                            controls: c.baseAddress!,
                            controlsCapacity: c.count,
                            into: x.baseAddress!,
                            capacity: x.count
                        )
                    }
                }
            }
            return ok ? Array(output.prefix(width * height)) : nil
        }
    }

    /// Decodes under a vector `tier` straight into a plane of rows `stride` bytes apart, filled with 0xA5 before
    /// (64 bytes more after the last row); returns the whole plane, nil for a refusal.
    static func decode8(_ payload: [UInt8], width: Int, height: Int, stride: Int, tier: Kernels.Tier) -> [UInt8]? {
        Kernels.withTier(tier) {
            var plane = [UInt8](repeating: 0xA5, count: stride * height + 64)
            var controls = [UInt8](repeating: 0, count: width * height + 64)
            let ok = payload.withUnsafeBytes { p in
                plane.withUnsafeMutableBufferPointer { x in
                    controls.withUnsafeMutableBufferPointer { c in
                        ComponentCodec.decodePacked8(
                            p.baseAddress!,
                            count: p.count,
                            width: width,
                            height: height,
                            controls: c.baseAddress!,
                            controlsCapacity: c.count,
                            into: x.baseAddress!,
                            capacity: x.count,
                            rowStride: stride
                        )
                    }
                }
            }
            return ok ? plane : nil
        }
    }

    /// Checks every tier against the portable decoder on `payload` (and against `original` when given),
    /// contiguous and strided: the samples equal byte for byte, and not one byte beside them written.
    static func checkDecode8(
        _ payload: [UInt8],
        width: Int,
        height: Int,
        original: [UInt8]?,
        _ random: inout SplitMix,
        _ label: String
    ) {
        let portable = decode8(payload, width: width, height: height, tier: .portable)
        #expect(portable != nil, "\(label): refused")
        guard let portable else { return }
        if let original { #expect(portable == original, "\(label): portable round trip") }
        for tier in vectorTiers {
            #expect(decode8(payload, width: width, height: height, tier: tier) == portable, "\(label) \(tier)")
            let stride = width + 1 + Int(random.next() % 17)
            guard let plane = decode8(payload, width: width, height: height, stride: stride, tier: tier) else {
                Issue.record("\(label) \(tier): strided decode refused")
                continue
            }
            var samplesEqual = true
            var besideUntouched = true
            for y in 0..<height {
                samplesEqual =
                    samplesEqual && plane[y * stride..<y * stride + width] == portable[y * width..<(y + 1) * width]
                besideUntouched =
                    besideUntouched && plane[y * stride + width..<(y + 1) * stride].allSatisfy { $0 == 0xA5 }
            }
            besideUntouched = besideUntouched && plane[(stride * height)...].allSatisfy { $0 == 0xA5 }
            #expect(samplesEqual, "\(label) \(tier) stride \(stride): samples")
            #expect(besideUntouched, "\(label) \(tier) stride \(stride): wrote beside the component")
        }
    }

    /// Arbitrary payloads (three width mixes) and encoded components (three noise levels) of every size.
    @Test(arguments: groups)
    func everyTierDecodesPacked8AsThePortableCode(group: Int) {
        var random = SplitMix(seed: UInt64(1000 + group))
        for (width, height) in Self.cases(in: group) {
            let blocks = (width + 7) / 8 * height
            for style in 0..<3 {
                let widths = PayloadWidths.mixes[style]
                let payload = arbitraryPackedPayload(blocks: blocks, maximum: 8, widths: widths, random: &random)
                Self.checkDecode8(
                    payload,
                    width: width,
                    height: height,
                    original: nil,
                    &random,
                    "\(width)x\(height) arbitrary \(style)"
                )
            }
            for noise: UInt64 in [3, 40, 256] {
                let samples = Self.samples8(width: width, height: height, noise: noise, &random)
                let (mode, payload) = Kernels.withTier(.portable) {
                    Self.encode8(samples, width: width, height: height)
                }
                guard mode == .packed8 else { continue }
                Self.checkDecode8(
                    payload,
                    width: width,
                    height: height,
                    original: samples,
                    &random,
                    "\(width)x\(height) noise \(noise)"
                )
            }
        }
    }

    /// Widths above 8 are refused wherever they sit among the nibbles (the validation reads 16 at a time), even
    /// when the payload's size adds up, under every tier.
    @Test(arguments: tiers)
    func aWidthAboveEightIsRefusedAnywhere(tier: Kernels.Tier) {
        let width = 64
        let height = 5
        let blocks = width / 8 * height
        for position in [0, 1, 7, 15, 16, 17, blocks - 1] {
            for bad in [9, 12, 15] {
                var nibbles = [UInt8](repeating: 0x33, count: blocks / 2)
                nibbles[position / 2] = position % 2 == 0 ? (0x30 | UInt8(bad)) : (0x03 | UInt8(bad) << 4)
                let total = 3 * (blocks - 1) + bad
                let payload = nibbles + [UInt8](repeating: 0, count: blocks / 8) + [UInt8](repeating: 1, count: total)
                #expect(
                    Self.decode8(payload, width: width, height: height, tier: tier) == nil,
                    "nibble \(position) = \(bad)"
                )
            }
            // The same with width 8 is valid.
            var nibbles = [UInt8](repeating: 0x33, count: blocks / 2)
            nibbles[position / 2] = position % 2 == 0 ? 0x38 : 0x83
            let payload =
                nibbles + [UInt8](repeating: 0, count: blocks / 8) + [UInt8](repeating: 1, count: 3 * (blocks - 1) + 8)
            #expect(Self.decode8(payload, width: width, height: height, tier: tier) != nil)
        }
    }

    // MARK: packed10 decode

    /// Decodes a packed10 `payload` under `tier`; nil for a refusal.
    static func decode10(_ payload: [UInt8], width: Int, height: Int, tier: Kernels.Tier) -> [UInt16]? {
        Kernels.withTier(tier) {
            var output = [UInt16](repeating: 0xEEEE, count: width * height + 64)
            var controls = [UInt8](repeating: 0, count: width * height + 64)
            var residuals = [UInt16](repeating: 0, count: (width + 8) * height + 64)
            let ok = payload.withUnsafeBytes { p in
                output.withUnsafeMutableBufferPointer { x in
                    controls.withUnsafeMutableBufferPointer { c in
                        residuals.withUnsafeMutableBufferPointer { r in
                            ComponentCodec.decodePacked16(
                                p.baseAddress!,
                                count: p.count,
                                tenBit: true,
                                width: width,
                                height: height,
                                controls: c.baseAddress!,
                                controlsCapacity: c.count,
                                residuals: r.baseAddress!,
                                into: x.baseAddress!,
                                capacity: x.count
                            )
                        }
                    }
                }
            }
            return ok ? Array(output.prefix(width * height)) : nil
        }
    }

    /// `samples` (10-bit values << 6) encoded with the portable encoder: the mode and the payload.
    static func encode16(_ samples: [UInt16], width: Int, height: Int) -> (TileMode, [UInt8]) {
        let stride = ((width + 16) * height * 2 + 128) * 2
        var scratch = [UInt8](repeating: 0, count: stride * 4)
        var copy = samples + [UInt16](repeating: 0, count: 64)
        return scratch.withUnsafeMutableBytes { s in
            let base = s.baseAddress!
            let choice = copy.withUnsafeMutableBufferPointer { samples in
                ComponentCodec.encode16(
                    samples: samples.baseAddress!,
                    width: width,
                    height: height,
                    residuals: base.assumingMemoryBound(to: UInt16.self),
                    residuals2: (base + stride).assumingMemoryBound(to: UInt16.self),
                    packed: base + 2 * stride,
                    alternative: base + 3 * stride
                )
            }
            return (choice.mode, Array(UnsafeRawBufferPointer(start: choice.payload, count: choice.byteCount)))
        }
    }

    /// 10-bit: arbitrary payloads and encoded components of every size decode alike under every tier.
    @Test(arguments: groups)
    func everyTierDecodesPacked10AsThePortableCode(group: Int) {
        var random = SplitMix(seed: UInt64(2000 + group))
        for (width, height) in Self.cases(in: group) {
            let blocks = (width + 7) / 8 * height
            var payloads: [([UInt8], [UInt16]?, String)] = (0..<3).map { style in
                let widths = PayloadWidths.mixes[style]
                return (
                    arbitraryPackedPayload(blocks: blocks, maximum: 10, widths: widths, random: &random), nil,
                    "arbitrary \(style)"
                )
            }
            for noise in [5, 60, 1024] {
                let samples = (0..<width * height).map { i in
                    UInt16(((i % width) * 7 + (i / width) * 11 + Int(random.next() % UInt64(noise))) & 0x3FF) << 6
                }
                let (mode, payload) = Self.encode16(samples, width: width, height: height)
                if mode == .packed10 { payloads.append((payload, samples, "noise \(noise)")) }
            }
            for (payload, original, label) in payloads {
                let portable = Self.decode10(payload, width: width, height: height, tier: .portable)
                #expect(portable != nil, "\(width)x\(height) \(label): refused")
                if let original { #expect(portable == original, "\(width)x\(height) \(label): round trip") }
                for tier in Self.vectorTiers {
                    #expect(
                        Self.decode10(payload, width: width, height: height, tier: tier) == portable,
                        "\(width)x\(height) \(label) \(tier)"
                    )
                }
            }
        }
    }

    /// Decodes a packed10 `payload` under AVX2 into rows `stride` samples apart (the rest 0xEEEE); nil for a refusal.
    static func decode10(_ payload: [UInt8], width: Int, height: Int, stride: Int) -> [UInt16]? {
        Kernels.withTier(.avx2) {
            var output = [UInt16](repeating: 0xEEEE, count: (height - 1) * stride + width)
            var controls = [UInt8](repeating: 0, count: width * height + 64)
            var residuals = [UInt16](repeating: 0, count: (width + 8) * height + 64)
            let ok = payload.withUnsafeBytes { p in
                output.withUnsafeMutableBufferPointer { x in
                    controls.withUnsafeMutableBufferPointer { c in
                        residuals.withUnsafeMutableBufferPointer { r in
                            ComponentCodec.decodePacked16(
                                p.baseAddress!,
                                count: p.count,
                                tenBit: true,
                                width: width,
                                height: height,
                                controls: c.baseAddress!,
                                controlsCapacity: c.count,
                                residuals: r.baseAddress!,
                                into: x.baseAddress!,
                                capacity: x.count,
                                rowStride: stride
                            )
                        }
                    }
                }
            }
            return ok ? output : nil
        }
    }

    /// The AVX2 packed10 kernel decodes into rows a stride apart (a 10-bit Y band straight into its plane): every
    /// width that is a multiple of 8, arbitrary and encoded payloads, the same samples as the portable code in each
    /// row and not one sample written between the rows; the capacity buffer ends right after the last row's last
    /// sample, so a write past it would be caught by the kernel's refusal, not by luck. The entry point refuses a
    /// width that is not a multiple of 8 and a capacity one sample short.
    @Test(.enabled(if: Kernels.availableTiers.contains(.avx2)), arguments: groups)
    func theAVX2Packed10KernelDecodesIntoRowsAStrideApart(group: Int) {
        var random = SplitMix(seed: UInt64(5000 + group))
        let widths = Array(stride(from: 8, through: 320, by: 8))
        for width in widths where (width / 8) % Self.groups.count == group {
            let height = 1 + Int(random.next() % 70)
            let blocks = width / 8 * height
            var payloads: [([UInt8], String)] = (0..<3).map { style in
                (arbitraryPackedPayload(blocks: blocks, maximum: 10, widths: PayloadWidths.mixes[style], random: &random),
                 "arbitrary \(style)")
            }
            for noise in [1, 60, 1024] {
                let samples = (0..<width * height).map { i in
                    UInt16(((i % width) * 7 + (i / width) * 11 + Int(random.next() % UInt64(noise))) & 0x3FF) << 6
                }
                let (mode, payload) = Self.encode16(samples, width: width, height: height)
                if mode == .packed10 { payloads.append((payload, "noise \(noise)")) }
            }
            for (payload, label) in payloads {
                guard let portable = Self.decode10(payload, width: width, height: height, tier: .portable) else {
                    Issue.record("\(width)x\(height) \(label): refused")
                    continue
                }
                for extra in [0, 5, 24] {
                    let stride = width + extra
                    guard let strided = Self.decode10(payload, width: width, height: height, stride: stride) else {
                        Issue.record("\(width)x\(height) \(label) stride \(stride): refused")
                        continue
                    }
                    var rows: [UInt16] = []
                    var between = true
                    for y in 0..<height {
                        rows += strided[y * stride..<y * stride + width]
                        if y + 1 < height { between = between && strided[y * stride + width..<(y + 1) * stride].allSatisfy { $0 == 0xEEEE } }
                    }
                    #expect(rows == portable, "\(width)x\(height) \(label) stride \(stride)")
                    #expect(between, "\(width)x\(height) \(label) stride \(stride): wrote between rows")
                }
            }
        }
        #if arch(x86_64)
        // Refusals: nothing written, -1.
        let payload = arbitraryPackedPayload(blocks: 2 * 4, maximum: 10, widths: PayloadWidths.mixes[0], random: &random)
        var controls = [UInt8](repeating: 0, count: 256)
        var output = [UInt16](repeating: 0xEEEE, count: 4096)
        for (width, stride, capacity) in [(12, 16, 4096), (16, 15, 4096), (16, 24, 3 * 24 + 16 - 1)] {
            let blocks = (width + 7) / 8 * 4
            let controlBytes = (blocks + 1) / 2 + (blocks + 7) / 8
            let status = payload.withUnsafeBytes { p in
                controls.withUnsafeMutableBufferPointer { c in
                    output.withUnsafeMutableBufferPointer { x in
                        csck_decode_packed10_avx2_strided(
                            p.baseAddress!.assumingMemoryBound(to: UInt8.self), p.count, controlBytes,
                            c.baseAddress!, c.count, c.baseAddress! + (blocks + 1) / 2, c.count - (blocks + 1) / 2,
                            width, 4, x.baseAddress!, capacity, stride
                        )
                    }
                }
            }
            #expect(status == -1, "width \(width), stride \(stride), capacity \(capacity)")
        }
        #expect(output.allSatisfy { $0 == 0xEEEE })
        #endif
    }

    // MARK: pack8

    /// Every tier's encoder writes exactly the portable encoder's bytes (same mode, same payload).
    @Test(arguments: groups)
    func everyTierEncodesAsThePortableCode(group: Int) {
        var random = SplitMix(seed: UInt64(3000 + group))
        for (width, height) in Self.cases(in: group) {
            for noise: UInt64 in [2, 9, 60, 256] {
                let samples = Self.samples8(width: width, height: height, noise: noise, &random)
                let portable = Kernels.withTier(.portable) { Self.encode8(samples, width: width, height: height) }
                for tier in Self.vectorTiers {
                    let vector = Kernels.withTier(tier) { Self.encode8(samples, width: width, height: height) }
                    #expect(vector.0 == portable.0, "\(width)x\(height) noise \(noise) \(tier)")
                    #expect(vector.1 == portable.1, "\(width)x\(height) noise \(noise) \(tier)")
                }
            }
        }
    }

    /// The packed8 payload of `up` and `left` residual blocks, written field by field from the layout's rule
    /// (the oracle for the kernels' block packer): each block's width is the bit length of its largest byte
    /// under the chosen predictor, left only where strictly narrower; residual i of a block at bit w·i.
    static func referencePack8(up: [UInt8], left: [UInt8], blockCount: Int) -> (payload: [UInt8], zeroBlocks: Int) {
        func width(_ block: ArraySlice<UInt8>) -> Int { block.map { 8 - $0.leadingZeroBitCount }.max() ?? 0 }
        var nibbles = [UInt8](repeating: 0, count: (blockCount + 1) / 2)
        var bits = [UInt8](repeating: 0, count: (blockCount + 7) / 8)
        var residuals: [UInt8] = []
        var zeros = 0
        for block in 0..<blockCount {
            let u = up[block * 8..<block * 8 + 8]
            let l = left[block * 8..<block * 8 + 8]
            let useLeft = width(l) < width(u)
            let w = useLeft ? width(l) : width(u)
            let chosen = useLeft ? l : u
            if useLeft { bits[block / 8] |= 1 << (block % 8) }
            nibbles[block / 2] |= UInt8(w) << (4 * (block % 2))
            zeros += w == 0 ? 1 : 0
            var packed = [UInt8](repeating: 0, count: w)
            for (i, value) in chosen.enumerated() {
                for bit in 0..<w where (value >> bit) & 1 == 1 {
                    let at = w * i + bit
                    packed[at / 8] |= 1 << (at % 8)
                }
            }
            residuals += packed
        }
        return (nibbles + bits + residuals, zeros)
    }

    /// Arbitrary residual blocks (every width under each predictor, ties included) packed by every tier's
    /// kernel: the reference's bytes and zero-block count, for block counts 1...600.
    @Test(arguments: groups)
    func everyTiersBlockPackerWritesTheLayoutsBytes(group: Int) {
        var random = SplitMix(seed: UInt64(4000 + group))
        for blockCount in stride(from: 1 + group, through: 600, by: Self.groups.count) {
            func block(_ w: Int) -> [UInt8] {
                (0..<8).map { _ in w == 0 ? 0 : UInt8(truncatingIfNeeded: random.next() % (1 << UInt64(w))) }
            }
            var up: [UInt8] = []
            var left: [UInt8] = []
            for _ in 0..<blockCount {
                let wu = Int(random.next() % 9)
                up += block(wu)
                left += block(random.next() % 3 == 0 ? wu : Int(random.next() % 9))
            }
            let expected = Self.referencePack8(up: up, left: left, blockCount: blockCount)
            for tier in Self.tiers {
                var out = [UInt8](repeating: 0xEE, count: blockCount * 9 + 64)
                var size = 0
                var zeros = 0
                let packed = Kernels.withTier(tier) {
                    up.withUnsafeBufferPointer { u in
                        left.withUnsafeBufferPointer { l in
                            out.withUnsafeMutableBytes { o in
                                Kernels.pack8(
                                    up: u.baseAddress!,
                                    left: l.baseAddress!,
                                    blockCount: blockCount,
                                    into: o.baseAddress!,
                                    capacity: o.count,
                                    size: &size,
                                    zeroBlocks: &zeros
                                )
                            }
                        }
                    }
                }
                #expect(packed == (tier != .portable), "\(tier)")
                guard packed else { continue }
                #expect(Array(out.prefix(size)) == expected.payload, "\(blockCount) blocks \(tier)")
                #expect(zeros == expected.zeroBlocks, "\(blockCount) blocks \(tier)")
            }
        }
    }
}
