#if arch(x86_64)
import CSurfaceCodecKernels
import Foundation
import TestSupport
import Testing

@testable import SurfaceCompression

/// The AVX-512 check of a packed8 payload's width nibbles (`csck_packed8_widths_avx512`: their sum and whether any
/// exceeds 8, 128 nibbles a step, the rest masked) against the reference written out here: every byte count 0...300
/// and long ones, nibbles 0...8 at random, a nibble of 9...15 at every position of short runs (low and high
/// nibble), nibbles that end right before an inaccessible page; and the decoder's answer through it (a payload
/// with a wide nibble refused, one whose sizes do not add up refused, a good one decoded as the portable code
/// does). On a processor without AVX-512 BW these tests are skipped, saying so; with FRAMEBUS_REQUIRE_ALL=1 they
/// run and fail there.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct Packed8WidthsKernelTests {
    static let available = csck_cpu_has_avx512bw() != 0
    static let runs = available || ProcessInfo.processInfo.environment["FRAMEBUS_REQUIRE_ALL"] == "1"

    /// The reference: the sum of the low and high nibbles, and whether any is above 8.
    static func reference(_ bytes: [UInt8]) -> (total: UInt64, tooWide: Bool) {
        var total: UInt64 = 0
        var tooWide = false
        for byte in bytes {
            total += UInt64(byte & 15) + UInt64(byte >> 4)
            tooWide = tooWide || byte & 15 > 8 || byte >> 4 > 8
        }
        return (total, tooWide)
    }

    static func kernel(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> (total: UInt64, tooWide: Bool) {
        var total: UInt64 = 0xDEAD
        let wide = csck_packed8_widths_avx512(bytes, count, &total)
        return (total, wide != 0)
    }

    static func nibbles(_ count: Int, _ random: inout SplitMix) -> [UInt8] {
        (0..<count).map { _ in UInt8(random.next() % 9) | UInt8(random.next() % 9) << 4 }
    }

    @Test(.enabled(if: runs, "the processor lacks AVX-512 BW")) func everyCountAgreesWithTheReference() throws {
        try #require(Self.available, "FRAMEBUS_REQUIRE_ALL=1: AVX-512 F, BW and BMI2 are required")
        var random = SplitMix(seed: 8_801)
        for count in Array(0...300) + [4097, 65_536, 100_003] {
            let bytes = Self.nibbles(count, &random)
            let got = Self.kernel(bytes, count)
            let expected = Self.reference(bytes)
            #expect(got.total == expected.total && got.tooWide == expected.tooWide, "\(count) bytes")
            #expect(!got.tooWide, "\(count) bytes of nibbles 0...8")
        }
        // All eights: the largest valid sum, no nibble too wide.
        let eights = [UInt8](repeating: 0x88, count: 1000)
        let got = Self.kernel(eights, eights.count)
        #expect(got.total == 16_000 && !got.tooWide)
    }

    @Test(.enabled(if: runs, "the processor lacks AVX-512 BW")) func aWideNibbleAnywhereIsFound() throws {
        try #require(Self.available)
        var random = SplitMix(seed: 8_802)
        for count in [1, 2, 63, 64, 65, 127, 128, 130, 200] {
            for position in 0..<count {
                for high in [false, true] {
                    var bytes = Self.nibbles(count, &random)
                    let wide = UInt8(9 + random.next() % 7)
                    bytes[position] = high ? (bytes[position] & 0x0F) | wide << 4 : (bytes[position] & 0xF0) | wide
                    let got = Self.kernel(bytes, count)
                    let expected = Self.reference(bytes)
                    #expect(got.tooWide && got.total == expected.total, "\(count) bytes, nibble \(wide) at \(position)")
                }
            }
        }
        // Only the bytes counted are looked at: a wide nibble just past `count` is not seen.
        var bytes = Self.nibbles(100, &random)
        bytes[70] = 0xFF
        #expect(!Self.kernel(bytes, 70).tooWide)
        #expect(Self.kernel(bytes, 71).tooWide)
    }

    @Test(.enabled(if: runs, "the processor lacks AVX-512 BW")) func noReadPastTheNibbles() throws {
        try #require(Self.available)
        var random = SplitMix(seed: 8_803)
        for count in Array(0...130) + [4097] {
            let bytes = Self.nibbles(count, &random)
            let fenced = ChecksumKernelTests.Fenced(bytes)
            let got = Self.kernel(fenced.start.assumingMemoryBound(to: UInt8.self), count)
            let expected = Self.reference(bytes)
            #expect(got.total == expected.total && got.tooWide == expected.tooWide, "\(count) bytes")
            withExtendedLifetime(fenced) {}
        }
    }

    /// Through the decoder under the AVX2 tier (which checks the widths with this kernel) and the portable one
    /// (the Swift loop): the same verdicts and, where decoded, the same samples.
    @Test(.enabled(if: runs, "the processor lacks AVX-512 BW")) func theDecoderJudgesAsThePortableCode() throws {
        try #require(Self.available && Kernels.availableTiers.contains(.avx2))
        try #require(Kernels.checksWidthsWithAVX512)
        var random = SplitMix(seed: 8_804)
        let width = 200
        let height = 6
        let blocks = blockCount(width: width, height: height)
        for trial in 0..<60 {
            var payload = AVX512Packed8KernelTests.payload(width: width, height: height, w: nil, random: &random)
            switch trial % 3 {
            case 1:
                // A nibble above 8 somewhere (the sum still matching would not save it).
                let block = Int(random.next() % UInt64(blocks))
                let shift = 4 * (block % 2)
                payload[block / 2] = (payload[block / 2] & ~(15 << shift)) | UInt8(9 + random.next() % 7) << shift
            case 2:
                // One residual byte too many or too few.
                if random.next() % 2 == 0 { payload.append(0) } else { payload.removeLast() }
            default:
                break
            }
            func decode(_ tier: Kernels.Tier) -> (Bool, [UInt8]) {
                Kernels.withTier(tier) {
                    var controls = [UInt8](repeating: 0, count: blocks + 64)
                    var x = [UInt8](repeating: 0x5A, count: width * height + 16)
                    let ok = payload.withUnsafeBytes { p in
                        controls.withUnsafeMutableBufferPointer { c in
                            x.withUnsafeMutableBufferPointer { out in
                                ComponentCodec.decodePacked8(
                                    p.baseAddress!,
                                    count: p.count,
                                    width: width,
                                    height: height,
                                    controls: c.baseAddress!,
                                    controlsCapacity: c.count,
                                    into: out.baseAddress!,
                                    capacity: out.count
                                )
                            }
                        }
                    }
                    return (ok, Array(x.prefix(width * height)))
                }
            }
            let vector = decode(.avx2)
            let portable = decode(.portable)
            #expect(vector.0 == portable.0, "trial \(trial)")
            #expect(vector.0 == (trial % 3 == 0), "trial \(trial)")
            if vector.0 && portable.0 { #expect(vector.1 == portable.1, "trial \(trial)") }
        }
    }
}
#endif
