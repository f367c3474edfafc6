import CSurfaceCodecKernels
import Testing

/// The chroma interleave kernels a 4:2:0 decode ends with (every Cb, Cr pair of a tile row into the CbCr plane): for
/// every count from 0 to 100 (the vector steps of 32 or 16 and the scalar tail), every byte is the reference's and
/// nothing is written past the row. Milliseconds of work, so not `.heavyWork`: queued behind the codec suites on that
/// executor's two threads, it used to spend its whole time limit waiting for one.
@Suite(.timeLimit(.minutes(1))) struct ChromaInterleaveKernelTests {
    @Test func eightBitPairsInterleaveExactly() {
        var random = SplitMix(seed: 31)
        for count in 0...100 {
            let cb = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let cr = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            var output = [UInt8](repeating: 0xA5, count: 2 * count + 16)
            output.withUnsafeMutableBufferPointer { out in
                csck_interleave_cbcr8(cb, cr, count, out.baseAddress!)
            }
            let expected = zip(cb, cr).flatMap { [$0, $1] } + [UInt8](repeating: 0xA5, count: 16)
            #expect(output == expected, "\(count) pairs")
        }
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
