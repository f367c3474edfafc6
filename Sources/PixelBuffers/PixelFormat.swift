/// A pixel format: CoreVideo's four-character code plus the geometry needed to lay it out in memory.
///
/// FrameBus has five base formats and, for each, a lossless compressed variant with the same geometry whose
/// memory layout is opaque (only `SurfaceCompression` reads or writes it):
///
/// | base | compressed | DRM fourcc | meaning |
/// |---|---|---|---|
/// | `420v` | `&8v0` | NV12 | 4:2:0 8-bit, Y then interleaved CbCr, video range |
/// | `420f` | `&8f0` | NV12 | same, full range |
/// | `x420` | `&xv0` | P010 | 4:2:0 10-bit in little-endian 16-bit words, MSB-aligned, video range |
/// | `xf20` | `&xf0` | P010 | same, full range |
/// | `BGRA` | `&BGA` | ARGB8888 | 8-bit B, G, R, A |
///
/// ```swift
/// let format = PixelFormat.yuv420BiPlanarVideoRange8
/// format.compressedVariant  // &8v0
/// format.planes[1].horizontalSubsampling  // 2
/// ```
public struct PixelFormat: Hashable, Sendable, CustomStringConvertible {
    /// The four-character code, packed big-endian as CoreVideo's `OSType` (`'420v'` is `0x3432_3076`).
    public let fourCC: UInt32

    /// Creates the format for a four-character code.
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/unknownPixelFormat`` if FrameBus does not know the code.
    public init(fourCC: UInt32) throws(PixelBufferError) {
        guard Self.all.contains(where: { $0.fourCC == fourCC }) else {
            throw PixelBufferError(.unknownPixelFormat, "PixelFormat(fourCC: \(Self.fourCCString(fourCC)))")
        }
        self.fourCC = fourCC
    }

    /// Creates the format for a four-character string such as `"420v"` or `"&8v0"`.
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/unknownPixelFormat``.
    public init(_ name: String) throws(PixelBufferError) {
        let bytes = Array(name.utf8)
        guard bytes.count == 4 else { throw PixelBufferError(.unknownPixelFormat, "PixelFormat(\"\(name)\")") }
        try self.init(fourCC: bytes.reduce(0) { $0 << 8 | UInt32($1) })
    }

    private init(unchecked fourCC: StaticString) {
        precondition(fourCC.utf8CodeUnitCount == 4)
        var value: UInt32 = 0
        for index in 0..<4 {
            // SAFETY: index < utf8CodeUnitCount, checked above.
            value = value << 8 | UInt32(unsafe fourCC.utf8Start[index])
        }
        self.fourCC = value
    }

    // MARK: The formats

    /// `420v`: 4:2:0 8-bit bi-planar (NV12), video range.
    public static let yuv420BiPlanarVideoRange8 = PixelFormat(unchecked: "420v")
    /// `420f`: 4:2:0 8-bit bi-planar (NV12), full range.
    public static let yuv420BiPlanarFullRange8 = PixelFormat(unchecked: "420f")
    /// `x420`: 4:2:0 10-bit bi-planar (P010), video range.
    public static let yuv420BiPlanarVideoRange10 = PixelFormat(unchecked: "x420")
    /// `xf20`: 4:2:0 10-bit bi-planar (P010), full range.
    public static let yuv420BiPlanarFullRange10 = PixelFormat(unchecked: "xf20")
    /// `BGRA`: 8-bit B, G, R, A (DRM ARGB8888).
    public static let bgra8 = PixelFormat(unchecked: "BGRA")

    /// `&8v0`: lossless compressed `420v`.
    public static let compressedYUV420BiPlanarVideoRange8 = PixelFormat(unchecked: "&8v0")
    /// `&8f0`: lossless compressed `420f`.
    public static let compressedYUV420BiPlanarFullRange8 = PixelFormat(unchecked: "&8f0")
    /// `&xv0`: lossless compressed `x420`.
    public static let compressedYUV420BiPlanarVideoRange10 = PixelFormat(unchecked: "&xv0")
    /// `&xf0`: lossless compressed `xf20`.
    public static let compressedYUV420BiPlanarFullRange10 = PixelFormat(unchecked: "&xf0")
    /// `&BGA`: lossless compressed `BGRA`.
    public static let compressedBGRA8 = PixelFormat(unchecked: "&BGA")

    /// The five base (uncompressed) formats.
    public static let baseFormats: [PixelFormat] = [
        .yuv420BiPlanarVideoRange8, .yuv420BiPlanarFullRange8, .yuv420BiPlanarVideoRange10,
        .yuv420BiPlanarFullRange10, .bgra8,
    ]
    /// The five lossless compressed formats, in the order of ``baseFormats``.
    public static let compressedFormats: [PixelFormat] = [
        .compressedYUV420BiPlanarVideoRange8, .compressedYUV420BiPlanarFullRange8,
        .compressedYUV420BiPlanarVideoRange10, .compressedYUV420BiPlanarFullRange10, .compressedBGRA8,
    ]
    /// Every format FrameBus knows.
    public static let all: [PixelFormat] = baseFormats + compressedFormats

