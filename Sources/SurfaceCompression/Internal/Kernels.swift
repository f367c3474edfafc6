import CSurfaceCodecKernels
import Glibc

/// The vector kernels of CSurfaceCodecKernels, chosen at run time. On x86-64: AVX2 where the processor has it,
/// else SSE4.1 where it has that (cpuid, checked once), else the portable Swift code. On arm64: NEON (baseline
/// there). Elsewhere: the portable Swift code. Every tier decodes and packs exactly the portable code's bytes.
///
/// The tier is chosen once per process (`selectedTier`); the environment variable `FRAMEBUS_CODEC_KERNELS`
/// (`avx2`, `sse41`, `neon` or `portable`, read once) picks a lower tier for measurements. Tests run a scope under
/// another available tier with `withTier(_:_:)`, which binds a task-local value and so cannot outlive the scope.
package enum Kernels {
    /// A set of kernels.
    package enum Tier: String, CaseIterable, Sendable {
        case avx2
        case sse41
        case neon
        case portable
    }

    /// The tiers this processor runs, best first; `.portable` always, last.
    package static let availableTiers: [Tier] = {
        #if arch(x86_64)
        var tiers: [Tier] = []
        if csck_cpu_has_avx2() != 0 { tiers.append(.avx2) }
        if csck_cpu_has_sse41() != 0 { tiers.append(.sse41) }
        return tiers + [.portable]
        #elseif arch(arm64)
        return [.neon, .portable]
        #else
        return [.portable]
        #endif
    }()

    /// Whether this processor runs the AVX2 kernels (cpuid, checked once); whether they are in use is `tier`.
    static var hasAVX2: Bool { availableTiers.contains(.avx2) }

    /// Whether the AVX2 tier's packed8 decoder runs its AVX-512 variant here (VBMI, VBMI2 and GFNI; chosen inside
    /// `csck_decode_packed8_avx2`), so that a benchmark can say which kernel it measured.
    package static let decodesPacked8WithAVX512: Bool = {
        #if arch(x86_64)
        return hasAVX2 && csck_cpu_has_avx512_packed8() != 0
        #else
        return false
        #endif
    }()

    /// Whether the AVX2 tier hashes payloads with AVX-512 here (F, DQ and VL: `vpmullq`, `vprolq`; see
    /// `csck_checksums_avx512`), eight payloads a step; otherwise the vector tiers hash two a step, scalar.
    package static let hashesWithAVX512: Bool = {
        #if arch(x86_64)
        return hasAVX2 && csck_cpu_has_avx512_checksums() != 0
        #else
        return false
        #endif
    }()

    /// The tier the codec uses: the best available one, unless `FRAMEBUS_CODEC_KERNELS` names another available
    /// one (a name that is not available here is ignored).
    package static let selectedTier: Tier = {
        if let name = unsafe getenv("FRAMEBUS_CODEC_KERNELS"), let tier = Tier(rawValue: unsafe String(cString: name)),
            availableTiers.contains(tier)
        {
            return tier
        }
        return availableTiers[0]
    }()

    /// A tier forced for the current task by `withTier(_:_:)` (tests), or nil.
    @TaskLocal static var forcedTier: Tier?

    /// The tier in effect here: the forced one within `withTier(_:_:)`, otherwise `selectedTier`.
    static var tier: Tier { forcedTier ?? selectedTier }

    /// Runs `body` with the codec's kernels forced to `tier`, which must be available. The tier is a task-local
    /// value: it holds for code `body` runs on its own thread or task, not on the codec's worker threads
    /// (libdispatch), which use `selectedTier`; tests call the component codec directly.
    static func withTier<Value>(_ tier: Tier, _ body: () throws -> Value) rethrows -> Value {
        precondition(availableTiers.contains(tier), "kernel tier \(tier) is not available here")
        return try $forcedTier.withValue(tier, operation: body)
    }

    /// Whether the tier in effect decodes packed8 straight into a plane (rows a stride apart, exactly the
    /// samples written): every vector tier does; the portable code writes whole blocks into contiguous rows.
    static var decodesStrided: Bool { tier != .portable }

    /// Bytes a kernel may read past the width nibbles and past the predictor bits (`CSCK_CONTROL_SLACK`).
    static let controlSlack = Int(CSCK_CONTROL_SLACK)

    /// Bytes a pack8 kernel may store past the payload it returns (`CSCK_PACK_SLACK`).
    static let packSlack = Int(CSCK_PACK_SLACK)

    /// The packed8 residual blocks with the tier in effect (see `csck_decode_packed8_avx2`), rows `rowStride`
    /// bytes apart. `nibbleCapacity` and `bitCapacity` are the readable bytes at `nibbles` and `bits`,
    /// `capacity` the writable bytes at `x`: the kernel checks them against what it reads and writes, and a
    /// refusal is a bug of the caller (a precondition failure here). Returns false, having done nothing, under the
    /// portable tier.
    static func decodePacked8(
        _ payload: UnsafeRawPointer,
        count: Int,
        position: Int,
        nibbles: UnsafePointer<UInt8>,
        nibbleCapacity: Int,
        bits: UnsafePointer<UInt8>,
        bitCapacity: Int,
        width: Int,
        height: Int,
        into x: UnsafeMutablePointer<UInt8>,
        capacity: Int,
        rowStride: Int
    ) -> Bool {
        let p = unsafe payload.assumingMemoryBound(to: UInt8.self)
        let status: Int32
        switch tier {
        #if arch(x86_64)
        case .avx2:
            status = unsafe csck_decode_packed8_avx2(
                p, count, position, nibbles, nibbleCapacity, bits, bitCapacity, width, height, x, capacity, rowStride
            )
        case .sse41:
            status = unsafe csck_decode_packed8_sse41(
                p, count, position, nibbles, nibbleCapacity, bits, bitCapacity, width, height, x, capacity, rowStride
            )
        #elseif arch(arm64)
        case .neon:
            status = unsafe csck_decode_packed8_neon(
                p, count, position, nibbles, nibbleCapacity, bits, bitCapacity, width, height, x, capacity, rowStride
            )
        #endif
        default:
            return false
        }
        precondition(status == 0, "packed8 kernel: capacities too small for \(width)×\(height)")
        return true
    }

    /// Whether the AVX2 tier checks packed8 width nibbles with AVX-512 here (F and BW; `csck_packed8_widths_avx512`).
    static let checksWidthsWithAVX512: Bool = {
        #if arch(x86_64)
        return hasAVX2 && csck_cpu_has_avx512bw() != 0
        #else
        return false
        #endif
    }()

    /// The sum of the 2 × `count` width nibbles at `nibbles` (private memory) and whether any exceeds 8, with
    /// AVX-512 under the AVX2 tier where the processor has it (`csck_packed8_widths_avx512`, 128 nibbles a step);
    /// nil otherwise, for the caller's portable loop (the reference, giving the same answer).
    static func packed8Widths(_ nibbles: UnsafePointer<UInt8>, count: Int) -> (total: Int, tooWide: Bool)? {
        #if arch(x86_64)
        guard tier == .avx2, checksWidthsWithAVX512 else { return nil }
        var total: UInt64 = 0
        let tooWide = unsafe csck_packed8_widths_avx512(nibbles, count, &total) != 0
        return (Int(truncatingIfNeeded: total), tooWide)
        #else
        return nil
        #endif
    }

    /// The packed10 residual blocks with the tier in effect (see `csck_decode_packed10_avx2`); `capacity` is in
    /// samples, the other capacities as for ``decodePacked8(_:count:position:nibbles:nibbleCapacity:bits:bitCapacity:width:height:into:capacity:rowStride:)``.
    /// Returns false, having done nothing, under the portable tier.
    static func decodePacked10(
        _ payload: UnsafeRawPointer,
        count: Int,
        position: Int,
        nibbles: UnsafePointer<UInt8>,
        nibbleCapacity: Int,
        bits: UnsafePointer<UInt8>,
        bitCapacity: Int,
        width: Int,
        height: Int,
        into x: UnsafeMutablePointer<UInt16>,
        capacity: Int
    ) -> Bool {
        let p = unsafe payload.assumingMemoryBound(to: UInt8.self)
        let status: Int32
        switch tier {
        #if arch(x86_64)
        case .avx2:
            status = unsafe csck_decode_packed10_avx2(
                p, count, position, nibbles, nibbleCapacity, bits, bitCapacity, width, height, x, capacity
            )
        case .sse41:
            status = unsafe csck_decode_packed10_sse41(
                p, count, position, nibbles, nibbleCapacity, bits, bitCapacity, width, height, x, capacity
            )
        #elseif arch(arm64)
        case .neon:
            status = unsafe csck_decode_packed10_neon(
                p, count, position, nibbles, nibbleCapacity, bits, bitCapacity, width, height, x, capacity
            )
        #endif
        default:
            return false
        }
        precondition(status == 0, "packed10 kernel: capacities too small for \(width)×\(height)")
        return true
    }

    /// Whether the tier in effect decodes packed10 straight into a plane (rows a stride apart, widths a multiple of
    /// 8, exactly the samples written): the AVX2 tier does; the others write contiguous rows.
    static var decodesStrided10: Bool { tier == .avx2 }

    /// ``decodePacked10(_:count:position:nibbles:nibbleCapacity:bits:bitCapacity:width:height:into:capacity:)`` with
    /// rows `rowStride` samples apart and `width` a multiple of 8 (see `csck_decode_packed10_avx2_strided`); the
    /// caller checks both and ``decodesStrided10`` (a refusal is a precondition failure). Returns false, having
    /// done nothing, under any other tier.
    static func decodePacked10(
        _ payload: UnsafeRawPointer,
        count: Int,
        position: Int,
        nibbles: UnsafePointer<UInt8>,
        nibbleCapacity: Int,
        bits: UnsafePointer<UInt8>,
        bitCapacity: Int,
        width: Int,
        height: Int,
        into x: UnsafeMutablePointer<UInt16>,
        capacity: Int,
        rowStride: Int
    ) -> Bool {
        #if arch(x86_64)
        guard tier == .avx2 else { return false }
        let status = unsafe csck_decode_packed10_avx2_strided(
            payload.assumingMemoryBound(to: UInt8.self),
            count,
            position,
            nibbles,
            nibbleCapacity,
            bits,
            bitCapacity,
            width,
            height,
            x,
            capacity,
            rowStride
        )
        precondition(status == 0, "packed10 kernel: \(width)×\(height) rows \(rowStride) apart do not fit")
        return true
        #else
        return false
        #endif
    }

    /// Chooses and packs the blocks of a packed8 payload with the tier in effect (see `csck_pack8_avx2`): sets
    /// `size` and `zeroBlocks`. `capacity` is the writable bytes at `out` (the kernel refuses less than the worst
    /// case plus ``packSlack``; a refusal is a precondition failure here). Returns false, having done nothing,
    /// under the portable tier.
    static func pack8(
        up: UnsafePointer<UInt8>,
        left: UnsafePointer<UInt8>,
        blockCount: Int,
        into out: UnsafeMutableRawPointer,
        capacity: Int,
        size: inout Int,
        zeroBlocks: inout Int
    ) -> Bool {
        let o = unsafe out.assumingMemoryBound(to: UInt8.self)
        var zeros = 0
        let written: Int
        switch tier {
        #if arch(x86_64)
        case .avx2:
            written = unsafe csck_pack8_avx2(up, left, blockCount, o, capacity, &zeros)
        case .sse41:
            written = unsafe csck_pack8_sse41(up, left, blockCount, o, capacity, &zeros)
        #elseif arch(arm64)
        case .neon:
            written = unsafe csck_pack8_neon(up, left, blockCount, o, capacity, &zeros)
        #endif
        default:
            return false
        }
        // CSCK_PACK_REFUSED (SIZE_MAX) comes back as -1: size_t is imported as Int.
        precondition(written >= 0, "pack8 kernel: capacity too small")
        size = written
        zeroBlocks = zeros
        return true
    }

    /// The checksums (docs/COMPRESSED-LAYOUT.md §8) of `count` payloads with one `seed`, into `hashes`, with the
    /// tier in effect: several payloads at once (`csck_checksums_avx512` under the AVX2 tier where AVX-512 runs,
    /// else `csck_checksums_scalar`, on x86-64). Each payload is read once and nowhere past its count. Returns
    /// false, having done nothing, under the portable tier and off x86-64 (``Checksum/hash(_:count:seed:)`` is the
    /// reference there).
    static func checksums(
        _ payloads: UnsafePointer<csck_payload>,
        count: Int,
        seed: UInt64,
        into hashes: UnsafeMutablePointer<UInt64>
    ) -> Bool {
        #if arch(x86_64)
        switch tier {
        case .avx2 where hashesWithAVX512:
            unsafe csck_checksums_avx512(payloads, count, seed, hashes)
        case .avx2, .sse41:
            unsafe csck_checksums_scalar(payloads, count, seed, hashes)
        default:
            return false
        }
        return true
        #else
        return false
        #endif
    }
}
