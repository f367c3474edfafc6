/// A fast non-cryptographic 64-bit checksum for detecting damaged surfaces (docs/COMPRESSED-LAYOUT.md §8).
///
/// Four independent lanes each take 8 bytes per step: `lane = rotl((lane ^ word) * K, 31)`. Every step is a
/// bijection of the lane state, and the final fold is a bijection of each lane given the others, so any change
/// confined to one 8-byte word (in particular any single bit flip) always changes the 64-bit result; other
/// changes go unnoticed with probability about 2^-64. Layout version 2 stores all 64 bits of each payload's
/// checksum, so that guarantee holds for payloads; version 1 stored only the low 32 bits, which misses any
/// change with probability about 2^-32. It detects accidents, not malice: a writer can recompute it.
enum Checksum {
    private static let k0: UInt64 = 0x9E37_79B9_7F4A_7C15
    private static let k1: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private static let k2: UInt64 = 0x1656_67B1_9E37_79F9
    private static let k3: UInt64 = 0x85EB_CA77_C2B2_AE63

    @inline(__always)
    private static func step(_ lane: UInt64, _ word: UInt64, _ k: UInt64) -> UInt64 {
        let x = (lane ^ word) &* k
        return (x &<< 31) | (x &>> 33)
    }

    @inline(__always)
    private static func fold(_ x: UInt64) -> UInt64 {
        var h = x
        h ^= h &>> 33
        h = h &* 0xFF51_AFD7_ED55_8CCD
        h ^= h &>> 33
        return h
    }

    static func hash(_ bytes: UnsafeRawPointer, count: Int, seed: UInt64 = 0) -> UInt64 {
        var a = seed ^ k0
        var b = seed ^ k1
        var c = seed ^ k2
        var d = seed ^ k3
        var i = 0
        while i + 32 <= count {
            a = step(a, unsafe bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self), k0)
            b = step(b, unsafe bytes.loadUnaligned(fromByteOffset: i + 8, as: UInt64.self), k1)
            c = step(c, unsafe bytes.loadUnaligned(fromByteOffset: i + 16, as: UInt64.self), k2)
            d = step(d, unsafe bytes.loadUnaligned(fromByteOffset: i + 24, as: UInt64.self), k3)
            i += 32
        }
        while i + 8 <= count {
            a = step(a, unsafe bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self), k0)
            i += 8
        }
        if i < count {
            var tail: UInt64 = 0
            var shift: UInt64 = 0
            while i < count {
                tail |= UInt64(unsafe bytes.load(fromByteOffset: i, as: UInt8.self)) &<< shift
                shift += 8
                i += 1
            }
            b = step(b, tail, k1)
        }
        return fold(a) ^ fold(b &+ 1) ^ fold(c &+ 2) ^ fold(d &+ 3) ^ UInt64(count)
    }
}
