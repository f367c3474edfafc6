#if arch(x86_64)
import CSurfaceCodecKernels
import Foundation
import TestSupport
import Testing

@testable import SurfaceCompression

/// The AVX-512 packed8 decoder (eight blocks a step, a row in chunks of 32 steps unpacked then predicted; the
/// row's last step masked) against the portable decoder, byte for byte: every width nibble 0...8, every number of
/// blocks a row leaves to the last step (0...7 whole blocks, with and without a partial block), rows that cross a
/// chunk, every 8-bit predictor pattern, strided rows, payloads cut short, and the refusals. On a processor
/// without AVX-512 VBMI, VBMI2 and GFNI these tests are skipped, saying so; with FRAMEBUS_REQUIRE_ALL=1 they run
/// and fail there.
@Suite(.heavyWork, .timeLimit(.minutes(10))) struct AVX512Packed8KernelTests {
    static let available = csck_cpu_has_avx512_packed8() != 0
    static let required = ProcessInfo.processInfo.environment["FRAMEBUS_REQUIRE_ALL"] == "1"
    static let runs = available || required

    /// Decodes with the AVX-512 unpacking (2), the payload before an inaccessible page.
    static func decode(_ payload: [UInt8], width: Int, height: Int, stride: Int) -> [UInt8] {
        KernelUnpackingTests.kernel(payload, width: width, height: height, stride: stride, unpacking: 2)
    }

    /// A payload whose blocks all have width `w` (or random widths 0...8 when nil), random predictor bits and
    /// residual bytes.
    static func payload(width: Int, height: Int, w: Int?, random: inout SplitMix) -> [UInt8] {
        let blocks = blockCount(width: width, height: height)
        var nibbles = [UInt8](repeating: 0, count: (blocks + 1) / 2)
        var total = 0
        for block in 0..<blocks {
            let bits = w ?? Int(random.next() % 9)
            nibbles[block / 2] |= UInt8(bits) << (4 * (block % 2))
            total += bits
        }
        var bits = (0..<(blocks + 7) / 8).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        // Bits past the last block stay zero (the decoder refuses others).
        if blocks % 8 != 0 { bits[bits.count - 1] &= UInt8((1 << (blocks % 8)) - 1) }
        return nibbles + bits + (0..<total).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    @Test(.enabled(if: runs, "the processor lacks AVX-512 VBMI, VBMI2 or GFNI")) func theProcessorRunsIt() throws {
        try #require(Self.available, "FRAMEBUS_REQUIRE_ALL=1: AVX-512 VBMI, VBMI2 and GFNI are required")
        #expect(csck_cpu_has_avx2() != 0)
    }

    /// Every width nibble 0...8 (all blocks of one width, then mixed), rows of 1...24 whole blocks with and
    /// without a partial block (so the last step holds 0...7 whole blocks and 0 or 1 partial one), rows of more
    /// than one chunk (2049, 4100 samples), strides from the width up.
    @Test(.enabled(if: runs, "the processor lacks AVX-512 VBMI, VBMI2 or GFNI"), arguments: Array(0...9))
    func everyWidthAndEveryLastStep(nibble: Int) throws {
        try #require(Self.available)
        var random = SplitMix(seed: UInt64(7100 + nibble))
        var widths: [Int] = [1, 7, 2049, 2112, 4100]
        for blocks in 1...24 {
            widths.append(8 * blocks)
            widths.append(8 * blocks + 1 + blocks % 7)
        }
        for width in widths {
            for height in [1, 3] {
                let payload = Self.payload(width: width, height: height, w: nibble == 9 ? nil : nibble, random: &random)
                let expected = try #require(KernelUnpackingTests.portable(payload, width: width, height: height))
                for stride in [width, width + 5] {
                    let plane = Self.decode(payload, width: width, height: height, stride: stride)
                    KernelUnpackingTests.expectSame(
                        plane,
                        expected,
                        width: width,
                        height: height,
                        stride: stride,
                        "nibble \(nibble), \(width)×\(height), stride \(stride)"
                    )
                }
            }
        }
    }

    /// Every 8-bit predictor pattern of a step: rows of exactly one step (64 samples), row y ≥ 1 with pattern
    /// y − 1, random widths (all 8 in round 0); and rows of two such steps and a partial block.
    @Test(.enabled(if: runs, "the processor lacks AVX-512 VBMI, VBMI2 or GFNI"), arguments: [64, 131])
    func everyPredictorPattern(width: Int) throws {
        try #require(Self.available)
        var random = SplitMix(seed: UInt64(7200 + width))
        let height = 257
        let blocks = blockCount(width: width, height: height)
        let perRow = (width + 7) / 8
        for round in 0..<4 {
            var payload = Self.payload(width: width, height: height, w: round == 0 ? 8 : nil, random: &random)
            let bitsStart = (blocks + 1) / 2
            for y in 1..<height {
                for column in 0..<perRow {
                    let block = y * perRow + column
                    let left = (y - 1) >> (column % 8) & 1
                    payload[bitsStart + block / 8] &= ~(1 << (block % 8))
                    payload[bitsStart + block / 8] |= UInt8(left << (block % 8))
                }
            }
            let expected = try #require(KernelUnpackingTests.portable(payload, width: width, height: height))
            let plane = Self.decode(payload, width: width, height: height, stride: width + 2)
            KernelUnpackingTests.expectSame(
                plane,
                expected,
                width: width,
                height: height,
                stride: width + 2,
                "round \(round)"
            )
        }
    }

    /// Payloads cut at every length from 70 bytes short of their end (a shared payload rewritten shorter): no
    /// read past the end (the page after it is inaccessible), and the samples are those of the payload completed
    /// with zeros.
    @Test(.enabled(if: runs, "the processor lacks AVX-512 VBMI, VBMI2 or GFNI"), arguments: [64, 100, 517])
    func payloadsCutNearTheirEnd(width: Int) throws {
        try #require(Self.available)
        var random = SplitMix(seed: UInt64(7300 + width))
        let height = 3
        let full = Self.payload(width: width, height: height, w: nil, random: &random)
        let blocks = blockCount(width: width, height: height)
        let controlBytes = (blocks + 1) / 2 + (blocks + 7) / 8
        for cut in max(controlBytes, full.count - 70)...full.count {
            let completed = Array(full.prefix(cut)) + [UInt8](repeating: 0, count: full.count - cut)
            let expected = try #require(KernelUnpackingTests.portable(completed, width: width, height: height))
            let plane = Self.decode(Array(full.prefix(cut)), width: width, height: height, stride: width)
            KernelUnpackingTests.expectSame(plane, expected, width: width, height: height, stride: width, "cut \(cut)")
        }
    }

    /// Width nibbles of 9...15 (the decoder refuses them before any kernel runs; a kernel must still stay inside
    /// its memory): the payload ends before an inaccessible page and is shorter than the widths claim, and nothing
    /// beside the rows is written.
    @Test(.enabled(if: runs, "the processor lacks AVX-512 VBMI, VBMI2 or GFNI")) func wideNibblesStayInside()
        throws
    {
        try #require(Self.available)
        var random = SplitMix(seed: 7500)
        for (width, height) in [(64, 3), (131, 4), (517, 2), (2100, 2)] {
            let blocks = blockCount(width: width, height: height)
            let nibbles = (0..<(blocks + 1) / 2).map { _ in UInt8(truncatingIfNeeded: random.next()) | 0x99 }
            let bits = (0..<(blocks + 7) / 8).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let residuals = (0..<Int(random.next() % 200)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let stride = width + 3
            let plane = Self.decode(nibbles + bits + residuals, width: width, height: height, stride: stride)
            for y in 0..<height {
                #expect(plane[y * stride + width..<(y + 1) * stride].allSatisfy { $0 == 0xA5 }, "\(width): row \(y)")
            }
            #expect(plane[(stride * height)...].allSatisfy { $0 == 0xA5 }, "\(width): past the last row")
        }
    }

    /// Capacities one short (width nibbles, predictor bits, the plane), a stride below the width, a position past
    /// the payload: the call returns -1 and writes nothing.
    @Test(.enabled(if: runs, "the processor lacks AVX-512 VBMI, VBMI2 or GFNI")) func shortCapacitiesWriteNothing()
        throws
    {
        try #require(Self.available)
        var random = SplitMix(seed: 7400)
        let (width, height, stride) = (100, 4, 104)
        let payload = Self.payload(width: width, height: height, w: nil, random: &random)
        let blocks = blockCount(width: width, height: height)
        let nibbleBytes = (blocks + 1) / 2
        let bitBytes = (blocks + 7) / 8
        let controls = Array(payload.prefix(nibbleBytes + bitBytes)) + [UInt8](repeating: 0, count: 16)
        let planeBytes = (height - 1) * stride + width
        // (nibble capacity, bit capacity, plane capacity, stride, position)
        let cases: [(Int, Int, Int, Int, Int)] = [
            (nibbleBytes + 7, bitBytes + 8, planeBytes, stride, nibbleBytes + bitBytes),
            (nibbleBytes + 8, bitBytes + 7, planeBytes, stride, nibbleBytes + bitBytes),
            (nibbleBytes + 8, bitBytes + 8, planeBytes - 1, stride, nibbleBytes + bitBytes),
            (nibbleBytes + 8, bitBytes + 8, planeBytes, width - 1, nibbleBytes + bitBytes),
            (nibbleBytes + 8, bitBytes + 8, planeBytes, stride, payload.count + 1),
        ]
        for (index, (nibbleCapacity, bitCapacity, capacity, rowStride, position)) in cases.enumerated() {
            var plane = [UInt8](repeating: 0xA5, count: planeBytes + 64)
            let status = payload.withUnsafeBufferPointer { p in
                controls.withUnsafeBufferPointer { c in
                    plane.withUnsafeMutableBufferPointer { x in
                        csck_decode_packed8_avx2_unpacking(
                            p.baseAddress!,
                            p.count,
                            position,
                            c.baseAddress!,
                            nibbleCapacity,
                            c.baseAddress! + nibbleBytes,
                            bitCapacity,
                            width,
                            height,
                            x.baseAddress!,
                            capacity,
                            rowStride,
                            2
                        )
                    }
                }
            }
            #expect(status == -1, "case \(index)")
            #expect(plane.allSatisfy { $0 == 0xA5 }, "case \(index) wrote")
        }
        // The same arguments with every capacity right decode.
        var plane = [UInt8](repeating: 0xA5, count: planeBytes)
        let status = payload.withUnsafeBufferPointer { p in
            controls.withUnsafeBufferPointer { c in
                plane.withUnsafeMutableBufferPointer { x in
                    csck_decode_packed8_avx2_unpacking(
                        p.baseAddress!,
                        p.count,
                        nibbleBytes + bitBytes,
                        c.baseAddress!,
                        nibbleBytes + 8,
                        c.baseAddress! + nibbleBytes,
                        bitBytes + 8,
                        width,
                        height,
                        x.baseAddress!,
                        planeBytes,
                        stride,
                        2
                    )
                }
            }
        }
        #expect(status == 0)
        let expected = try #require(KernelUnpackingTests.portable(payload, width: width, height: height))
        for y in 0..<height {
            #expect(Array(plane[y * stride..<y * stride + width]) == Array(expected[y * width..<(y + 1) * width]))
        }
    }
}
#endif
