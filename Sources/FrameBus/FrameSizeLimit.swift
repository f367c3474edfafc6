/// The largest frame a subscriber accepts: its own size policy (docs/PROTOCOL.md §8.2).
///
/// What a subscriber allocates and writes for a frame follows the frame's width and height, not the bytes the
/// publisher sent: a compressed frame of 3,328 bytes that claims 16384 × 16384 makes a decoding consumer fill a
/// 384 MiB image, every frame. A publisher's SURFACE larger than this limit ends the subscription before anything is
/// imported or decoded: the subscriber sends ERROR `frameTooLarge` and its stream ends with
/// ``FrameBusError/Code-swift.struct/surfaceRejected``.
///
/// ```swift
/// var configuration = Subscriber.Configuration(path: path, acceptedFormats: [.yuv420BiPlanarVideoRange8])
/// configuration.largestFrame = FrameSizeLimit(maximumWidth: 1920, maximumHeight: 1080)
/// ```
public struct FrameSizeLimit: Hashable, Sendable, CustomStringConvertible {
    /// The widest frame accepted, in pixels.
    public var maximumWidth: Int
    /// The tallest frame accepted, in pixels.
    public var maximumHeight: Int
    /// The most pixels (width × height) a frame may have.
    public var maximumPixelCount: Int

    /// A limit of `maximumWidth` × `maximumHeight` (and, unless given, as many pixels as that rectangle has).
    ///
    /// - Precondition: every value is at least 1.
    public init(maximumWidth: Int, maximumHeight: Int, maximumPixelCount: Int? = nil) {
        precondition(maximumWidth >= 1 && maximumHeight >= 1, "a frame size limit of at least 1 × 1")
        let rectangle = maximumWidth.multipliedReportingOverflow(by: maximumHeight)
        let pixels = maximumPixelCount ?? (rectangle.overflow ? Int.max : rectangle.partialValue)
        precondition(pixels >= 1, "a frame size limit of at least 1 pixel")
        self.maximumWidth = maximumWidth
        self.maximumHeight = maximumHeight
        self.maximumPixelCount = pixels
    }

    /// The default: 8192 × 8192, at most 8192 × 4352 pixels (35.7 million: 8K UHD and DCI 8K in either
    /// orientation). A decoded frame of that size is at most 136 MiB (BGRA), 107 MiB (10-bit 4:2:0), 53 MiB (8-bit
    /// 4:2:0).
    public static let `default` = FrameSizeLimit(
        maximumWidth: 8192,
        maximumHeight: 8192,
        maximumPixelCount: 8192 * 4352
    )

    /// Whether a frame of `width` × `height` pixels is within the limit (no arithmetic on the values can trap).
    public func admits(width: Int, height: Int) -> Bool {
        guard width >= 0, height >= 0, width <= maximumWidth, height <= maximumHeight else { return false }
        let pixels = width.multipliedReportingOverflow(by: height)
        return !pixels.overflow && pixels.partialValue <= maximumPixelCount
    }

    /// "8192x8192 (at most 35651584 pixels)".
    public var description: String {
        "\(maximumWidth)x\(maximumHeight) (at most \(maximumPixelCount) pixels)"
    }
}
