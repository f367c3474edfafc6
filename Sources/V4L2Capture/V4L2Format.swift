import PixelBuffers
import Surfaces

/// A V4L2 pixel format code (`V4L2_PIX_FMT_*`, a little-endian fourcc) that FrameBus can carry, and what it becomes.
///
/// | V4L2 | memory | FrameBus |
/// |---|---|---|
/// | `NV12` | Y, then interleaved CbCr, 8-bit | `420v` (limited range) or `420f` (full range) |
/// | `P010` | the same in 16-bit words, 10 bits MSB-aligned | `x420` (limited) or `xf20` (full) |
/// | `XR24` | B, G, R, X | `BGRA` (the X byte is carried as alpha, as the device wrote it) |
/// | `AR24` | B, G, R, A | `BGRA` |
///
/// | `NM12` (`NV12M`) | Y and CbCr in two buffers (a multi-planar device) | `420v` or `420f` |
///
/// The single-buffer formats have the CbCr plane right after the Y plane with the same stride; `NV12M` puts each
/// plane in its own buffer with its own stride (a surface with one descriptor per plane).
public struct V4L2PixelFormat: Hashable, Sendable, CustomStringConvertible {
    /// The fourcc as V4L2 packs it (`v4l2_fourcc(a, b, c, d)`: `a` in the low byte).
    public let rawValue: UInt32

    /// Wraps a V4L2 fourcc.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `V4L2_PIX_FMT_NV12`.
    public static let nv12 = V4L2PixelFormat(text: "NV12")
    /// `V4L2_PIX_FMT_P010`.
    public static let p010 = V4L2PixelFormat(text: "P010")
    /// `V4L2_PIX_FMT_XBGR32` (`XR24`).
    public static let xbgr32 = V4L2PixelFormat(text: "XR24")
    /// `V4L2_PIX_FMT_ABGR32` (`AR24`).
    public static let abgr32 = V4L2PixelFormat(text: "AR24")
    /// `V4L2_PIX_FMT_NV12M` (`NM12`): NV12 with the Y and CbCr planes in separate buffers.
    public static let nv12m = V4L2PixelFormat(text: "NM12")

    /// The formats FrameBus carries, in the order a capture prefers them when none is asked for.
    public static let supported: [V4L2PixelFormat] = [.nv12, .nv12m, .p010, .xbgr32, .abgr32]

    /// Buffers per frame: 2 for `NV12M` (one per plane), else 1.
    public var memoryPlaneCount: Int { self == .nv12m ? 2 : 1 }

    init(text: StaticString) {
        var value: UInt32 = 0
        precondition(text.utf8CodeUnitCount == 4)
        // SAFETY: index < utf8CodeUnitCount, checked above.
        for index in 0..<4 { value |= UInt32(unsafe text.utf8Start[index]) << (8 * UInt32(index)) }
        rawValue = value
    }

