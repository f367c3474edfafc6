import FrameBus

/// The Swift side of `fb_publisher`: a ``Publisher`` and the ``PixelBufferPool`` its frames come from.
final class PublisherHandle: Sendable {
    let publisher: Publisher
    let pool: PixelBufferPool

    init(publisher: Publisher, pool: PixelBufferPool) {
        self.publisher = publisher
        self.pool = pool
    }

    /// The formats a pool of `format` can serve: the format and its compressed variant.
    static func servable(by format: PixelFormat) -> [PixelFormat] {
        [format] + (format.compressedVariant.map { [$0] } ?? [])
    }
}
