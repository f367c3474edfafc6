import Foundation
import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// Layout version 8: screen content stored as zstd frames (mode `zstd`, docs/COMPRESSED-LAYOUT.md §6.9) by the
/// default encoder (effort fast); photographs keep the modes of version 7; hostile frames get typed errors.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct ZstdModeTests {
    static let formats: [PixelFormat] = [
        .yuv420BiPlanarVideoRange8, .yuv420BiPlanarFullRange8, .yuv420BiPlanarVideoRange10,
        .yuv420BiPlanarFullRange10, .bgra8,
    ]

    /// Odd sizes (BGRA; 4:2:0 needs even ones, so the nearest even size not a multiple of 8), full-width bands and
    /// tiles narrower than the image.
    @Test(arguments: formats, [SurfaceCodec.TileSize(width: nil, height: 64), .init(width: 192, height: 32)])
    func screenContentIsStoredAsZstdFramesAndDecodesExactly(_ format: PixelFormat, tiles: SurfaceCodec.TileSize) throws {
        let (width, height) = format == .bgra8 ? (333, 131) : (322, 130)
        let bytes = screenBytes(format, width: width, height: height, seed: 8)
        let (_, compressed, _) = try ScreenContentTests.compress(
            bytes,
            format,
            width: width,
            height: height,
            tiles: tiles,
            layoutVersion: 8,
            effort: .fast
        )
        let modes = try SurfaceCodec.modeCounts(of: compressed)
        #expect(modes["zstd", default: 0] > 0, "\(modes)")
        #expect(try ScreenContentTests.statedVersion(compressed) == 8)
        for threads in [1, 2] {
            let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
            try SurfaceCodec.decompress(compressed, into: output, options: .split(threads))
            #expect(try packed(output) == bytes)
        }
    }

    /// The default options are layout version 8 at effort fast: screen content takes zstd with no option given.
    @Test func theDefaultEncoderStoresScreenContentAsZstd() throws {
        let bytes = screenBytes(.bgra8, width: 256, height: 128, seed: 9)
        let source = try makeBuffer(bytes, width: 256, height: 128, format: .bgra8)
        let (compressed, _, output) = try roundTrip(source)
        #expect(try SurfaceCodec.modeCounts(of: compressed)["zstd", default: 0] > 0)
        #expect(try packed(output) == bytes)
    }

    /// Content that does not look like a screen (a noisy gradient) takes exactly the bytes version 7 wrote: the
    /// zstd path is never tried on it.
    @Test(arguments: [PixelFormat.yuv420BiPlanarVideoRange8, .yuv420BiPlanarVideoRange10, .bgra8])
    func photographsKeepTheSurfaceVersion7Wrote(_ format: PixelFormat) throws {
        let bytes = syntheticBytes(format, width: 320, height: 192, seed: 10, noise: 24)
        var surfaces: [[UInt8]] = []
        for version in [7, 8] {
            let (_, compressed, statistics) = try ScreenContentTests.compress(
                bytes,
                format,
                width: 320,
                height: 192,
                layoutVersion: version,
                effort: .fast
            )
            #expect(try SurfaceCodec.modeCounts(of: compressed)["zstd"] == nil)
            try compressed.lock([.readOnly])
            surfaces.append(compressed.surface.withUnsafeBytes { Array($0.prefix(statistics.compressedByteCount)) })
            try compressed.unlock([.readOnly])
        }
        #expect(surfaces[0] == surfaces[1])
    }

    /// Effort best writes zstd frames too, at ``ZstdFrame/bestLevel``: other bytes than fast's, smaller, decoded
    /// exactly.
    @Test func effortBestWritesSmallerZstdFramesThanFast() throws {
        let bytes = screenBytes(.yuv420BiPlanarVideoRange8, width: 320, height: 128, seed: 11)
        var sizes: [SurfaceCodec.Effort: Int] = [:]
        for effort in SurfaceCodec.Effort.allCases {
            let (_, compressed, _) = try ScreenContentTests.compress(
                bytes,
                .yuv420BiPlanarVideoRange8,
                width: 320,
                height: 128,
                layoutVersion: 8,
                effort: effort
            )
            let modes = try SurfaceCodec.modeCounts(of: compressed)
            #expect(modes["zstd", default: 0] > 0, "\(effort): \(modes)")
            sizes[effort] = try SurfaceCodec.bytesUsed(of: compressed)
            let output = try PixelBuffer(width: 320, height: 128, pixelFormat: .yuv420BiPlanarVideoRange8)
            try SurfaceCodecContext().decompress(compressed, into: output)
            #expect(try packed(output) == bytes, "\(effort)")
        }
        #expect(sizes[.best]! < sizes[.fast]!, "\(sizes)")
    }

    // MARK: Hand-made surfaces: one 16 × 16 420v tile (Y 256 bytes, Cb and Cr 64 each, both solid)

    static let grid = TileGrid(
        format: CodecFormat(kind: .yuv8),
        width: 16,
        height: 16,
        tileWidth: 16,
        tileHeight: 16,
        layoutVersion: 8
    )!

    /// A surface of `grid` (any layout version) whose Y entry has mode byte `mode` and payload `y`; Cb and Cr solid
    /// (128). Header, table and checksums are consistent, so a decoder reaches the payload.
    static func surface(yMode mode: UInt8, _ y: [UInt8], layoutVersion: Int = 8) -> [UInt8] {
        let grid = TileGrid(
            format: CodecFormat(kind: .yuv8),
            width: 16,
            height: 16,
            tileWidth: 16,
            tileHeight: 16,
            layoutVersion: layoutVersion
        )!
        let payloads: [[UInt8]] = [y, [128], [128]]
        let used = grid.payloadStart + payloads.reduce(0) { $0 + $1.count }
        var bytes = [UInt8](repeating: 0, count: used)
        bytes.withUnsafeMutableBytes { p in
            var offset = grid.payloadStart
            for (index, payload) in payloads.enumerated() {
                payload.withUnsafeBytes { (p.baseAddress! + offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                let checksum = payload.withUnsafeBytes { Checksum.hash($0.baseAddress!, count: $0.count) }
                let e = p.baseAddress! + 64 + 16 * index
                e.storeBytes(of: UInt32(payload.count).littleEndian, toByteOffset: 0, as: UInt32.self)
                e.storeBytes(of: UInt32(index == 0 ? mode : TileMode.solid.rawValue), toByteOffset: 4, as: UInt32.self)
                e.storeBytes(of: checksum.littleEndian, toByteOffset: 8, as: UInt64.self)
                offset += payload.count
            }
            TileCodec.writeHeader(grid, baseFourCC: 0x3432_3076, bytesUsed: used, into: p.baseAddress!)
        }
        return bytes
    }

    /// Decodes `bytes` as a surface (parse, then decode into private planes); returns the image or throws the
    /// decoder's error.
    static func decode(_ bytes: [UInt8]) throws(CompressionError) -> [UInt8] {
        var image = [UInt8](repeating: 0, count: grid.rawImageByteCount)
        var failure: CompressionError? = nil
        bytes.withUnsafeBytes { surface in
            image.withUnsafeMutableBytes { out in
                do throws(CompressionError) {
                    let header = try TileCodec.parse(surface.baseAddress!, count: surface.count)
                    let planes = ImagePlanes(
                        plane0: out.baseAddress!,
                        bytesPerRow0: 16,
                        plane1: out.baseAddress! + 256,
                        bytesPerRow1: 16
                    )
                    try TileCodec.decode(header, from: surface.baseAddress!, tiles: 0..<1, into: planes, threads: 1)
                } catch {
                    failure = error
                }
            }
        }
        if let failure { throw failure }
        return image
    }

    /// A zstd frame of `bytes` made by the codec's own encoder path (level 1, content size, no checksum).
    static func frame(_ bytes: [UInt8]) -> [UInt8] {
        let contexts = ZstdContexts()
        var output = [UInt8](repeating: 0, count: bytes.count + 64)
        let written = bytes.withUnsafeBytes { source in
            output.withUnsafeMutableBytes {
                ZstdFrame.compress(
                    source.baseAddress!,
                    count: source.count,
                    into: $0.baseAddress!,
                    capacity: $0.count,
                    level: 1,
                    contexts: contexts
                )
            }
        }
        precondition(written > 0)
        return Array(output.prefix(written))
    }

    /// 256 bytes of Y that zstd shrinks: a repeated ramp.
    static let y: [UInt8] = (0..<256).map { UInt8(($0 % 32) * 7) }

    static func expected(_ y: [UInt8]) -> [UInt8] { y + [UInt8](repeating: 128, count: 128) }

    /// A hand-written frame (RFC 8878): magic, frame header descriptor `fhd`, `header` (window descriptor,
    /// dictionary ID, content size as `fhd` says), then one last RLE block of 256 bytes of `value`.
    static func rleFrame(fhd: UInt8, header: [UInt8], value: UInt8 = 77) -> [UInt8] {
        // Block header: last block (bit 0), type RLE (1, bits 1-2), size 256 (bits 3-23).
        let block = UInt32(1) | UInt32(1) << 1 | UInt32(256) << 3
        return [0x28, 0xB5, 0x2F, 0xFD, fhd] + header
            + [UInt8(block & 0xFF), UInt8(block >> 8 & 0xFF), UInt8(block >> 16 & 0xFF), value]
    }

    @Test func aZstdFrameOfTheSamplesDecodesExactly() throws {
        #expect(try Self.decode(Self.surface(yMode: TileMode.zstd.rawValue, Self.frame(Self.y))) == Self.expected(Self.y))
    }

    /// Any RFC 8878 frame inside §6.9's rules is valid, not only what libzstd's encoder writes: an RLE block in a
    /// single-segment frame, and in a frame with a window descriptor (1 KiB) and a 2-byte content size.
    @Test func handWrittenFramesWithinTheRulesDecode() throws {
        let value = [UInt8](repeating: 77, count: 256)
        // Single segment, 2-byte content size (flag 1: value − 256 = 0).
        let singleSegment = Self.rleFrame(fhd: 0x60, header: [0, 0])
        #expect(try Self.decode(Self.surface(yMode: 13, singleSegment)) == Self.expected(value))
        // Window descriptor exponent 0 (1 KiB), 2-byte content size.
        let windowed = Self.rleFrame(fhd: 0x40, header: [0x00, 0, 0])
        #expect(try Self.decode(Self.surface(yMode: 13, windowed)) == Self.expected(value))
    }

    static func expectCorrupt(_ payload: [UInt8], _ comment: Comment) {
        let error = #expect(throws: CompressionError.self, comment) {
            try Self.decode(Self.surface(yMode: TileMode.zstd.rawValue, payload))
        }
        #expect(error?.code == .corruptPayload, comment)
    }

    @Test func framesThatBreakTheRulesAreCorruptPayloads() throws {
        let good = Self.frame(Self.y)
        Self.expectCorrupt(Self.frame(Array(Self.y.dropLast())), "content size one byte short")
        Self.expectCorrupt(Self.frame(Self.y + Self.y.prefix(40)), "a frame claiming a bigger output")
        Self.expectCorrupt(Array(good.dropLast(3)), "a truncated frame")
        Self.expectCorrupt(good + [0], "a byte after the frame")
        Self.expectCorrupt(Self.frame(Array(Self.y.prefix(100))) + Self.frame(Array(Self.y.suffix(156))), "two frames")
        Self.expectCorrupt([0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 2, 3, 4], "a skippable frame")
        var magic = good
        magic[0] ^= 1
        Self.expectCorrupt(magic, "a wrong magic number")
        // Dictionary ID 7 (1 byte), single segment, 2-byte content size.
        Self.expectCorrupt(Self.rleFrame(fhd: 0x61, header: [7, 0, 0]), "a dictionary")
        // Window descriptor exponent 14: a 16 MiB window, over the 8 MiB bound.
        Self.expectCorrupt(Self.rleFrame(fhd: 0x40, header: [14 << 3, 0, 0]), "a window over 8 MiB")
        // No content size (window descriptor, content size flag 0, not single segment).
        Self.expectCorrupt(Self.rleFrame(fhd: 0x00, header: [0x00]), "no content size")
        // The RLE block says 256 bytes, the header 255 + 256.
        Self.expectCorrupt(Self.rleFrame(fhd: 0x60, header: [255, 0]), "a content size the blocks do not fill")
        // A compressed block whose bytes were damaged: libzstd refuses it (or it decodes to other bytes, which the
        // payload checksum would catch; the surface here is resealed, so only a refusal or wrong pixels are allowed).
        var damaged = good
        for i in 9..<damaged.count { damaged[i] = ~damaged[i] }
        if let image = try? Self.decode(Self.surface(yMode: TileMode.zstd.rawValue, damaged)) {
            #expect(image != Self.expected(Self.y))
        }
    }

    /// Mode 13 exists from layout version 8; 29 and 45 (13 + the coded flags) never: zstd is not an LZ4 block.
    @Test func zstdEntriesOutsideVersion8AreInvalidModes() throws {
        let frame = Self.frame(Self.y)
        for (mode, version) in [(UInt8(13), 7), (29, 8), (45, 8)] {
            let error = #expect(throws: CompressionError.self) {
                try Self.decode(Self.surface(yMode: mode, frame, layoutVersion: version))
            }
            #expect(error?.code == .invalidTileMode, "mode \(mode) version \(version)")
        }
    }

    /// A golden vector: a version 8 surface this encoder wrote (BGRA 48 × 24 screen content, full-width bands of 8
    /// rows, libzstd 1.5.4 at level 1), which every later decoder must decode to exactly these pixels.
    @Test func theVersion8GoldenVectorDecodesExactly() throws {
        let bytes = [UInt8](Data(base64Encoded: zstdGoldenSurface)!)
        let header = try bytes.withUnsafeBytes { try TileCodec.parse($0.baseAddress!, count: $0.count) }
        #expect(header.grid.layoutVersion == 8)
        #expect(header.entries.filter { $0.mode == .zstd }.count == 4)
        #expect(header.entries.contains { $0.mode == .packed8LZ4 })
        let source = screenBytes(.bgra8, width: 48, height: 24, seed: 12)
        var image = [UInt8](repeating: 0, count: source.count)
        try bytes.withUnsafeBytes { surface in
            try image.withUnsafeMutableBytes { out in
                let planes = ImagePlanes(
                    plane0: out.baseAddress!,
                    bytesPerRow0: 48 * 4,
                    plane1: out.baseAddress!,
                    bytesPerRow1: 48 * 4
                )
                try TileCodec.decode(header, from: surface.baseAddress!, tiles: 0..<header.grid.tileCount, into: planes, threads: 1)
            }
        }
        #expect(image == source)
    }
}