    /// The four characters, e.g. `"NV12"`; a hex number if they are not printable.
    public var description: String {
        let bytes = (0..<4).map { UInt8(truncatingIfNeeded: rawValue >> (8 * UInt32($0))) }
        if bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) { return String(decoding: bytes, as: UTF8.self) }
        return "0x" + String(rawValue, radix: 16)
    }

    /// The FrameBus format this becomes in `range` (the quantization the device reports); nil if FrameBus does not
    /// carry it.
    public func pixelFormat(range: PixelFormat.Range) -> PixelFormat? {
        switch self {
        case .nv12, .nv12m: range == .full ? .yuv420BiPlanarFullRange8 : .yuv420BiPlanarVideoRange8
        case .p010: range == .full ? .yuv420BiPlanarFullRange10 : .yuv420BiPlanarVideoRange10
        case .xbgr32, .abgr32: .bgra8
        default: nil
        }
    }

    /// Whether the samples are Y'CbCr.
    public var isYCbCr: Bool { self == .nv12 || self == .nv12m || self == .p010 }

    /// The V4L2 formats that can deliver a FrameBus format, in order of preference.
    public static func candidates(for format: PixelFormat) -> [V4L2PixelFormat] {
        switch format.base {
        case .yuv420BiPlanarVideoRange8, .yuv420BiPlanarFullRange8: [.nv12, .nv12m]
        case .yuv420BiPlanarVideoRange10, .yuv420BiPlanarFullRange10: [.p010]
        default: [.xbgr32, .abgr32]
        }
    }

    /// The surface layout of one frame: plane 0 at offset 0, the CbCr plane (4:2:0 formats) right after
    /// `bytesPerLine * height` bytes with the same stride, as the single-planar V4L2 formats define.
    ///
    /// Every number comes from the driver; each is checked so that no plane leaves the buffer and no arithmetic can
    /// trap.
    ///
    /// - Parameters:
    ///   - width: the negotiated width in pixels.
    ///   - height: the negotiated height in pixels.
    ///   - bytesPerLine: `v4l2_pix_format.bytesperline` (the stride of every plane).
    ///   - bufferLength: the buffer's length (`VIDIOC_QUERYBUF`).
    /// - Throws: ``V4L2CaptureError/Code-swift.struct/unsupportedFormat`` for a format FrameBus does not carry, or
    ///   geometry that does not fit the format or the buffer.
    public func surfaceLayout(
        width: Int,
        height: Int,
        bytesPerLine: Int,
        bufferLength: Int,
        range: PixelFormat.Range
    ) throws(V4L2CaptureError) -> SurfaceLayout {
        try surfaceLayout(
            width: width,
            height: height,
            bytesPerLine: [bytesPerLine],
            bufferLengths: [bufferLength],
            range: range
        )
    }

    /// The surface layout of one frame held in ``memoryPlaneCount`` buffers.
    ///
    /// One buffer (`NV12`, `P010`, `XR24`, `AR24`): plane 0 at offset 0, the CbCr plane right after
    /// `bytesPerLine[0] * height` bytes with the same stride. One buffer per plane (`NV12M`): plane `i` at offset 0
    /// of buffer `i` with stride `bytesPerLine[i]`; the layout's planes then each live in their own descriptor and
    /// its allocation size is the sum of the buffers' lengths.
    ///
    /// Every number comes from the driver; each is checked so that no plane leaves its buffer and no arithmetic can
    /// trap.
    ///
    /// - Parameters:
    ///   - width: the negotiated width in pixels.
    ///   - height: the negotiated height in pixels.
    ///   - bytesPerLine: each buffer's stride (`bytesperline`), one per buffer.
    ///   - bufferLengths: each buffer's length (`VIDIOC_QUERYBUF`, or the size of the imported DMA-BUF).
    ///   - range: the quantization range the device reports.
    /// - Throws: ``V4L2CaptureError/Code-swift.struct/unsupportedFormat`` for a format FrameBus does not carry, or
    ///   geometry that does not fit the format or the buffers.
    public func surfaceLayout(
        width: Int,
        height: Int,
        bytesPerLine: [Int],
        bufferLengths: [Int],
        range: PixelFormat.Range
    ) throws(V4L2CaptureError) -> SurfaceLayout {
        let operation = "V4L2PixelFormat.surfaceLayout(\(self) \(width)x\(height), strides \(bytesPerLine))"
        guard let format = pixelFormat(range: range) else {
            throw V4L2CaptureError(.unsupportedFormat, operation, message: "FrameBus does not carry \(self)")
        }
        guard format.isValidSize(width: width, height: height) else {
            throw V4L2CaptureError(.unsupportedFormat, operation, message: "invalid size for \(format)")
        }
        let buffers = memoryPlaneCount
        guard bytesPerLine.count == buffers, bufferLengths.count == buffers,
            buffers == 1 || buffers == format.planes.count
        else {
            throw V4L2CaptureError(
                .unsupportedFormat,
                operation,
                message: "\(bufferLengths.count) buffers, \(self) has \(buffers)"
            )
        }
        for (stride, length) in zip(bytesPerLine, bufferLengths) {
            guard length > 0, length <= SurfaceLayout.maximumAllocationSize, stride > 0, stride <= 1 << 20 else {
                throw V4L2CaptureError(.unsupportedFormat, operation, message: "buffer length \(length)")
            }
        }
        var planes: [PlaneLayout] = []
        var offset = 0
        for (index, plane) in format.planes.enumerated() {
            let planeWidth = width / plane.horizontalSubsampling
            let planeHeight = height / plane.verticalSubsampling
            let buffer = buffers == 1 ? 0 : index
            let stride = bytesPerLine[buffer]
            if buffers > 1 { offset = 0 }
            // width, height ≤ 16384 and bytesPerElement ≤ 4: these products cannot overflow.
            guard stride >= planeWidth * plane.bytesPerElement else {
                throw V4L2CaptureError(.unsupportedFormat, operation, message: "stride below a row of plane")
            }
            planes.append(
                PlaneLayout(
                    offset: offset,
                    bytesPerRow: stride,
                    width: planeWidth,
                    height: planeHeight,
                    bytesPerElement: plane.bytesPerElement
                )
            )
            offset += stride * planeHeight  // ≤ 2^20 · 2^14 per plane, two planes
            if buffers > 1 || index == format.planes.count - 1 {
                guard offset <= bufferLengths[buffer] else {
                    throw V4L2CaptureError(
                        .unsupportedFormat,
                        operation,
                        message: "the planes need \(offset) bytes, buffer \(buffer) has \(bufferLengths[buffer])"
                    )
                }
            }
        }
        let layout = SurfaceLayout(
            pixelFormat: format.fourCC,
            width: width,
            height: height,
            planes: planes,
            allocationSize: bufferLengths.reduce(0, +)  // each ≤ maximumAllocationSize, at most 2
        )
        do { try layout.validate() } catch {
            throw V4L2CaptureError(.unsupportedFormat, operation, message: error.description)
        }
        return layout
    }
}

