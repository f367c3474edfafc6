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

    /// The packed8 residual blocks with AVX2 (see `csck_decode_packed8_avx2`). Returns false, having done
    /// nothing, where AVX2 is not available.
    static func decodePacked8(
        _ payload: UnsafeRawPointer,
        count: Int,
        position: Int,
        nibbles: UnsafePointer<UInt8>,
        bits: UnsafePointer<UInt8>,
        width: Int,
        height: Int,
        into x: UnsafeMutablePointer<UInt8>
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
            x
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
}
