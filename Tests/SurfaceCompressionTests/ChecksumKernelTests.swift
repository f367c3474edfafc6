import CSurfaceCodecKernels
import Foundation
import Glibc
import TestSupport
import Testing

@testable import SurfaceCompression

/// The multi-payload checksum kernels (`csck_checksums_avx512`, `csck_checksums_scalar`, and `Checksum.hash` over
/// several payloads under every tier) against the Swift reference `Checksum.hash`, value for value: every length
/// 0...300 and large ones, alone and many in one call (more than a group of 64), payloads of mixed lengths (empty,
/// under a word, under a stripe, long) at unaligned starts, several seeds, and payloads that end right before an
/// inaccessible page (no read past a payload's count). On a processor without AVX-512 F, DQ and VL the AVX-512
/// tests are skipped, saying so; with FRAMEBUS_REQUIRE_ALL=1 they run and fail there.
@Suite(.heavyWork, .timeLimit(.minutes(10))) struct ChecksumKernelTests {
    static let avx512 = csck_cpu_has_avx512_checksums() != 0
    static let required = ProcessInfo.processInfo.environment["FRAMEBUS_REQUIRE_ALL"] == "1"
    static let runsAVX512 = avx512 || required

    static let seeds: [UInt64] = [0, 1, 0x9E37_79B9_7F4A_7C15, ~0]

    /// A kernel under test.
    enum Kernel: CaseIterable, CustomStringConvertible {
        case avx512
        case scalar
        /// `Checksum.hash` over several payloads under each available tier.
        case dispatched

        var description: String {
            switch self {
            case .avx512: "avx512"
            case .scalar: "scalar"
            case .dispatched: "dispatched"
            }
        }
    }

    /// The kernels tested here: the AVX-512 one where it runs or is required (where it is required and does not
    /// run, its tests fail on `requireRuns`).
    static let kernels: [Kernel] = runsAVX512 ? Kernel.allCases : [.scalar, .dispatched]

    static func requireRuns(_ kernel: Kernel) throws {
        if kernel == .avx512 { try #require(avx512, "FRAMEBUS_REQUIRE_ALL=1: AVX-512 F, DQ and VL are required") }
    }

    /// The hashes `kernel` gives for `payloads` (pointer, count) with `seed`: under `.dispatched`, the hashes of
    /// every tier, which must agree (the first is returned; a disagreement is recorded).
    static func hashes(_ kernel: Kernel, _ payloads: [(UnsafeRawPointer, Int)], seed: UInt64) -> [UInt64] {
        let list = payloads.map { csck_payload(bytes: $0.0.assumingMemoryBound(to: UInt8.self), count: $0.1) }
        func run(_ body: (UnsafePointer<csck_payload>, UnsafeMutablePointer<UInt64>) -> Void) -> [UInt64] {
            var out = [UInt64](repeating: 0xDEAD, count: list.count)
            list.withUnsafeBufferPointer { p in
                out.withUnsafeMutableBufferPointer { h in
                    // An empty list still needs valid pointers.
                    withUnsafeTemporaryAllocation(of: csck_payload.self, capacity: 1) { one in
                        withUnsafeTemporaryAllocation(of: UInt64.self, capacity: 1) { none in
                            body(p.baseAddress ?? UnsafePointer(one.baseAddress!), h.baseAddress ?? none.baseAddress!)
                        }
                    }
                }
            }
            return out
        }
        switch kernel {
        case .avx512:
            #if arch(x86_64)
            return run { csck_checksums_avx512($0, list.count, seed, $1) }
            #else
            return []
            #endif
        case .scalar:
            return run { csck_checksums_scalar($0, list.count, seed, $1) }
        case .dispatched:
            let results = Kernels.availableTiers.map { tier in
                Kernels.withTier(tier) { run { Checksum.hash($0, count: list.count, seed: seed, into: $1) } }
            }
            for (tier, result) in zip(Kernels.availableTiers, results) where result != results[0] {
                Issue.record("tier \(tier) hashes differently from \(Kernels.availableTiers[0])")
            }
            return results[0]
        }
    }

    static func reference(_ payloads: [(UnsafeRawPointer, Int)], seed: UInt64) -> [UInt64] {
        payloads.map { Checksum.hash($0.0, count: $0.1, seed: seed) }
    }

    static func randomBytes(_ count: Int, _ random: inout SplitMix) -> [UInt8] {
        (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    @Test(.enabled(if: runsAVX512, "the processor lacks AVX-512 F, DQ or VL")) func theProcessorRunsIt() throws {
        try #require(Self.avx512, "FRAMEBUS_REQUIRE_ALL=1: AVX-512 F, DQ and VL are required")
        #expect(Kernels.hashesWithAVX512 == Kernels.availableTiers.contains(.avx2))
    }

    /// The reference itself against H written out from docs/COMPRESSED-LAYOUT.md §8 a word at a time (lengths that
    /// end in each part: empty, a partial word, a word, partial stripes, whole stripes), so that the kernels are
    /// compared with the layout's function.
    @Test func theReferenceIsTheLayoutsFunction() {
        let bytes = (0..<100).map { UInt8($0) }
        let values = bytes.withUnsafeBytes { b in
            [0, 7, 8, 31, 32, 100].map { Checksum.hash(b.baseAddress!, count: $0) }
        }
        // Recompute from the §8 definition, step by step, independently of Checksum.swift's code.
        func h(_ n: Int) -> UInt64 {
            let k: [UInt64] = [
                0x9E37_79B9_7F4A_7C15, 0xC2B2_AE3D_27D4_EB4F, 0x1656_67B1_9E37_79F9, 0x85EB_CA77_C2B2_AE63,
            ]
            var lane = k
            func word(_ at: Int, _ count: Int) -> UInt64 {
                (0..<count).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
            }
            func step(_ l: Int, _ w: UInt64) {
                let x = (lane[l] ^ w) &* k[l]
                lane[l] = x << 31 | x >> 33
            }
            var i = 0
            while i + 32 <= n {
                for l in 0..<4 { step(l, word(i + 8 * l, 8)) }
                i += 32
            }
            while i + 8 <= n {
                step(0, word(i, 8))
                i += 8
            }
            if i < n { step(1, word(i, n - i)) }
            func fold(_ x: UInt64) -> UInt64 {
                var v = x ^ x >> 33
                v = v &* 0xFF51_AFD7_ED55_8CCD
                return v ^ v >> 33
            }
            return fold(lane[0]) ^ fold(lane[1] &+ 1) ^ fold(lane[2] &+ 2) ^ fold(lane[3] &+ 3) ^ UInt64(n)
        }
        #expect(values == [0, 7, 8, 31, 32, 100].map(h))
    }

    /// Every length 0...300 and some large ones (a few MiB: millions of stripes), each alone, then all in one call
    /// (over 300 payloads: more than one group of 64), with four seeds.
    @Test(arguments: kernels) func everyLengthMatchesTheReference(_ kernel: Kernel) throws {
        try Self.requireRuns(kernel)
        var random = SplitMix(seed: 16_001)
        let lengths = Array(0...300) + [1023, 4096, 65_537, 3 << 20 | 13]
        let bytes = Self.randomBytes(lengths.max()! + 64, &random)
        try bytes.withUnsafeBytes { b in
            for seed in Self.seeds {
                for n in lengths {
                    let one = [(b.baseAddress! + (n % 7), n)]
                    #expect(Self.hashes(kernel, one, seed: seed) == Self.reference(one, seed: seed), "\(n) bytes")
                }
                // Every payload starts elsewhere, so the payloads are different bytes.
                let all = lengths.enumerated().map { (b.baseAddress! + ($0.offset * 13) % 64, $0.element) }
                let got = Self.hashes(kernel, all, seed: seed)
                let expected = Self.reference(all, seed: seed)
                try #require(got.count == expected.count)
                for i in all.indices where got[i] != expected[i] {
                    Issue.record("\(kernel): payload \(i) of \(all[i].1) bytes in one call, seed \(seed)")
                }
            }
        }
    }

    /// 1...80 payloads of random lengths in one call (empty, under a word, under a stripe, up to 40 000 bytes),
    /// each at a random, mostly unaligned start; equal lengths too (slots that finish together).
    @Test(arguments: kernels) func payloadsOfMixedLengthsInOneCall(_ kernel: Kernel) throws {
        try Self.requireRuns(kernel)
        var random = SplitMix(seed: 16_002)
        let bytes = Self.randomBytes(1 << 20, &random)
        bytes.withUnsafeBytes { b in
            for n in Array(1...80) + [130, 200] {
                let payloads: [(UnsafeRawPointer, Int)] = (0..<n).map { _ in
                    let count: Int
                    switch random.next() % 6 {
                    case 0: count = Int(random.next() % 8)
                    case 1: count = Int(random.next() % 32)
                    case 2: count = 32 * Int(random.next() % 40)  // whole stripes: slots that finish together
                    case 3: count = Int(random.next() % 40_000)
                    default: count = Int(random.next() % 3000)
                    }
                    return (b.baseAddress! + Int(random.next() % UInt64(b.count - count)), count)
                }
                let seed = Self.seeds[n % Self.seeds.count]
                let got = Self.hashes(kernel, payloads, seed: seed)
                let expected = Self.reference(payloads, seed: seed)
                for i in payloads.indices where got[i] != expected[i] {
                    Issue.record("\(kernel): \(n) payloads, payload \(i) of \(payloads[i].1) bytes")
                }
            }
        }
    }

    /// A copy of `bytes` that ends where an inaccessible page begins.
    final class Fenced {
        let mapping: UnsafeMutableRawPointer
        let mappedBytes: Int
        let start: UnsafeMutableRawPointer
        let count: Int
        init(_ bytes: [UInt8]) {
            count = bytes.count
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            let pages = (bytes.count + page - 1) / page + 1
            mappedBytes = (pages + 1) * page
            mapping = mmap(nil, mappedBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
            mprotect(mapping + pages * page, page, PROT_NONE)
            start = mapping + pages * page - bytes.count
            bytes.withUnsafeBytes { start.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        }
        deinit { munmap(mapping, mappedBytes) }
    }

    /// Payloads that each end right before an inaccessible page, hashed together: a read past any payload's count
    /// faults (every length 0...100, so every remainder after the stripes and words, and some long ones).
    @Test(arguments: kernels) func noReadPastAPayload(_ kernel: Kernel) throws {
        try Self.requireRuns(kernel)
        var random = SplitMix(seed: 16_003)
        let fences = (Array(0...100) + [255, 4097, 40_000]).map { Fenced(Self.randomBytes($0, &random)) }
        let payloads = fences.map { (UnsafeRawPointer($0.start), $0.count) }
        #expect(Self.hashes(kernel, payloads, seed: 3) == Self.reference(payloads, seed: 3))
        for payload in payloads {
            #expect(Self.hashes(kernel, [payload], seed: 0) == Self.reference([payload], seed: 0))
        }
        withExtendedLifetime(fences) {}
    }
}