/// The colour description a V4L2 driver reports with a format (`v4l2_pix_format`'s `colorspace`, `xfer_func`,
/// `ycbcr_enc` and `quantization`), and the pixel buffer attachments it maps to.
///
/// V4L2's "default" values are resolved as videodev2.h's `V4L2_MAP_*_DEFAULT` macros do. What CoreVideo's names
/// cannot express (opRGB, DCI-P3 with its own white point, BT.2020 constant luminance, NTSC 1953 primaries) is
/// left unset rather than guessed.
public struct V4L2Colorimetry: Hashable, Sendable {
    /// `enum v4l2_colorspace`.
    public var colorspace: UInt32
    /// `enum v4l2_xfer_func`.
    public var transferFunction: UInt32
    /// `enum v4l2_ycbcr_encoding`.
    public var yCbCrEncoding: UInt32
    /// `enum v4l2_quantization`.
    public var quantization: UInt32

    /// Wraps the four fields as the driver reported them.
    public init(colorspace: UInt32, transferFunction: UInt32, yCbCrEncoding: UInt32, quantization: UInt32) {
        self.colorspace = colorspace
        self.transferFunction = transferFunction
        self.yCbCrEncoding = yCbCrEncoding
        self.quantization = quantization
    }

    // The values of videodev2.h's enums (mirrored in CV4L2, checked there against the header).
    enum Colorspace {
        static let `default`: UInt32 = 0, smpte170M: UInt32 = 1, smpte240M: UInt32 = 2, rec709: UInt32 = 3
        static let system470M: UInt32 = 5, system470BG: UInt32 = 6, jpeg: UInt32 = 7, sRGB: UInt32 = 8
        static let opRGB: UInt32 = 9, bt2020: UInt32 = 10, raw: UInt32 = 11, dciP3: UInt32 = 12
    }
    enum Transfer {
        static let `default`: UInt32 = 0, rec709: UInt32 = 1, sRGB: UInt32 = 2, opRGB: UInt32 = 3
        static let smpte240M: UInt32 = 4, none: UInt32 = 5, dciP3: UInt32 = 6, smpte2084: UInt32 = 7
    }
    enum Encoding {
        static let `default`: UInt32 = 0, bt601: UInt32 = 1, bt709: UInt32 = 2, xv601: UInt32 = 3
        static let xv709: UInt32 = 4, bt2020: UInt32 = 6, bt2020ConstantLuminance: UInt32 = 7
        static let smpte240M: UInt32 = 8
    }
    enum Quantization {
        static let `default`: UInt32 = 0, full: UInt32 = 1, limited: UInt32 = 2
    }

