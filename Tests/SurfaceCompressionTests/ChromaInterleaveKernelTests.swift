import CSurfaceCodecKernels
import Foundation
import TestSupport
import Testing

/// The chroma interleave kernels a 4:2:0 decode ends with (every Cb, Cr pair of a tile row into the CbCr plane): for
/// every count from 0 to 300 (the AVX-512 steps of 64 and its masked rest, the SSE2 steps of 32 or 16 and the scalar
/// tail), every byte is the reference's and nothing is written before or past the row; the AVX-512 path reads nothing
/// past its inputs (they end right before an inaccessible page). The 8-bit interleave runs both ways
/// (`csck_interleave_cbcr8_using`: AVX-512 where the processor has it, SSE2) and as dispatched. Milliseconds of work,
/// so not `.heavyWork`: queued behind the codec suites on that executor's two threads, it used to spend its whole time
/// limit waiting for one.
@Suite(.timeLimit(.minutes(1))) struct ChromaInterleaveKernelTests {
    /// The 8-bit interleave under test: 0 SSE2, 1 AVX-512 (SSE2 where the processor lacks it), 2 as dispatched.
    static func interleave8(
        _ path: Int,
        _ cb: UnsafePointer<UInt8>,
        _ cr: UnsafePointer<UInt8>,
        _ count: Int,
        _ out: UnsafeMutablePointer<UInt8>
    ) {
        if path == 2 {
            csck_interleave_cbcr8(cb, cr, count, out)
        } else {
            csck_interleave_cbcr8_using(cb, cr, count, out, Int32(path))
        }
    }

    @Test(arguments: [0, 1, 2]) func eightBitPairsInterleaveExactly(path: Int) {
        var random = SplitMix(seed: 31)
        for count in 0...300 {
            let cb = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let cr = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            // 16 sentinel bytes before the row (an odd start, so the stores are unaligned) and 80 after it.
            var output = [UInt8](repeating: 0xA5, count: 17 + 2 * count + 80)
            output.withUnsafeMutableBufferPointer { out in
                Self.interleave8(path, cb, cr, count, out.baseAddress! + 17)
            }
            let sentinel = [UInt8](repeating: 0xA5, count: 17)
            let expected = sentinel + zip(cb, cr).flatMap { [$0, $1] } + [UInt8](repeating: 0xA5, count: 80)
            #expect(output == expected, "path \(path): \(count) pairs")
        }
    }

    /// Inputs that end right before an inaccessible page: a read past `count` bytes of Cb or Cr faults.
    @Test(arguments: [0, 1, 2]) func noReadPastTheInputs(path: Int) {
        var random = SplitMix(seed: 33)
        for count in Array(0...130) + [255, 4097] {
            let cb = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let cr = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let fencedCb = ChecksumKernelTests.Fenced(cb)
            let fencedCr = ChecksumKernelTests.Fenced(cr)
            var output = [UInt8](repeating: 0, count: 2 * count)
            output.withUnsafeMutableBufferPointer { out in
                Self.interleave8(
                    path,
                    fencedCb.start.assumingMemoryBound(to: UInt8.self),
                    fencedCr.start.assumingMemoryBound(to: UInt8.self),
                    count,
                    out.baseAddress!
                )
            }
            #expect(output == zip(cb, cr).flatMap { [$0, $1] }, "path \(path): \(count) pairs")
            withExtendedLifetime((fencedCb, fencedCr)) {}
        }
    }

    static let avx512 = csck_cpu_has_avx512_interleave() != 0
    static let runsAVX512 = avx512 || ProcessInfo.processInfo.environment["FRAMEBUS_REQUIRE_ALL"] == "1"

    /// Where the processor lacks AVX-512 VBMI this is skipped, saying so (path 1 above is then SSE2 again); with
    /// FRAMEBUS_REQUIRE_ALL=1 it runs and fails there.
    @Test(.enabled(if: runsAVX512, "the processor lacks AVX-512 VBMI")) func theProcessorRunsTheAVX512Interleave()
        throws
    {
        try #require(Self.avx512, "FRAMEBUS_REQUIRE_ALL=1: AVX-512 F, BW, VBMI and BMI2 are required")
    }

    @Test func sixteenBitPairsInterleaveExactly() {
        var random = SplitMix(seed: 32)
        for count in 0...100 {
            let cb = (0..<count).map { _ in UInt16(truncatingIfNeeded: random.next()) }
            let cr = (0..<count).map { _ in UInt16(truncatingIfNeeded: random.next()) }
            var output = [UInt16](repeating: 0xA5A5, count: 2 * count + 8)
            output.withUnsafeMutableBufferPointer { out in
                csck_interleave_cbcr16(cb, cr, count, out.baseAddress!)
            }
            let expected = zip(cb, cr).flatMap { [$0, $1] } + [UInt16](repeating: 0xA5A5, count: 8)
            #expect(output == expected, "\(count) pairs")
        }
    }
}