    // MARK: Properties

    /// The four-character code as text, e.g. `"420v"`.
    public var name: String { Self.fourCCString(fourCC) }

    public var description: String { name }

    /// Whether this is a lossless compressed format with an opaque memory layout.
    public var isCompressed: Bool { Self.compressedFormats.contains(self) }

    /// The lossless compressed variant of a base format; `nil` for a compressed format.
    public var compressedVariant: PixelFormat? {
        Self.baseFormats.firstIndex(of: self).map { Self.compressedFormats[$0] }
    }

    /// The base format of a compressed format; `self` for a base format.
    public var base: PixelFormat {
        Self.compressedFormats.firstIndex(of: self).map { Self.baseFormats[$0] } ?? self
    }

    /// Bits per sample: 8 or 10.
    public var bitDepth: Int {
        switch base {
        case .yuv420BiPlanarVideoRange10, .yuv420BiPlanarFullRange10: 10
        default: 8
        }
    }

    /// Quantisation range, a property of the format as in CoreVideo.
    public enum Range: String, Sendable, Hashable {
        /// Y 16...235, CbCr 16...240 (scaled by 2^(n-8) for n bits).
        case video
        /// The full code range.
        case full
    }

    /// The quantisation range (RGB formats are full range).
    public var range: Range {
        switch base {
        case .yuv420BiPlanarVideoRange8, .yuv420BiPlanarVideoRange10: .video
        default: .full
        }
    }

    /// Whether the samples are Y'CbCr (as opposed to RGB).
    public var isYCbCr: Bool { base != .bgra8 }

    /// Chroma subsampling.
    public enum ChromaSubsampling: String, Sendable, Hashable {
        /// Chroma at half resolution both ways.
        case yuv420 = "4:2:0"
        /// No subsampling (RGB).
        case none = "4:4:4"
    }

    /// The chroma subsampling.
    public var chromaSubsampling: ChromaSubsampling { isYCbCr ? .yuv420 : .none }

    /// The geometry of one plane, relative to the image size.
    public struct Plane: Hashable, Sendable {
        /// Image width divided by this gives the plane width in elements.
        public var horizontalSubsampling: Int
        /// Image height divided by this gives the plane height in rows.
        public var verticalSubsampling: Int
        /// Bytes per element: a Y sample, a CbCr pair, or a BGRA pixel.
        public var bytesPerElement: Int
        /// Samples per element (1 for Y, 2 for CbCr, 4 for BGRA).
        public var samplesPerElement: Int
    }

    /// The planes, in memory order; the same for a compressed format and its base (the geometry the codec
    /// preserves), although a compressed format's memory is one opaque region.
    public var planes: [Plane] {
        let bytesPerSample = bitDepth > 8 ? 2 : 1
        if isYCbCr {
            return [
                Plane(
                    horizontalSubsampling: 1,
                    verticalSubsampling: 1,
                    bytesPerElement: bytesPerSample,
                    samplesPerElement: 1
                ),
                Plane(
                    horizontalSubsampling: 2,
                    verticalSubsampling: 2,
                    bytesPerElement: 2 * bytesPerSample,
                    samplesPerElement: 2
                ),
            ]
        }
        return [Plane(horizontalSubsampling: 1, verticalSubsampling: 1, bytesPerElement: 4, samplesPerElement: 4)]
    }

    /// The DRM fourcc (little-endian characters, as in `drm_fourcc.h`) of the base format's memory layout.
    public var drmFourCC: UInt32 {
        switch base {
        case .yuv420BiPlanarVideoRange8, .yuv420BiPlanarFullRange8: Self.drmCode("NV12")
        case .yuv420BiPlanarVideoRange10, .yuv420BiPlanarFullRange10: Self.drmCode("P010")
        default: Self.drmCode("AR24")
        }
    }

    /// A one-line description, e.g. "4:2:0 8-bit bi-planar, video range".
    public var summary: String {
        let kind = isYCbCr ? "Y'CbCr 4:2:0 \(bitDepth)-bit bi-planar" : "BGRA 8-bit packed"
        let prefix = isCompressed ? "lossless compressed " : ""
        return prefix + kind + (isYCbCr ? ", \(range.rawValue) range" : "")
    }

    /// Whether `width` × `height` is a valid image size for this format (4:2:0 needs even sizes).
    public func isValidSize(width: Int, height: Int) -> Bool {
        guard width > 0, height > 0, width <= Self.maximumDimension, height <= Self.maximumDimension else {
            return false
        }
        return chromaSubsampling == .none || (width % 2 == 0 && height % 2 == 0)
    }

    /// The largest width or height FrameBus accepts (16K, like common GPU limits).
    public static let maximumDimension = 16384

    static func fourCCString(_ code: UInt32) -> String {
        let bytes = [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: code >> UInt32($0)) }
        if bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) {
            return String(decoding: bytes, as: UTF8.self)
        }
        return "0x" + String(code, radix: 16)
    }

    static func drmCode(_ text: String) -> UInt32 {
        let bytes = Array(text.utf8)
        return UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24
    }
}
