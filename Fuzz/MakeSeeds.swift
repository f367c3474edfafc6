// Writes valid compressed surfaces (every layout version, format and mode, small sizes) as the fuzzer's seed corpus.
import Glibc

@main
enum MakeSeeds {
    static func main() {
        let directory = CommandLine.arguments[1]
        let formats: [(UInt32, CodecFormat.Kind)] = [(0x3432_3076, .yuv8), (0x7834_3230, .yuv16), (0x4247_5241, .bgra)]
        var seed: UInt64 = 1
        func random() -> UInt64 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return seed >> 33
        }
        var index = 0
        var version3Seeds = 0
        var version4Seeds = 0
        var version5Seeds = 0
        var version6Seeds = 0
        var version7Seeds = 0
        var version8Seeds = 0
        for (fourCC, kind) in formats {
            for version in TileGrid.supportedLayoutVersions {
                for (width, height, tileWidth, tileHeight, style) in [
                    (16, 8, 16, 8, 0), (32, 16, 16, 4, 1), (24, 12, 8, 4, 2), (20, 10, 20, 6, 3), (8, 8, 4, 4, 4),
                    (64, 32, 64, 32, 5), (64, 32, 32, 16, 6),
                    // Bands of 8 rows: Up entries (version 5) in tile rows 1 to 7, and again after row 8.
                    (64, 80, 64, 8, 5), (64, 80, 64, 8, 6),
                    // Sparse ink on a flat page: LZ4 blocks full of skewed literals, coded (version 6), their
                    // sequences too (version 7).
                    (128, 64, 128, 32, 7),
                ] {
                    let format = CodecFormat(kind: kind)
                    let grid = TileGrid(
                        format: format,
                        width: width,
                        height: height,
                        tileWidth: tileWidth,
                        tileHeight: tileHeight,
                        layoutVersion: version
                    )!
                    let count = grid.rawImageByteCount
                    let image = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 64)
                    for i in 0..<count {
                        let value: UInt64
                        switch style {
                        case 0: value = 7  // solid
                        case 1: value = UInt64(i / 3 % 5)  // repetitive (LZ4)
                        case 2: value = UInt64(i % 97) &+ random() % 4  // smooth (packed)
                        case 3: value = random()  // noise (raw), padding bits set in 16-bit formats
                        case 4: value = UInt64(i % 2 == 0 ? 0x40 : 0x81)  // 10-bit words
                        case 7:  // sparse ink: one sample in ten dark, the rest the page's value
                            value = random() % 10 == 0 ? 40 &+ random() % 3 : 230
                        case 6:  // screen-like per sample, 16-bit padding bits zero (packed10LZ4 in version 4)
                            let j = i / format.bytesPerSample
                            let x = j % width
                            let y = j / width % height
                            let ink = (x / 5 + y / 9) % 3 == 0 && x % 5 < 4 && y % 9 < 6 && (x * 7 + y * 3) % 5 < 2
                            let sample = ink ? 0x2A40 : 0xE6C0
                            value = format.bytesPerSample == 2 && i % 2 == 0 ? UInt64(sample & 0xFF) : UInt64(sample >> 8)
                        default:  // screen-like (packed8LZ4 in version 3, packed16LZ4 in version 4): a repeated "glyph"
                            let x = i % width
                            let y = i / width % height
                            let glyph = (x / 6 * 7 + y / 10 * 3) % 5
                            let ink = x % 6 < 5 && y % 10 < 7 && (glyph * 37 + x % 6 * 5 + y % 10 * 11) % 4 == 0
                            value = ink ? 40 : 230
                        }
                        image.storeBytes(of: UInt8(truncatingIfNeeded: value), toByteOffset: i, as: UInt8.self)
                    }
                    let bytesPerSample = format.bytesPerSample
                    let rowBytes = kind == .bgra ? width * 4 : width * bytesPerSample
                    let planes = ImagePlanes(
                        plane0: image,
                        bytesPerRow0: rowBytes,
                        plane1: kind == .bgra ? image : image + rowBytes * height,
                        bytesPerRow1: rowBytes
                    )
                    let output = UnsafeMutableRawPointer.allocate(byteCount: grid.maximumByteCount, alignment: 64)
                    // Both encoder efforts: the fast search's blocks (more, shorter matches; the tile above through
                    // LZ4_compress_fast_continue) and the HC search's.
                    for searchesHarder in [false, true] {
                        var encoder = grid
                        encoder.searchesHarder = searchesHarder
                        let used = TileCodec.encode(encoder, baseFourCC: fourCC, from: planes, into: output, threads: 1)
                        let stated = output.load(fromByteOffset: 4, as: UInt16.self)
                        // An image without LZ4 modes gives the same bytes either way: one seed.
                        if searchesHarder && stated < 3 { continue }
                        if stated == 3 { version3Seeds += 1 }
                        if stated == 4 { version4Seeds += 1 }
                        if stated == 5 { version5Seeds += 1 }
                        if stated == 6 { version6Seeds += 1 }
                        if stated == 7 { version7Seeds += 1 }
                        if stated == 8 { version8Seeds += 1 }
                        let file = fopen("\(directory)/seed\(index)", "wb")!
                        fwrite(output, 1, used, file)
                        fclose(file)
                        index += 1
                    }
                    image.deallocate()
                    output.deallocate()
                }
            }
        }
        // Screen frames at the default tile size: the encoder's taller bands (ScreenBands, 256 rows) with zstd
        // entries, a text page whose every other line is blank so that plane 0 passes the frame's screen test.
        var screenBandSeeds = 0
        for (fourCC, kind) in formats {
            let (width, height) = (64, 600)
            var grid = TileGrid(format: CodecFormat(kind: kind), width: width, height: height, tileWidth: width,
                tileHeight: 64)!
            grid.choosesScreenBands = true
            let count = grid.rawImageByteCount
            let image = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 64)
            let rowBytes = kind == .bgra ? width * 4 : width * grid.format.bytesPerSample
            for i in 0..<count {
                let x = i % rowBytes
                let y = i / rowBytes
                let ink = y / 10 % 2 == 0 && x % 6 < 5 && y % 10 < 7 && (x * 7 + y * 3 + y / 10) % 5 < 2
                image.storeBytes(of: UInt8(ink ? 40 : 230), toByteOffset: i, as: UInt8.self)
            }
            let planes = ImagePlanes(
                plane0: image,
                bytesPerRow0: rowBytes,
                plane1: kind == .bgra ? image : image + rowBytes * height,
                bytesPerRow1: rowBytes
            )
            let bands = ScreenBands.grid(grid, for: planes)
            let output = UnsafeMutableRawPointer.allocate(byteCount: grid.maximumByteCount, alignment: 64)
            let used = TileCodec.encode(bands, baseFourCC: fourCC, from: planes, into: output, threads: 1)
            if bands.usesScreenBands && output.load(fromByteOffset: 24, as: UInt32.self) == UInt32(ScreenBands.rows) {
                screenBandSeeds += 1
            }
            let file = fopen("\(directory)/seed\(index)", "wb")!
            fwrite(output, 1, used, file)
            fclose(file)
            index += 1
            image.deallocate()
            output.deallocate()
        }
        // The screen-like seeds must exercise packed8LZ4 (version 3) for the 8-bit formats and packed10LZ4 or
        // packed16LZ4 (version 4) for the 16-bit ones.
        // Version 5 seeds carry Up entries (the banded screen-like images); version 8 seeds zstd entries (the screen-like
        // images at effort fast).
        print(
            "\(index) seeds, \(version3Seeds) of layout version 3, \(version4Seeds) of layout version 4, "
                + "\(version5Seeds) of layout version 5, \(version6Seeds) of layout version 6 (coded literals), "
                + "\(version7Seeds) of layout version 7 (coded sequences), \(version8Seeds) of layout version 8 (zstd), "
                + "\(screenBandSeeds) in 256-row screen bands"
        )
        if version3Seeds == 0 || version4Seeds == 0 || version5Seeds == 0 || version6Seeds == 0 || version7Seeds == 0
            || version8Seeds == 0 || screenBandSeeds != formats.count
        {
            exit(1)
        }
    }
}
