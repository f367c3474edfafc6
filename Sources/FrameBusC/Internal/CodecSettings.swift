import CFrameBusABI
import SurfaceCompression

/// A caller's `fb_codec_options`, validated: what `fb_codec_create_with_options` (and `fb_codec_create`) make a
/// codec with.
///
/// A tile size that no image could use (odd, 1, or both sides set with an area over the layout's limit) is refused
/// here, at creation, with a message; a size larger than an image is clamped by the encoder as
/// docs/COMPRESSED-LAYOUT.md section 4 says, so a C codec writes the same bytes as a Swift ``SurfaceCodecContext``
/// with the same tile size.
struct CodecSettings {
    /// The most worker threads a codec may ask for.
    static let maximumThreadCount: UInt32 = 256
    /// The largest tile area the layout allows (docs/COMPRESSED-LAYOUT.md section 4:
    /// `tileWidth × tileHeight ≤ 2^22`).
    static let maximumTileArea: UInt64 = 1 << 22

    let threadCount: Int
    let tileSize: SurfaceCodec.TileSize
    let effort: SurfaceCodec.Effort

    /// - Throws: ``ABIStatus/invalidArgument`` naming the field, for a thread count over 256, an odd or too small
    ///   tile side, a tile area over 2^22, an unknown effort, or a reserved field that is not 0.
    init(_ options: fb_codec_options, _ function: String) throws(ABIError) {
        guard options.thread_count <= Self.maximumThreadCount else {
            throw ABIError(
                .invalidArgument,
                "\(function): thread_count \(options.thread_count) is over \(Self.maximumThreadCount)"
            )
        }
        let width = try Self.tileSide(options.tile_width, "tile_width", function)
        let height = try Self.tileSide(options.tile_height, "tile_height", function)
        if let width, let height {
            // Both are at most 2^32 - 1, so the product fits in 64 bits.
            let area = UInt64(width) * UInt64(height)
            guard area <= Self.maximumTileArea else {
                throw ABIError(
                    .invalidArgument,
                    "\(function): a \(width)x\(height) tile has \(area) pixels, over the layout's limit of "
                        + "\(Self.maximumTileArea)"
                )
            }
        }
        switch options.effort {
        case 0: effort = .fast
        case 1: effort = .best
        default:
            throw ABIError(
                .invalidArgument,
                "\(function): effort \(options.effort) is neither FB_CODEC_EFFORT_FAST (0) nor FB_CODEC_EFFORT_BEST (1)"
            )
        }
        let reserved = options.reserved
        guard reserved.0 | reserved.1 | reserved.2 | reserved.3 == 0 else {
            throw ABIError(.invalidArgument, "\(function): a reserved field is not 0 (use fb_codec_options_init)")
        }
        threadCount = Int(options.thread_count)
        tileSize = SurfaceCodec.TileSize(
            width: width.map { Int($0) },
            height: height.map { Int($0) } ?? SurfaceCodec.TileSize.default.height
        )
    }

    /// A codec with these settings.
    func makeHandle() -> CodecHandle { CodecHandle(threadCount: threadCount, tileSize: tileSize, effort: effort) }

    /// A tile side as given: nil for 0 (the default), else an even value of at least 2.
    private static func tileSide(_ value: UInt32, _ field: String, _ function: String) throws(ABIError) -> UInt32? {
        if value == 0 { return nil }
        guard value >= 2, value % 2 == 0 else {
            throw ABIError(.invalidArgument, "\(function): \(field) \(value) is not an even number of at least 2")
        }
        return value
    }
}
