import CDRM
import Glibc

extension PixelFormat {
    /// libdrm's display name of the DRM fourcc, e.g. `"NV12"` (`drmGetFormatName`).
    public var drmFormatName: String {
        guard let name = unsafe drmGetFormatName(drmFourCC) else { return "0x" + String(drmFourCC, radix: 16) }
        defer { unsafe free(name) }
        return unsafe String(cString: name)
    }
}
