import PixelBuffers

/// An 8-bit R'G'B' image in memory: the input side of FrameBus's tests, demos and benchmarks.
///
/// Samples are gamma-encoded R'G'B' (no linearisation), interleaved R, G, B, row after row, with no padding:
/// the sample at column `x`, row `y`, channel `c` is `pixels[(y * width + x) * 3 + c]`.
///
/// ```swift
/// let image = try RGBImage(contentsOfPNGFile: "Corpus/kodak/kodim01.png")
/// let nv12 = image.convertedBytes(to: .yuv420BiPlanarVideoRange8)   // make_frames.py's 420v bytes
/// let buffer = try image.makePixelBuffer(pixelFormat: .yuv420BiPlanarFullRange10)
/// ```
public struct RGBImage: Hashable, Sendable {
    /// The width in pixels.
    public let width: Int
    /// The height in pixels.
    public let height: Int
    /// `width * height * 3` samples: R, G, B for each pixel, row by row.
    public let pixels: [UInt8]

    /// Creates an image from interleaved R, G, B samples.
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/invalidSize`` if a dimension is not positive or exceeds
    ///   ``PixelFormat/maximumDimension``, or `pixels.count` is not `width * height * 3`.
    public init(width: Int, height: Int, pixels: [UInt8]) throws(PixelBufferError) {
        guard width > 0, height > 0, width <= PixelFormat.maximumDimension, height <= PixelFormat.maximumDimension,
            pixels.count == width * height * 3
        else {
            throw PixelBufferError(
                .invalidSize,
                "RGBImage(width: \(width), height: \(height), pixels: \(pixels.count))"
            )
        }
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// For callers that have already validated the size.
    init(uncheckedWidth width: Int, height: Int, pixels: [UInt8]) {
        assert(pixels.count == width * height * 3)
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// Reads a PNG file, exactly as `make_frames.py`'s `to_rgb8` turns a decoded image into 8-bit RGB.
    ///
    /// Every PNG colour type and bit depth is accepted: grey is replicated to R, G and B; an alpha channel is
    /// dropped (not composited); a palette is expanded; 16-bit samples become `(v + 128) / 257`; 1-, 2- and 4-bit
    /// grey is scaled to 8 bits. Gamma, colour-space and transparency chunks are ignored: the stored samples are
    /// taken as R'G'B', as a camera or decoder would hand them over. The size is not cropped (see
    /// ``croppedToEven()``).
    ///
    /// - Parameter path: The file's path.
    /// - Throws: ``PixelBufferError/Code-swift.struct/invalidImage`` if the file cannot be read, is not a PNG, is
    ///   damaged or truncated, or is larger than ``PixelFormat/maximumDimension`` either way.
    public init(contentsOfPNGFile path: String) throws(PixelBufferError) {
        let operation = "RGBImage(contentsOfPNGFile: \(path))"
        let data = try PNGDecoder.readFile(atPath: path, operation: operation)
        try self.init(decoding: data, operation: operation)
    }

    /// Decodes PNG data in memory; see ``init(contentsOfPNGFile:)``.
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/invalidImage`` if the bytes are not a complete, valid PNG.
    public init(pngData: [UInt8]) throws(PixelBufferError) {
        try self.init(decoding: pngData, operation: "RGBImage(pngData: \(pngData.count) bytes)")
    }

    private init(decoding data: [UInt8], operation: String) throws(PixelBufferError) {
        let decoded = try PNGDecoder.decode(data, operation: operation)
        let count = decoded.width * decoded.height
        var rgb = [UInt8](repeating: 0, count: count * 3)
        let source = decoded.samples
        switch decoded.channels {
        case 3:
            rgb = source
        case 4:
            for index in 0..<count {
                rgb[index * 3] = source[index * 4]
                rgb[index * 3 + 1] = source[index * 4 + 1]
                rgb[index * 3 + 2] = source[index * 4 + 2]
            }
        default:  // grey (1) or grey + alpha (2)
            let stride = decoded.channels
            for index in 0..<count {
                let grey = source[index * stride]
                rgb[index * 3] = grey
                rgb[index * 3 + 1] = grey
                rgb[index * 3 + 2] = grey
            }
        }
        self.init(uncheckedWidth: decoded.width, height: decoded.height, pixels: rgb)
    }

    /// The image with its last column and/or row removed so both dimensions are even, as `make_frames.py` does
    /// before converting (4:2:0 needs even sizes). Returns `self` if both are already even.
    ///
    /// - Precondition: `width` and `height` are at least 2.
    public func croppedToEven() -> RGBImage {
        let evenWidth = width & ~1
        let evenHeight = height & ~1
        precondition(evenWidth > 0 && evenHeight > 0, "a 1-pixel-wide or -high image has no even crop")
        if evenWidth == width && evenHeight == height { return self }
        var cropped: [UInt8] = []
        cropped.reserveCapacity(evenWidth * evenHeight * 3)
        for row in 0..<evenHeight {
            let start = row * width * 3
            cropped.append(contentsOf: pixels[start..<(start + evenWidth * 3)])
        }
        return RGBImage(uncheckedWidth: evenWidth, height: evenHeight, pixels: cropped)
    }

    /// Tiles images into one canvas, as `make_frames.py --mosaic` does: row by row, cycling through `images` in
    /// order, each row as tall as the shortest image (the last row is cut to fit), each image cropped at the right
    /// and bottom to fit.
    ///
    /// Useful to time codecs at real frame sizes with photographic content.
    ///
    /// - Parameters:
    ///   - images: The tiles, in order; used again from the first when they run out.
    ///   - width: The canvas width.
    ///   - height: The canvas height.
    /// - Throws: ``PixelBufferError/Code-swift.struct/invalidSize`` if `images` is empty or the canvas size is
    ///   not valid.
    public static func mosaic(of images: [RGBImage], width: Int, height: Int) throws(PixelBufferError) -> RGBImage {
        guard !images.isEmpty, width > 0, height > 0, width <= PixelFormat.maximumDimension,
            height <= PixelFormat.maximumDimension
        else {
            throw PixelBufferError(.invalidSize, "RGBImage.mosaic(of: \(images.count) images, \(width)x\(height))")
        }
        var canvas = [UInt8](repeating: 0, count: width * height * 3)
        let cellHeight = images.map(\.height).min()!
        var y = 0
        var next = 0
        while y < height {
            let rowHeight = min(cellHeight, height - y)
            var x = 0
            while x < width {
                let image = images[next % images.count]
                next += 1
                let tileWidth = min(image.width, width - x)
                for row in 0..<rowHeight {
                    let source = row * image.width * 3
                    let target = ((y + row) * width + x) * 3
                    canvas.replaceSubrange(
                        target..<(target + tileWidth * 3),
                        with: image.pixels[source..<(source + tileWidth * 3)]
                    )
                }
                x += tileWidth
            }
            y += rowHeight
        }
        return RGBImage(uncheckedWidth: width, height: height, pixels: canvas)
    }
}
