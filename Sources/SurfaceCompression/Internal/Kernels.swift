import CSurfaceCodecKernels

/// The vector kernels of CSurfaceCodecKernels, chosen at run time: AVX2 where the processor has it, otherwise
/// the portable Swift code (the kernels are not built for other architectures).
enum Kernels {
    /// Whether the AVX2 kernels can run here (cpuid, checked once).
    static let hasAVX2: Bool = {
        #if arch(x86_64)
        return csck_cpu_has_avx2() != 0
        #else
        return false
        #endif
    }()

    /// The packed8 residual blocks with AVX2 (see `csck_decode_packed8_avx2`), rows `rowStride` bytes apart.
    /// Returns false, having done nothing, where AVX2 is not available.
    static func decodePacked8(
        _ payload: UnsafeRawPointer,
        count: Int,
        position: Int,
        nibbles: UnsafePointer<UInt8>,
        bits: UnsafePointer<UInt8>,
        width: Int,
        height: Int,
        into x: UnsafeMutablePointer<UInt8>,
        rowStride: Int
    ) -> Bool {
        #if arch(x86_64)
        guard hasAVX2 else { return false }
        unsafe csck_decode_packed8_avx2(
            payload.assumingMemoryBound(to: UInt8.self),
            count,
            position,
            nibbles,
            bits,
            width,
            height,
            x,
            rowStride
        )
        return true
        #else
        return false
        #endif
    }

    /// The packed10 residual blocks with AVX2 (see `csck_decode_packed10_avx2`). Returns false, having done
    /// nothing, where AVX2 is not available.
    static func decodePacked10(
        _ payload: UnsafeRawPointer,
        count: Int,
        position: Int,
        nibbles: UnsafePointer<UInt8>,
        bits: UnsafePointer<UInt8>,
        width: Int,
        height: Int,
        into x: UnsafeMutablePointer<UInt16>
    ) -> Bool {
        #if arch(x86_64)
        guard hasAVX2 else { return false }
        unsafe csck_decode_packed10_avx2(
            payload.assumingMemoryBound(to: UInt8.self),
            count,
            position,
            nibbles,
            bits,
            width,
            height,
            x
        )
        return true
        #else
        return false
        #endif
    }

    /// Chooses and packs the blocks of a packed8 payload with AVX2 (see `csck_pack8_avx2`): sets `size` and
    /// `zeroBlocks`. Returns false, having done nothing, where AVX2 is not available.
    static func pack8(
        up: UnsafePointer<UInt8>,
        left: UnsafePointer<UInt8>,
        blockCount: Int,
        into out: UnsafeMutableRawPointer,
        size: inout Int,
        zeroBlocks: inout Int
    ) -> Bool {
        #if arch(x86_64)
        guard hasAVX2 else { return false }
        var zeros = 0
        size = unsafe csck_pack8_avx2(up, left, blockCount, out.assumingMemoryBound(to: UInt8.self), &zeros)
        zeroBlocks = zeros
        return true
        #else
        return false
        #endif
    }
}
