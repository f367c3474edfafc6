import CFrameBusABI
import SurfaceCompression
import TestSupport
import Testing

@testable import FrameBus

/// `fb_codec_options.effort`: a C codec at each effort writes exactly the bytes a Swift `SurfaceCodecContext` at that
/// effort writes, and an effort that is neither value is refused at creation.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct CodecEffortTests {
    /// A screen-like BGRA image (rows of a repeated pattern with a few changes), where the two efforts differ.
    static func screen(width: Int, height: Int) -> [[UInt8]] {
        [
            (0..<(width * height * 4)).map { offset in
                let x = offset / 4 % width
                let y = offset / 4 / width
                let ink = (x / 6 + y / 11) % 3 == 0 && x % 6 < 4 && y % 11 < 8 && (x * 5 + y * 3) % 7 < 3
                return ink ? UInt8(truncatingIfNeeded: 30 + offset % 4) : UInt8(truncatingIfNeeded: 230 - y / 40)
            }
        ]
    }

    @Test func eachEffortWritesSwiftsBytes() throws {
        let (width, height) = (256, 64 * 3)
        let planes = Self.screen(width: width, height: height)
        for (value, effort) in [
            (UInt32(FB_CODEC_EFFORT_FAST), SurfaceCodec.Effort.fast), (UInt32(FB_CODEC_EFFORT_BEST), .best),
        ] {
            let c = try CodecTileSizeTests.cBytes(
                planes,
                .bgra8,
                width: width,
                height: height,
                threads: 1,
                tileWidth: 0,
                tileHeight: 0,
                effort: value
            )
            #expect(c.status == FB_OK, "\(c.message)")
            let swift = try CodecTileSizeTests.swiftBytes(
                planes,
                .bgra8,
                width: width,
                height: height,
                tileSize: .default,
                effort: effort
            )
            #expect(c.bytes == swift, "effort \(effort)")
        }
    }

    @Test func anUnknownEffortIsRefused() throws {
        var options = fb_codec_options()
        fb_codec_options_init(&options)
        #expect(options.effort == UInt32(FB_CODEC_EFFORT_FAST))
        options.effort = 2
        var codec: OpaquePointer?
        var error = fb_error()
        #expect(fb_codec_create_with_options(&options, &codec, &error) == FB_ERROR_INVALID_ARGUMENT)
        #expect(codec == nil)
        #expect(CodecTileSizeTests.message(error).contains("effort 2"))
    }
}