    /// The Y'CbCr encoding, "default" resolved from the colorspace (`V4L2_MAP_YCBCR_ENC_DEFAULT`).
    var resolvedEncoding: UInt32 {
        guard yCbCrEncoding == Encoding.default else { return yCbCrEncoding }
        switch colorspace {
        case Colorspace.rec709, Colorspace.dciP3: return Encoding.bt709
        case Colorspace.bt2020: return Encoding.bt2020
        case Colorspace.smpte240M: return Encoding.smpte240M
        default: return Encoding.bt601
        }
    }

    /// The transfer function, "default" resolved from the colorspace (`V4L2_MAP_XFER_FUNC_DEFAULT`).
    var resolvedTransfer: UInt32 {
        guard transferFunction == Transfer.default else { return transferFunction }
        switch colorspace {
        case Colorspace.opRGB: return Transfer.opRGB
        case Colorspace.smpte240M: return Transfer.smpte240M
        case Colorspace.dciP3: return Transfer.dciP3
        case Colorspace.raw: return Transfer.none
        case Colorspace.sRGB, Colorspace.jpeg: return Transfer.sRGB
        default: return Transfer.rec709
        }
    }

    /// The quantization range of a format's samples, "default" resolved as `V4L2_MAP_QUANTIZATION_DEFAULT` does:
    /// RGB and the JPEG colorspace are full range, other Y'CbCr limited.
    public func range(isYCbCr: Bool) -> PixelFormat.Range {
        switch quantization {
        case Quantization.full: return .full
        case Quantization.limited: return .video
        default: return !isYCbCr || colorspace == Colorspace.jpeg ? .full : .video
        }
    }

    /// The pixel buffer attachments: colour primaries, transfer function and (for Y'CbCr) matrix, each set only
    /// when CoreVideo has a name for it.
    public func attachments(isYCbCr: Bool) -> PixelBufferAttachments {
        var attachments = PixelBufferAttachments()
        switch colorspace {
        case Colorspace.rec709, Colorspace.sRGB, Colorspace.jpeg: attachments.colorPrimaries = .itu709
        case Colorspace.smpte170M, Colorspace.smpte240M: attachments.colorPrimaries = .smpteC
        case Colorspace.system470BG: attachments.colorPrimaries = .ebu3213
        case Colorspace.bt2020: attachments.colorPrimaries = .itu2020
        default: break
        }
        switch resolvedTransfer {
        case Transfer.rec709: attachments.transferFunction = .itu709
        case Transfer.sRGB: attachments.transferFunction = .sRGB
        case Transfer.smpte240M: attachments.transferFunction = .smpte240M
        case Transfer.none: attachments.transferFunction = .linear
        case Transfer.smpte2084: attachments.transferFunction = .pq
        default: break
        }
        if isYCbCr {
            switch resolvedEncoding {
            case Encoding.bt601, Encoding.xv601: attachments.yCbCrMatrix = .itu601
            case Encoding.bt709, Encoding.xv709: attachments.yCbCrMatrix = .itu709
            case Encoding.bt2020: attachments.yCbCrMatrix = .itu2020
            case Encoding.smpte240M: attachments.yCbCrMatrix = .smpte240M
            default: break
            }
        }
        return attachments
    }
}
