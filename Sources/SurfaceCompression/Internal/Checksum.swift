import CSurfaceCodecKernels

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

    /// The checksums of `count` payloads with one `seed` into `hashes[0..<count]`: for each, the value of
    /// ``hash(_:count:seed:)``. Several payloads at once with the kernels of the tier in effect (``Kernels``): one
    /// payload is a chain of dependent multiplies, several are independent chains. Each payload is read once,
    /// nowhere past its count.
    static func hash(
        _ payloads: UnsafePointer<csck_payload>,
        count: Int,
        seed: UInt64 = 0,
        into hashes: UnsafeMutablePointer<UInt64>
    ) {
        if unsafe Kernels.checksums(payloads, count: count, seed: seed, into: hashes) { return }
        for i in 0..<count {
            unsafe hashes[i] = hash(payloads[i].bytes, count: payloads[i].count, seed: seed)
        }
    }
}

/// A decoding worker's payload checksums, computed ahead for several entries at once and then checked one by one
/// as ``TileCodec/decodeTile(_:tile:entries:from:scratch:stride:into:checksums:inner:)`` reaches each entry, so
/// that every verdict and error is the one of checking that payload right before decoding it.
///
/// A batch is the next entries of the worker's tiles (at most ``capacity``, about ``batchByteCount`` bytes of
/// payloads: what is about to be decoded, so that the payloads are still in the cache when they are): hashing them
/// together is several times faster than one after another. Each payload is read once for its hash, within the
/// validated entry's bounds, as before; like before, the decoder reads it again to decode it.
///
/// @safe: its pointers are the stack memory of ``withChecksums(verifies:limit:_:)``, whose body borrows the value
/// (noncopyable, it cannot be kept), and the surface's payloads within validated entries.
@safe struct PayloadChecksums: ~Copyable {
    /// Entries in one batch at most.
    static let capacity = 32
    /// Payload bytes a batch stops at (once it has an entry).
    static let batchByteCount = 192 << 10

    /// Whether payload checksums are checked at all (`verifiesChecksums`).
    let verifies: Bool
    /// The end of the entries this worker decodes (its last tile's end): a batch stops there.
    private let limit: Int
    private let payloads: UnsafeMutablePointer<csck_payload>
    private let hashes: UnsafeMutablePointer<UInt64>
    /// The entries whose checksums are in `hashes` (from `first`).
    private var first = 0
    private var end = 0

    private init(
        verifies: Bool,
        limit: Int,
        payloads: UnsafeMutablePointer<csck_payload>,
        hashes: UnsafeMutablePointer<UInt64>
    ) {
        self.verifies = verifies
        self.limit = limit
        unsafe self.payloads = payloads
        unsafe self.hashes = hashes
    }

    /// Runs `body` with the checksums of a worker that decodes entries up to `limit` (exclusive), in memory that
    /// lives for the call (on the stack).
    static func withChecksums<Result>(
        verifies: Bool,
        limit: Int,
        _ body: (inout PayloadChecksums) -> Result
    ) -> Result {
        unsafe withUnsafeTemporaryAllocation(of: csck_payload.self, capacity: capacity) { payloads in
            unsafe withUnsafeTemporaryAllocation(of: UInt64.self, capacity: capacity) { hashes in
                var checksums = unsafe PayloadChecksums(
                    verifies: verifies,
                    limit: limit,
                    payloads: payloads.baseAddress!,
                    hashes: hashes.baseAddress!
                )
                return body(&checksums)
            }
        }
    }

    /// The computed checksum of the payload of entry `index` (< the limit), hashing a batch from it on when this
    /// entry is not in the current one. `entries` are the validated entries; `p` the surface.
    mutating func checksum(
        ofEntry index: Int,
        entries: UnsafeBufferPointer<TileCodec.Entry>,
        surface p: UnsafeRawPointer
    ) -> UInt64 {
        if index < first || index >= end {
            var count = 0
            var bytes = 0
            while index + count < limit, count < Self.capacity {
                let e = unsafe entries[index + count]
                guard count == 0 || bytes + e.byteCount <= Self.batchByteCount else { break }
                unsafe payloads[count] = csck_payload(
                    bytes: (p + e.offset).assumingMemoryBound(to: UInt8.self),
                    count: e.byteCount
                )
                bytes += e.byteCount
                count += 1
            }
            unsafe Checksum.hash(payloads, count: count, into: hashes)
            first = index
            end = index + count
        }
        return unsafe hashes[index - first]
    }
}
