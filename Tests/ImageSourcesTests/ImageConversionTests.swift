import Crypto
import Foundation
import ImageSources
import PixelBuffers
import Testing
import TestSupport

/// The corpus folder, found relative to this file (…/Tests/PixelBuffersTests/This.swift → …/Corpus).
private let corpusURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Corpus")

/// SHA-256 of `bytes` as lowercase hex, computed in process (swift-crypto).
private func sha256Hex(_ bytes: [UInt8]) -> String {
    SHA256.hash(data: bytes).map { byte in
        let hex = String(byte, radix: 16)
        return byte < 0x10 ? "0" + hex : hex
    }.joined()
}

private struct ChecksumFile: Decodable {
    struct Frame: Decodable {
        var image: String
        var format: String
        var width: Int
        var height: Int
        var bytes: Int
        var sha256: String
    }
    var frames: [Frame]
}

// MARK: - A minimal PNG writer, so the tests can make every colour type and bit depth

private func crc32(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
    }
    return ~crc
}

private func bigEndian(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
}

private func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
    let body = Array(type.utf8) + data
    return bigEndian(UInt32(data.count)) + body + bigEndian(crc32(body))
}

/// A zlib stream of stored (uncompressed) deflate blocks.
private func zlibStored(_ data: [UInt8]) -> [UInt8] {
    var out: [UInt8] = [0x78, 0x01]
    var offset = 0
    repeat {
        let count = min(65535, data.count - offset)
        let isFinal = offset + count == data.count
        out.append(isFinal ? 1 : 0)
        out += [UInt8(count & 0xFF), UInt8(count >> 8), UInt8(~count & 0xFF), UInt8((~count >> 8) & 0xFF)]
        out += data[offset..<(offset + count)]
        offset += count
    } while offset < data.count
    var a: UInt32 = 1
    var b: UInt32 = 0
    for byte in data {
        a = (a + UInt32(byte)) % 65521
        b = (b + a) % 65521
    }
    return out + bigEndian(b << 16 | a)
}

/// A zlib stream of `count` zero bytes compressed about 158:1: one fixed-Huffman deflate block of a literal 0 and
/// then 258-byte matches at distance 1 (13 bits each), the rest as literals.
private func zlibFixedHuffmanZeros(count: Int) -> [UInt8] {
    var out: [UInt8] = [0x78, 0x01]
    var bitBuffer: UInt64 = 0
    var bitCount = 0
    func put(_ value: UInt64, _ bits: Int) {  // LSB first, as deflate packs bits
        bitBuffer |= value << UInt64(bitCount)
        bitCount += bits
        while bitCount >= 8 {
            out.append(UInt8(truncatingIfNeeded: bitBuffer))
            bitBuffer >>= 8
            bitCount -= 8
        }
    }
    func putCode(_ code: UInt64, _ bits: Int) {  // Huffman codes go most significant bit first
        var reversed: UInt64 = 0
        for bit in 0..<bits { reversed |= ((code >> UInt64(bit)) & 1) << UInt64(bits - 1 - bit) }
        put(reversed, bits)
    }
    put(1, 1)  // BFINAL
    put(1, 2)  // BTYPE 01: fixed Huffman codes
    putCode(0x30, 8)  // literal 0
    var remaining = count - 1
    while remaining >= 258 {
        putCode(0xC5, 8)  // length code 285: 258 bytes
        putCode(0, 5)  // distance code 0: distance 1
        remaining -= 258
    }
    for _ in 0..<remaining { putCode(0x30, 8) }
    putCode(0, 7)  // end of block (256)
    if bitCount > 0 { put(0, 8 - bitCount) }
    let adler = UInt32(count % 65521) << 16 | 1  // a = 1 + Σ0, b = Σa = count
    return out + bigEndian(adler)
}