/// Written by the encoder of the commit that added layout version 8 (`ScreenContentTests.compress` of `screenBytes(.bgra8, width: 48,
/// height: 24, seed: 12)`, full-width bands of 8 rows, layout version 8, effort fast; libzstd 1.5.4): zstd, solid,
/// lz4 and packed8LZ4 entries. Base64.
let zstdGoldenSurface =
    "RkJTQwgAQABBUkdCMAAAABgAAAAwAAAACAAAAAwAAAAJBQAAAAAAAMHeZMew18ZhAAAAAAAAAAAAAAAAAAAAAEMAAAANAAAAYxnwuit4" +
    "bP8BAAAAAQAAAGG2Y5I2Xtt3AQAAAAEAAACBrTIb2UaBBUMAAAANAAAA1lipu0NIcRVDAAAADQAAAGMZ8LoreGz/AQAAAAEAAABhtmOS" +
    "Nl7bdwEAAAABAAAAga0yG9lGgQVDAAAADQAAANZYqbtDSHEV0gAAAAIAAAD2aXxCJOI2y7cAAAAGAAAAxjNF4o5qbdu3AAAABgAAAK19" +
    "/oqAeDdtuQAAAAYAAABwCySKa1uxnyi1L/1ggADNAQAEA0VHSkxPUVRWWVteYGNlaGptb3J0d3l8foGDhoiLjZCSlZeanJ+hpKapq66w" +
    "s7W4ugEA0DRVBQX3CSi1L/1ggADNAQAEA1dZXF5hY2Zoa21wcnV3enx/gYSGiYuOkJOVmJqdn6Kkp6msrrGztri7vcDCxcfKzAEA0DRV" +
    "BQUotS/9YIAAzQEABANFR0pMT1FUVllbXmBjZWhqbW9ydHd5fH6Bg4aIi42QkpWXmpyfoaSmqauusLO1uLoBANA0VQUF9wkotS/9YIAA" +
    "zQEABANXWVxeYWNmaGttcHJ1d3p8f4GEhomLjpCTlZianZ+ipKeprK6xs7a4u73AwsXHyswBANA0VQUFE3gBADEoKOgBACMo6AkAAwwA" +
    "AxgAECgYAAAOAAMvABB4JwACKgACBgACAgAAIgACKAACOQAIMAAAKAARKAMAAgIAAwwAADEAAgUAAQwABmAAADAAABMAAAYAAgIAAAwA" +
    "AC0AAJsAAGYANego6DAAAQ4AABEAAisAACMAAgwAAVsAAkwAABMABDAAAhQAALAAAS0AAh0AAScAADEAABYAAAYAJCjoMAABcAAAQQAB" +
    "JAAAAgAAIAAABgAABAAAewABEAAFkAAAIgAPAgAMUOjo6OjoS2ZmZmADAEIAZmAAAQAh8DsIAJEU4AIAAACt27oOAAAJABAtEgDitIDb" +
    "uq3bAi4AAC0AAC4cAAIJAHHQAi3QAm4LFQBw0AIu0AJA60IAEQAJALAuALQuAACt6wJACzAAQQDgAi0IAAIJAICt6wIA4AIA0AYAcq3r" +
    "tgDQAoAnAAEJAHBu2wIA0LoufgAwAC7QkAADRQABCQBhgAsALQC0fgASulQAYC3gugAAuCQAgOC2LuACAOACS2ZmZmADAEIAZmAAAQAh" +
    "8DwIAJET0AIAAABu67YOAAAJABAuEgDiuEDrtm7rAi0AAC4AAC0cAAIJAHHgAi7gAq0LFQBw4AIt4AKA20IAEQAJALAtALgtAABu2wKA" +
    "CzAAQQDQAi4IAAIJAIBu2wIA0AIA4AYAcm7bugDgAkAnAAEJAHCt6wIA4LYtfgAwAC3gkAADRQABCQBhQAsALgC4fgAStlQAYC7QtgAA" +
    "tCQAgNC6LdACANACS4iIiIADAEIAiHAAAQAi+JcIAEEAxwDbCgAy3NvcCQADDAAS3BgAMNwA2xoAAg4AMtwAABYAAwIAAjEAEdwCACbb" +
    "3BAAMNsA3EUAAyYAAgwAE9sSACDc2woAAxsAAioAAwIAAgwAASAAAWYAAm4AINzbWgAQ3B8AAygAAgwAINvcIAAALgACGQAAKgABIQAA" +
    "FwAEAgAADAACbwAAhQAAAgAATQABAgAg3ACJAASBAJDb3FwAAAAAAAA="
