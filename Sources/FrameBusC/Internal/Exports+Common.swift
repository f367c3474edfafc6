import CFrameBusABI
import FrameBus

// The C ABI's general functions; include/framebus.h documents each (names and contracts are the header's).

/// `fb_abi_version`.
@_cdecl("fb_abi_version")
public func fbABIVersion() -> UInt32 {
    UInt32(FB_ABI_VERSION)
}

/// `fb_status_name`: a static string, never NULL.
@_cdecl("fb_status_name")
public func fbStatusName(_ status: fb_status) -> UnsafePointer<CChar> {
    let name: StaticString = ABIStatus(rawValue: status)?.name ?? "unknown"
    // SAFETY: a StaticString's bytes are immortal, NUL-terminated constant data.
    return unsafe UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)
}

/// `fb_format_get_info`.
@_cdecl("fb_format_get_info")
public func fbFormatGetInfo(
    _ code: UInt32,
    _ info: UnsafeMutablePointer<fb_format_info>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        guard let info = unsafe info else { throw .null("info", in: "fb_format_get_info") }
        let format = try callerFormat(code, "fb_format_get_info")
        var result = fb_format_info()
        result.format = format.fourCC
        result.base_format = format.base.fourCC
        result.compressed_format = format.base.compressedVariant?.fourCC ?? format.fourCC
        result.drm_fourcc = format.base.drmFourCC
        result.plane_count = format.isCompressed ? 0 : UInt32(format.planes.count)
        result.bit_depth = UInt32(format.bitDepth)
        result.is_full_range = format.range == .full ? 1 : 0
        result.is_compressed = format.isCompressed ? 1 : 0
        let planes = format.base.planes.prefix(Int(FB_MAX_PLANES))
        unsafe withUnsafeMutableBytes(of: &result.horizontal_subsampling) { bytes in
            for (index, plane) in planes.enumerated() {
                unsafe bytes.storeBytes(
                    of: UInt32(plane.horizontalSubsampling),
                    toByteOffset: index * 4,
                    as: UInt32.self
                )
            }
        }
        unsafe withUnsafeMutableBytes(of: &result.vertical_subsampling) { bytes in
            for (index, plane) in planes.enumerated() {
                unsafe bytes.storeBytes(of: UInt32(plane.verticalSubsampling), toByteOffset: index * 4, as: UInt32.self)
            }
        }
        unsafe withUnsafeMutableBytes(of: &result.bytes_per_element) { bytes in
            for (index, plane) in planes.enumerated() {
                unsafe bytes.storeBytes(of: UInt32(plane.bytesPerElement), toByteOffset: index * 4, as: UInt32.self)
            }
        }
        unsafe info.pointee = result
    }
}