/// A PNG with the given raw scanlines (without filter bytes; filter 0 is used).
private func makePNG(
    width: Int,
    height: Int,
    bitDepth: UInt8,
    colorType: UInt8,
    scanlines: [[UInt8]],
    extraChunks: [(String, [UInt8])] = []
) -> [UInt8] {
    let header = bigEndian(UInt32(width)) + bigEndian(UInt32(height)) + [bitDepth, colorType, 0, 0, 0]
    var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", header)
    for (type, data) in extraChunks { png += chunk(type, data) }
    png += chunk("IDAT", zlibStored(scanlines.flatMap { [0] + $0 }))
    return png + chunk("IEND", [])
}

private func temporaryPath(_ name: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("framebus-image-\(UUID().uuidString)-\(name)").path
}

// MARK: - Tests

@Suite(.heavyWork, .timeLimit(.minutes(20))) struct ImageConversionTests {
    @Test func sha256HelperGivesTheKnownAnswerForABC() throws {
        #expect(
            sha256Hex(Array("abc".utf8))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        )
    }

    /// Every corpus image in every format listed in checksums.json, bit for bit.
    ///
    /// The conversions are CPU-heavy in a debug build (about a minute on a loaded 2-core machine), so they run on a
    /// thread of their own, one image after the other: the cooperative pool stays free for the other tests, and the
    /// test takes one core at most.
    @Test func corpusConversionsMatchTheReferenceChecksums() async throws {
        let data = try Data(contentsOf: corpusURL.appendingPathComponent("checksums.json"))
        let frames = try JSONDecoder().decode(ChecksumFile.self, from: data).frames
        #expect(frames.count >= 38 * 4)
        let byImage = Dictionary(grouping: frames, by: \.image)
        let (compared, failures) = try await heavyWork { () throws -> (Int, [String]) in
            var compared = 0
            var failures: [String] = []
            for name in byImage.keys.sorted() {
                let image = try RGBImage(contentsOfPNGFile: corpusURL.appendingPathComponent(name).path)
                let cropped = image.croppedToEven()
                for frame in byImage[name]! {
                    let bytes = image.convertedBytes(to: try PixelFormat(frame.format))
                    let digest = sha256Hex(bytes)
                    compared += 1
                    if cropped.width != frame.width || cropped.height != frame.height
                        || bytes.count != frame.bytes || digest != frame.sha256
                    {
                        failures.append(
                            "\(name) \(frame.format): \(cropped.width)x\(cropped.height), \(bytes.count) bytes, \(digest)"
                        )
                    }
                }
            }
            return (compared, failures)
        }
        #expect(compared == frames.count)
        #expect(failures.isEmpty, "\(failures.count) mismatches: \(failures.joined(separator: "; "))")
    }

    @Test func oddSizedImageConvertsItsEvenCrop() throws {
        var pixels: [UInt8] = []
        for index in 0..<(5 * 3) { pixels += [UInt8(index * 16), UInt8(255 - index * 16), UInt8(index * 7)] }
        let image = try RGBImage(width: 5, height: 3, pixels: pixels)
        let cropped = image.croppedToEven()
        #expect(cropped.width == 4 && cropped.height == 2)
        #expect(Array(cropped.pixels[0..<12]) == Array(pixels[0..<12]))
        #expect(Array(cropped.pixels[12..<24]) == Array(pixels[15..<27]))
        for format in PixelFormat.baseFormats {
            #expect(image.convertedBytes(to: format) == cropped.convertedBytes(to: format))
        }
        #expect(image.convertedBytes(to: .bgra8).count == 4 * 2 * 4)
        #expect(image.convertedBytes(to: .yuv420BiPlanarVideoRange10).count == 4 * 2 * 3)
    }

    @Test func whiteBlackAndRedQuantiseToTheDocumentedCodes() throws {
        // 2x2 blocks: white, black, pure red; Y' for red is Kr = 0.2126, Pr = 0.5, Pb = -0.2126 / 1.8556.
        func solid(_ r: UInt8, _ g: UInt8, _ b: UInt8) throws -> RGBImage {
            try RGBImage(width: 2, height: 2, pixels: repeatedPixel([r, g, b], 4))
        }
        let white = try solid(255, 255, 255)
        let black = try solid(0, 0, 0)
        let red = try solid(255, 0, 0)
        #expect(white.convertedBytes(to: .yuv420BiPlanarVideoRange8) == [235, 235, 235, 235, 128, 128])
        #expect(black.convertedBytes(to: .yuv420BiPlanarVideoRange8) == [16, 16, 16, 16, 128, 128])
        #expect(white.convertedBytes(to: .yuv420BiPlanarFullRange8) == [255, 255, 255, 255, 128, 128])
        // Red, 420v: Y = floor(16 + 219 * 0.2126 + 0.5) = 63; Cb = 128 - 224 * 0.11457 → 102; Cr = 128 + 112 = 240.
        #expect(red.convertedBytes(to: .yuv420BiPlanarVideoRange8) == [63, 63, 63, 63, 102, 240])
        // xf20: white Y = 1023, chroma 512, each << 6, little-endian.
        let whiteXF20 = white.convertedBytes(to: .yuv420BiPlanarFullRange10)
        #expect(whiteXF20 == [0xC0, 0xFF, 0xC0, 0xFF, 0xC0, 0xFF, 0xC0, 0xFF, 0x00, 0x80, 0x00, 0x80])
        // xf20 red: Y = floor(1023 * 0.2126 + 0.5) = 217; Cr = 512 + 511.5 → 1024 clipped to 1023.
        let redXF20 = red.convertedBytes(to: .yuv420BiPlanarFullRange10)
        #expect(redXF20[0] == 0x40 && redXF20[1] == 0x36)  // 217 << 6 = 0x3640
        #expect(redXF20[10] == 0xC0 && redXF20[11] == 0xFF)
        #expect(red.convertedBytes(to: .bgra8) == repeatedPixel([0, 0, 255, 255], 4))
        // x420 black: Y = 64 << 6 = 0x1000.
        #expect(black.convertedBytes(to: .yuv420BiPlanarVideoRange10).prefix(2) == [0x00, 0x10])
    }

    @Test func chromaIsTheMeanOfTheFourPixelsOfEachBlock() throws {
        // Two white and two black pixels: Pb = Pr = 0 everywhere, so chroma stays neutral; Y differs per pixel.
        let image = try RGBImage(width: 2, height: 2, pixels: [255, 255, 255, 0, 0, 0, 0, 0, 0, 255, 255, 255])
        #expect(image.convertedBytes(to: .yuv420BiPlanarFullRange8) == [255, 0, 0, 255, 128, 128])
        // Red and blue in one block: Cr = mean(0.5, Pr(blue)), not the value of one corner.
        let mixed = try RGBImage(width: 2, height: 2, pixels: [255, 0, 0, 0, 0, 255, 255, 0, 0, 0, 0, 255])
        let redOnly = try RGBImage(width: 2, height: 2, pixels: repeatedPixel([255, 0, 0], 4))
        #expect(
            mixed.convertedBytes(to: .yuv420BiPlanarFullRange8)[5]
                < redOnly.convertedBytes(to: .yuv420BiPlanarFullRange8)[5]
        )
    }

    @Test func mosaicTilesImagesRowByRowAndCyclesThem() throws {
        let a = try RGBImage(width: 3, height: 2, pixels: [UInt8](repeating: 10, count: 18))
        let b = try RGBImage(width: 2, height: 3, pixels: [UInt8](repeating: 20, count: 18))
        let canvas = try RGBImage.mosaic(of: [a, b], width: 8, height: 3)
        #expect(canvas.width == 8 && canvas.height == 3)
        // Rows are 2 high (the shortest image); row 0: a(3) b(2) a(3); row 1 (1 high, cut): b(2) a(3) b(2) a(1).
        let expected: [UInt8] = [
            10, 10, 10, 20, 20, 10, 10, 10, 10, 10, 10, 20, 20, 10, 10, 10,
            20, 20, 10, 10, 10, 20, 20, 10,
        ]
        for row in 0..<3 {
            for column in 0..<8 {
                #expect(canvas.pixels[(row * 8 + column) * 3] == expected[row * 8 + column])
            }
        }
        #expect(throws: PixelBufferError.self) { try RGBImage.mosaic(of: [], width: 8, height: 8) }
    }

    @Test func imageInitializerRejectsAWrongSampleCount() {
        let error = #expect(throws: PixelBufferError.self) { try RGBImage(width: 2, height: 2, pixels: [1, 2, 3]) }
        #expect(error?.code == .invalidSize)
    }

    // MARK: PNG decoding

    @Test func eightBitGreyIsReplicatedToRGB() throws {
        let scanlines = (0..<16).map { row in (0..<16).map { UInt8(row * 16 + $0) } }
        let image = try RGBImage(
            pngData: makePNG(width: 16, height: 16, bitDepth: 8, colorType: 0, scanlines: scanlines)
        )
        #expect(image.width == 16 && image.height == 16)
        #expect(image.pixels == (0..<256).flatMap { [UInt8($0), UInt8($0), UInt8($0)] })
    }

    @Test func greyWithAlphaDropsTheAlpha() throws {
        let scanlines = [[UInt8]]([[7, 0, 8, 128], [9, 255, 10, 3]])
        let image = try RGBImage(pngData: makePNG(width: 2, height: 2, bitDepth: 8, colorType: 4, scanlines: scanlines))
        #expect(image.pixels == [7, 7, 7, 8, 8, 8, 9, 9, 9, 10, 10, 10])
    }

    @Test func rgbaKeepsTheStoredColourWhateverTheAlpha() throws {
        let scanlines = [[UInt8]]([[200, 100, 50, 0, 1, 2, 3, 77], [40, 50, 60, 255, 250, 251, 252, 1]])
        let image = try RGBImage(pngData: makePNG(width: 2, height: 2, bitDepth: 8, colorType: 6, scanlines: scanlines))
        #expect(image.pixels == [200, 100, 50, 1, 2, 3, 40, 50, 60, 250, 251, 252])
    }

    @Test func gammaColourSpaceAndTransparencyChunksDoNotChangeSamples() throws {
        let scanlines = [[UInt8]]([[10, 20, 30, 128, 128, 128], [250, 5, 77, 0, 0, 0]])
        let chunks: [(String, [UInt8])] = [
            ("gAMA", bigEndian(100_000)),  // gamma 1.0: libpng would re-encode to sRGB
            ("cHRM", [UInt8](repeating: 0, count: 28).enumerated().map { UInt8($0.offset % 3 == 0 ? 1 : 0) }),
            ("tRNS", [0, 0, 0, 0, 0, 0]),  // black is transparent: libpng would composite it
        ]
        let png = makePNG(width: 2, height: 2, bitDepth: 8, colorType: 2, scanlines: scanlines, extraChunks: chunks)
        let image = try RGBImage(pngData: png)
        #expect(image.pixels == scanlines.flatMap { $0 })
    }

    @Test func sixteenBitSamplesRoundLikeMakeFrames() throws {
        // Every 16-bit value once: v → (v + 128) / 257.
        let scanlines = (0..<256).map { row in (0..<256).flatMap { [UInt8(row), UInt8($0)] } }
        let image = try RGBImage(
            pngData: makePNG(width: 256, height: 256, bitDepth: 16, colorType: 0, scanlines: scanlines)
        )
        let expected = (0..<65536).flatMap { value in [UInt8](repeating: UInt8((value + 128) / 257), count: 3) }
        #expect(image.pixels == expected)
    }

    @Test func sixteenBitRGBAWithPartialAlphaRoundsColourAndDropsAlpha() throws {
        // R runs over all values, G is fixed, B = 65535 - R, alpha varies (libpng must not premultiply).
        let scanlines = (0..<256).map { row in
            (0..<256).flatMap { column -> [UInt8] in
                let red = row * 256 + column
                let blue = 65535 - red
                return [UInt8(row), UInt8(column), 0x80, 0x80, UInt8(blue >> 8), UInt8(blue & 0xFF), UInt8(column), 7]
            }
        }
        let image = try RGBImage(
            pngData: makePNG(width: 256, height: 256, bitDepth: 16, colorType: 6, scanlines: scanlines)
        )
        var expected: [UInt8] = []
        for red in 0..<65536 {
            let blue = 65535 - red
            expected += [UInt8((red + 128) / 257), UInt8((0x8080 + 128) / 257), UInt8((blue + 128) / 257)]
        }
        #expect(image.pixels == expected)
    }

    @Test func paletteImagesAreExpandedIgnoringTransparency() throws {
        let palette: [UInt8] = [255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 8, 7]
        let chunks: [(String, [UInt8])] = [("PLTE", palette), ("tRNS", [0, 128])]
        // 2-bit indices, 4 pixels per byte: 0 1 2 3 / 3 2 1 0.
        let scanlines: [[UInt8]] = [[0b00_01_10_11], [0b11_10_01_00]]
        let image = try RGBImage(
            pngData: makePNG(width: 4, height: 2, bitDepth: 2, colorType: 3, scanlines: scanlines, extraChunks: chunks)
        )
        #expect(image.pixels == palette + [9, 8, 7, 0, 0, 255, 0, 255, 0, 255, 0, 0])
    }

    @Test func lowBitDepthGreyIsScaledToEightBits() throws {
        let oneBit = try RGBImage(
            pngData: makePNG(width: 8, height: 1, bitDepth: 1, colorType: 0, scanlines: [[0b1010_0000]])
        )
        #expect(
            oneBit.pixels.enumerated().allSatisfy { $0.element == ($0.offset / 3 == 0 || $0.offset / 3 == 2 ? 255 : 0) }
        )
        let fourBit = try RGBImage(
            pngData: makePNG(width: 2, height: 1, bitDepth: 4, colorType: 0, scanlines: [[0x3F]])
        )
        #expect(fourBit.pixels == [51, 51, 51, 255, 255, 255])
    }

    @Test func corpusImagesDecodeWithTheirSizes() throws {
        let image = try RGBImage(contentsOfPNGFile: corpusURL.appendingPathComponent("skimage/chelsea.png").path)
        #expect(image.width == 451 && image.height == 300 && image.pixels.count == 451 * 300 * 3)
        #expect(image.croppedToEven().width == 450)
    }

    @Test func missingFileIsAnInvalidImage() {
        let error = #expect(throws: PixelBufferError.self) {
            try RGBImage(contentsOfPNGFile: temporaryPath("does-not-exist.png"))
        }
        #expect(error?.code == .invalidImage)
    }

    @Test func directoryIsAnInvalidImage() {
        let error = #expect(throws: PixelBufferError.self) {
            try RGBImage(contentsOfPNGFile: FileManager.default.temporaryDirectory.path)
        }
        #expect(error?.code == .invalidImage)
    }

    @Test func fifoIsRefusedWithoutWaitingForAWriter() throws {
        let path = temporaryPath("fifo.png")
        #expect(mkfifo(path, 0o600) == 0)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let error = #expect(throws: PixelBufferError.self) { try RGBImage(contentsOfPNGFile: path) }
        #expect(error?.code == .invalidImage)
    }

    @Test(arguments: [0, 8, 20, 33, 100, 5000, 200_000])
    func truncatedFileIsAnInvalidImage(byteCount: Int) throws {
        let original = try [UInt8](Data(contentsOf: corpusURL.appendingPathComponent("kodak/kodim23.png")))
        let path = temporaryPath("truncated.png")
        try Data(original.prefix(byteCount)).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let error = #expect(throws: PixelBufferError.self) { try RGBImage(contentsOfPNGFile: path) }
        #expect(error?.code == .invalidImage)
    }

    @Test func textFileIsAnInvalidImage() throws {
        let path = temporaryPath("text.png")
        try Data("this is not a PNG file at all, just some text\n".utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let error = #expect(throws: PixelBufferError.self) { try RGBImage(contentsOfPNGFile: path) }
        #expect(error?.code == .invalidImage)
    }

    @Test func damagedImageDataIsAnInvalidImage() throws {
        var png = makePNG(
            width: 4,
            height: 4,
            bitDepth: 8,
            colorType: 2,
            scanlines: [[UInt8]](repeating: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], count: 4)
        )
        // Flip a byte inside IDAT: its CRC no longer matches.
        png[8 + 25 + 12] ^= 0xFF
        let error = #expect(throws: PixelBufferError.self) { try RGBImage(pngData: png) }
        #expect(error?.code == .invalidImage)
    }

    /// A few hundred bytes claiming 16384 × 16384 RGBA (1 GiB of output) are refused before anything is allocated
    /// for the pixels: deflate cannot expand them that far.
    @Test func tinyFileClaimingAHugeImageIsRefusedBeforeAllocating() throws {
        let png = makePNG(width: 16384, height: 16384, bitDepth: 8, colorType: 6, scanlines: [[0, 0, 0, 0]])
        #expect(png.count < 100)
        let error = #expect(throws: PixelBufferError.self) { try RGBImage(pngData: png) }
        #expect(error?.code == .invalidImage)
        #expect(error?.operation.hasSuffix("too little image data (16 bytes) for 16384x16384") == true, "\(error!)")
    }

    /// The bound is deflate's own limit, so a legitimately well-compressed image (here about 158:1) still decodes.
    @Test func highlyCompressedImageStillDecodes() throws {
        let (width, height) = (2048, 1024)
        let idat = zlibFixedHuffmanZeros(count: height * (width + 1))
        #expect(idat.count * 100 < width * height)
        let header = bigEndian(UInt32(width)) + bigEndian(UInt32(height)) + [8, 0, 0, 0, 0]
        let png =
            [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", header) + chunk("IDAT", idat)
            + chunk("IEND", [])
        let image = try RGBImage(pngData: png)
        #expect(image.width == width && image.height == height)
        #expect(image.pixels.allSatisfy { $0 == 0 })
    }

    @Test func absurdHeaderSizeIsRejectedBeforeDecoding() throws {
        let png = makePNG(width: 100_000, height: 100_000, bitDepth: 8, colorType: 2, scanlines: [])
        let error = #expect(throws: PixelBufferError.self) { try RGBImage(pngData: png) }
        #expect(error?.code == .invalidImage)
    }

    // MARK: Pixel buffers

    private func packed(_ buffer: PixelBuffer) throws -> [UInt8] {
        try buffer.lock()
        defer { try? buffer.unlock() }
        return try buffer.packedBytes()
    }

    @Test(arguments: PixelFormat.baseFormats)
    func pixelBufferHoldsTheConvertedBytesBehindPaddedRows(format: PixelFormat) throws {
        // 451x300: odd, and 450 is not a multiple of the row alignment, so rows are padded.
        let image = try RGBImage(contentsOfPNGFile: corpusURL.appendingPathComponent("skimage/chelsea.png").path)
        for alignment in [64, 256] {
            let buffer = try image.makePixelBuffer(pixelFormat: format, bytesPerRowAlignment: alignment)
            #expect(buffer.width == 450 && buffer.height == 300 && buffer.pixelFormat == format)
            #expect(buffer.bytesPerRow(ofPlane: 0) % alignment == 0)
            #expect(try packed(buffer) == image.convertedBytes(to: format))
            #expect(buffer.attachments.yCbCrMatrix == .itu709 && buffer.attachments.chromaLocationTopField == .center)
        }
    }

    @Test func pixelBufferOfACompressedFormatIsRefused() throws {
        let image = try RGBImage.testPattern(width: 64, height: 64, frameIndex: 0)
        let error = #expect(throws: PixelBufferError.self) {
            try image.makePixelBuffer(pixelFormat: .compressedYUV420BiPlanarVideoRange8)
        }
        #expect(error?.code == .opaqueFormat)
    }

    @Test func writingIntoABufferOfAnotherSizeIsAFormatMismatch() throws {
        let image = try RGBImage.testPattern(width: 64, height: 64, frameIndex: 0)
        let buffer = try PixelBuffer(width: 64, height: 32, pixelFormat: .bgra8)
        try buffer.lock()
        defer { try? buffer.unlock() }
        let error = #expect(throws: PixelBufferError.self) { try image.write(into: buffer) }
        #expect(error?.code == .formatMismatch)
    }

    @Test func writingIntoAnUnlockedBufferFails() throws {
        let image = try RGBImage.testPattern(width: 64, height: 64, frameIndex: 0)
        let buffer = try PixelBuffer(width: 64, height: 64, pixelFormat: .yuv420BiPlanarFullRange8)
        let error = #expect(throws: PixelBufferError.self) { try image.write(into: buffer) }
        #expect(error?.code == .surface)
        let patternError = #expect(throws: PixelBufferError.self) { try TestPattern.fill(buffer, frameIndex: 1) }
        #expect(patternError?.code == .surface)
    }

    // MARK: Test pattern

    @Test func consecutivePatternFramesDifferAndEqualIndicesRepeat() throws {
        let first = try RGBImage.testPattern(width: 640, height: 360, frameIndex: 41)
        let second = try RGBImage.testPattern(width: 640, height: 360, frameIndex: 42)
        let again = try RGBImage.testPattern(width: 640, height: 360, frameIndex: 41)
        #expect(first.width == 640 && first.height == 360 && first.pixels.count == 640 * 360 * 3)
        #expect(first != second)
        #expect(first == again)
    }

    @Test func patternCounterShowsTheFrameIndexInBinary() throws {
        let image = try RGBImage.testPattern(width: 640, height: 360, frameIndex: 0b1011)
        let row = image.height - 1
        let cellWidth = 640 / 32
        let bits = (0..<32).map { cell in image.pixels[(row * 640 + cell * cellWidth + cellWidth / 2) * 3] == 255 }
        #expect(bits == (0..<32).map { cell in (0b1011 >> (31 - cell)) & 1 == 1 })
    }

    @Test(arguments: PixelFormat.baseFormats)
    func directPatternFillEqualsConvertingTheRGBPattern(format: PixelFormat) throws {
        for (width, height) in [(320, 180), (1920, 1080), (2, 2), (66, 14)] {
            let pattern = try TestPattern(width: width, height: height, pixelFormat: format)
            let buffer = try PixelBuffer(width: width, height: height, pixelFormat: format)
            for frameIndex in [0, 7, 1000, -3] {
                if width > 320 && frameIndex != 7 { continue }  // one 1080p frame per format is enough
                try buffer.lock()
                try pattern.fill(buffer, frameIndex: frameIndex)
                try buffer.unlock()
                let expected = try RGBImage.testPattern(width: width, height: height, frameIndex: frameIndex)
                #expect(
                    try packed(buffer) == expected.convertedBytes(to: format),
                    "\(width)x\(height) frame \(frameIndex)"
                )
            }
        }
    }

    @Test func patternRefusesCompressedFormatsAndOddSizesFor420() {
        #expect(throws: PixelBufferError.self) {
            try TestPattern(width: 64, height: 64, pixelFormat: .compressedBGRA8)
        }
        let error = #expect(throws: PixelBufferError.self) {
            try TestPattern(width: 63, height: 64, pixelFormat: .yuv420BiPlanarVideoRange8)
        }
        #expect(error?.code == .invalidSize)
        #expect(throws: PixelBufferError.self) { try RGBImage.testPattern(width: 0, height: 10, frameIndex: 0) }
    }
}

private func repeatedPixel(_ pixel: [UInt8], _ count: Int) -> [UInt8] {
    Array([[UInt8]](repeating: pixel, count: count).joined())
}
