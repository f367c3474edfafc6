import CFrameBusABI
import Foundation
import SurfaceCompression
import TestSupport
import Testing

@testable import FrameBus

/// `fb_codec_create_with_options`'s tile size: a C codec writes exactly the bytes a Swift `SurfaceCodecContext` with
/// the same tile size writes (clamping to the image included), and refuses what no image could use.
@Suite(.heavyWork, .timeLimit(.minutes(10))) struct CodecTileSizeTests {
    /// A deterministic image of `format` in tightly packed planes, with flat runs and noise so the codec uses
    /// several modes.
    static func planes(_ format: PixelFormat, width: Int, height: Int) -> [[UInt8]] {
        format.planes.enumerated().map { index, plane in
            let rowBytes = (width / plane.horizontalSubsampling) * plane.bytesPerElement
            let rows = height / plane.verticalSubsampling
            var state: UInt32 = 0x9E37_79B9 &+ UInt32(index)
            return (0..<(rowBytes * rows)).map { offset in
                let x = offset % rowBytes
                let y = offset / rowBytes
                if (x / 24 + y / 16) % 3 == 0 { return UInt8(truncatingIfNeeded: y &* 7) }
                state = state &* 1_664_525 &+ 1_013_904_223
                return UInt8(truncatingIfNeeded: (state >> 24) & 0x3F) &+ UInt8(truncatingIfNeeded: x)
            }
        }
    }

    /// The bytes Swift's encoder writes for this image and tile size.
    static func swiftBytes(
        _ planes: [[UInt8]],
        _ format: PixelFormat,
        width: Int,
        height: Int,
        tileSize: SurfaceCodec.TileSize,
        effort: SurfaceCodec.Effort = .fast
    ) throws -> [UInt8] {
        let raw = try PixelBuffer(width: width, height: height, pixelFormat: format)
        try raw.lock()
        for index in 0..<raw.planeCount {
            let layout = raw.planeLayout(index)
            let rowBytes = layout.width * layout.bytesPerElement
            try raw.withUnsafeMutableBytes(ofPlane: index) { bytes in
                for row in 0..<layout.height {
                    for x in 0..<rowBytes { bytes[row * layout.bytesPerRow + x] = planes[index][row * rowBytes + x] }
                }
            }
        }
        try raw.unlock()
        let maximum = try SurfaceCodec.maximumCompressedByteCount(
            width: width,
            height: height,
            format: format,
            tileSize: tileSize
        )
        let compressed = try PixelBuffer(
            width: width,
            height: height,
            compressedFormat: format.compressedVariant!,
            opaqueByteCount: maximum
        )
        let context = SurfaceCodecContext(threadCount: 1, tileSize: tileSize, effort: effort)
        let used = try context.compress(raw, into: compressed).compressedByteCount
        try compressed.lock(.readOnly)
        defer { try? compressed.unlock(.readOnly) }
        return compressed.surface.withUnsafeBytes { Array($0.prefix(used)) }
    }

    /// The bytes a C codec made with these options writes, through the C ABI (capacity from
    /// `fb_codec_compressed_capacity`).
    static func cBytes(
        _ planes: [[UInt8]],
        _ format: PixelFormat,
        width: Int,
        height: Int,
        threads: UInt32,
        tileWidth: UInt32,
        tileHeight: UInt32,
        effort: UInt32 = 0
    ) throws -> (bytes: [UInt8], capacity: UInt64, status: fb_status, message: String) {
        var options = fb_codec_options()
        fb_codec_options_init(&options)
        options.thread_count = threads
        options.tile_width = tileWidth
        options.tile_height = tileHeight
        options.effort = effort
        var error = fb_error()
        var codec: OpaquePointer?
        var status = fb_codec_create_with_options(&options, &codec, &error)
        guard status == FB_OK else { return ([], 0, status, message(error)) }
        defer { fb_codec_destroy(codec) }
        var capacity: UInt64 = 0
        status = fb_codec_compressed_capacity(codec, format.fourCC, UInt32(width), UInt32(height), &capacity, &error)
        guard status == FB_OK else { return ([], 0, status, message(error)) }
        var output = [UInt8](repeating: 0, count: Int(capacity))
        var first = planes[0]
        var last = planes[planes.count - 1]
        var used: UInt64 = 0
        status = first.withUnsafeMutableBytes { plane0 in
            last.withUnsafeMutableBytes { planeLast in
                output.withUnsafeMutableBytes { destination in
                    var image = fb_image()
                    image.format = format.fourCC
                    image.width = UInt32(width)
                    image.height = UInt32(height)
                    let geometry = format.planes
                    image.planes.0.data = plane0.baseAddress
                    image.planes.0.bytes_per_row = UInt64(
                        width / geometry[0].horizontalSubsampling * geometry[0].bytesPerElement
                    )
                    if geometry.count > 1 {
                        image.planes.1.data = planeLast.baseAddress
                        image.planes.1.bytes_per_row = UInt64(
                            width / geometry[1].horizontalSubsampling * geometry[1].bytesPerElement
                        )
                    }
                    return fb_codec_compress(codec, &image, destination.baseAddress, capacity, &used, &error)
                }
            }
        }
        guard status == FB_OK else { return ([], capacity, status, message(error)) }
        return (Array(output.prefix(Int(used))), capacity, status, "")
    }

    static func message(_ error: fb_error) -> String {
        var copy = error
        return withUnsafeBytes(of: &copy.message) { bytes in
            String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
    }

    /// A little-endian u32 of the §2 header.
    static func headerField(_ bytes: [UInt8], at offset: Int) -> Int {
        (0..<4).reduce(0) { $0 | Int(bytes[offset + $1]) << (8 * $1) }
    }

    static let formats: [PixelFormat] = [
        .yuv420BiPlanarVideoRange8, .yuv420BiPlanarFullRange8, .yuv420BiPlanarVideoRange10,
        .yuv420BiPlanarFullRange10, .bgra8,
    ]

    @Test(arguments: [
        // (width, height, tile width, tile height); 0 is the default (full width, 64 rows).
        (130, 66, 128, 64), (130, 66, 2, 2), (130, 66, 0, 16), (130, 66, 34, 0), (64, 64, 4096, 1024), (96, 40, 0, 0),
    ])
    func aCCodecWritesSwiftsBytesForTheSameTileSize(size: (Int, Int, Int, Int)) throws {
        let (width, height, tileWidth, tileHeight) = size
        let tileSize = SurfaceCodec.TileSize(
            width: tileWidth == 0 ? nil : tileWidth,
            height: tileHeight == 0 ? 64 : tileHeight
        )
        // §4's canonical rule: each side clamped to the image's, rounded up to even.
        let expectedWidth = min(tileWidth == 0 ? Int.max : tileWidth, (width + 1) & ~1)
        let expectedHeight = min(tileHeight == 0 ? 64 : tileHeight, (height + 1) & ~1)
        for format in Self.formats {
            let planes = Self.planes(format, width: width, height: height)
            let swift = try Self.swiftBytes(planes, format, width: width, height: height, tileSize: tileSize)
            for threads: UInt32 in [1, 2] {
                let c = try Self.cBytes(
                    planes,
                    format,
                    width: width,
                    height: height,
                    threads: threads,
                    tileWidth: UInt32(tileWidth),
                    tileHeight: UInt32(tileHeight)
                )
                #expect(c.status == FB_OK, "\(format) \(size): \(c.message)")
                #expect(
                    c.bytes == swift,
                    "\(format) \(size) threads \(threads): \(c.bytes.count) vs \(swift.count) bytes"
                )
                let maximum = try SurfaceCodec.maximumCompressedByteCount(
                    width: width,
                    height: height,
                    format: format,
                    tileSize: tileSize
                )
                #expect(c.capacity == UInt64(maximum), "\(format) \(size)")
            }
            #expect(Self.headerField(swift, at: 20) == expectedWidth, "\(format) \(size)")
            #expect(Self.headerField(swift, at: 24) == expectedHeight, "\(format) \(size)")
        }
    }

    @Test func smallTilesNeedMoreCapacityThanTheDefaultMaximum() throws {
        var defaultMaximum: UInt64 = 0
        #expect(fb_codec_maximum_compressed_size(PixelFormat.bgra8.fourCC, 130, 66, &defaultMaximum, nil) == FB_OK)
        let small = try Self.cBytes(
            Self.planes(.bgra8, width: 130, height: 66),
            .bgra8,
            width: 130,
            height: 66,
            threads: 1,
            tileWidth: 2,
            tileHeight: 2
        )
        #expect(small.status == FB_OK, "\(small.message)")
        #expect(small.capacity > defaultMaximum)
    }

    @Test func aFullWidthTileOverTheAreaLimitFailsAtCompressionNotWithATrap() throws {
        // 0 x 2048 is valid at creation; on a 4096-wide image the tile is 2^23 pixels.
        let result = try Self.cBytes(
            [[UInt8](repeating: 0, count: 4096 * 4 * 2)],
            .bgra8,
            width: 4096,
            height: 2,
            threads: 1,
            tileWidth: 0,
            tileHeight: 2048
        )
        // Clamped to the image's 2 rows it is 8192 pixels: fine.
        #expect(result.status == FB_OK, "\(result.message)")
        var options = fb_codec_options()
        fb_codec_options_init(&options)
        options.tile_height = 2048
        var codec: OpaquePointer?
        #expect(fb_codec_create_with_options(&options, &codec, nil) == FB_OK)
        defer { fb_codec_destroy(codec) }
        var capacity: UInt64 = 0
        var error = fb_error()
        let status = fb_codec_compressed_capacity(codec, PixelFormat.bgra8.fourCC, 4096, 2048, &capacity, &error)
        #expect(status == FB_ERROR_INVALID_ARGUMENT, "\(Self.message(error))")
    }
}
