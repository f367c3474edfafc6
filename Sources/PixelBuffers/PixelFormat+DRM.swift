extension PixelFormat {
    /// The display name of the format's DRM fourcc, e.g. `"NV12"`, spelled as libdrm's `drmGetFormatName` spells it.
    public var drmFormatName: String { Self.drmFormatName(drmFourCC) }

    /// The display name of any DRM fourcc (`drm_fourcc.h`), spelled as libdrm's `drmGetFormatName` spells it,
    /// without linking libdrm.
    ///
    /// The four characters in memory order (little-endian), trailing spaces removed; `_BE` appended when
    /// `DRM_FORMAT_BIG_ENDIAN` (bit 31) is set; `"INVALID"` for `DRM_FORMAT_INVALID` (0). A code whose characters
    /// are not printable ASCII is shown in hexadecimal.
    ///
    /// - Parameter code: A DRM fourcc.
    /// - Returns: The name, for example `"NV12"`, `"AR24"` or `"RG16_BE"`.
    public static func drmFormatName(_ code: UInt32) -> String {
        let bigEndian: UInt32 = 1 << 31
        let suffix = code & bigEndian != 0 ? "_BE" : ""
        let format = code & ~bigEndian
        if format == 0 { return "INVALID" + suffix }
        var characters = [0, 8, 16, 24].map { UInt8(truncatingIfNeeded: format >> UInt32($0)) }
        while characters.count > 1, characters.last == 0x20 { characters.removeLast() }
        guard characters.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else {
            return "0x" + String(code, radix: 16)
        }
        return String(decoding: characters, as: UTF8.self) + suffix
    }
}
