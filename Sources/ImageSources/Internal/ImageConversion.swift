import PixelBuffers

/// The R'G'B' → Y'CbCr / BGRA kernels behind ``RGBImage/convertedBytes(to:)`` and
/// ``RGBImage/makePixelBuffer(pixelFormat:)``, bit-exact with `Corpus/make_frames.py`.
///
/// Bit-exactness needs the same float64 operations in the same order as numpy:
/// - `f = v / 255.0` per channel (a division, not a multiplication by a reciprocal);
/// - `y = (KR*r + KG*g) + KB*b` with `KG = (1 - KR) - KB`;
/// - `pb = (b - y) / (2 * (1 - KB))`, `pr = (r - y) / (2 * (1 - KR))` (divisions by the constants);
/// - the 2×2 chroma mean of `reshape(h/2, 2, w/2, 2).mean(axis=(1, 3))` sums as `(p00 + p01) + (p10 + p11)`
///   then divides by 4 (checked against numpy 2.4 on random data of the corpus sizes);
/// - quantisation `clip(floor(offset + scale * x + 0.5), lo, hi)`.
/// Swift does not contract `a * b + c` into a fused multiply-add unless asked, so the roundings match.
/// The per-channel products `KR * f(v)` are the same doubles whether computed per pixel or once per value, so
/// they come from 256-entry tables.
enum ImageConversion {
    static let kr = 0.2126
    static let kb = 0.0722
    static let kg = 1.0 - kr - kb
    static let pbDivisor = 2.0 * (1.0 - kb)
    static let prDivisor = 2.0 * (1.0 - kr)

    /// `v / 255.0` for every 8-bit value.
    static let unit: [Double] = (0..<256).map { Double($0) / 255.0 }
    static let redLuma: [Double] = unit.map { kr * $0 }
    static let greenLuma: [Double] = unit.map { kg * $0 }
    static let blueLuma: [Double] = unit.map { kb * $0 }

    /// How one Y'CbCr format turns Y' and Pb/Pr into codes: `clip(floor(offset + scale * x + 0.5), min, max) << shift`.
    struct Quantization {
        var lumaOffset: Double
        var lumaScale: Double
        var lumaMinimum: Double
        var lumaMaximum: Double
        var chromaOffset: Double
        var chromaScale: Double
        var chromaMinimum: Double
        var chromaMaximum: Double
        /// Left shift of the code in its word: 6 for P010's MSB alignment, 0 for 8-bit.
        var shift: Int
        /// 1 or 2 (little-endian).
        var bytesPerSample: Int

        init?(_ format: PixelFormat) {
            switch format {
            case .yuv420BiPlanarVideoRange8:
                self.init(16, 219, 16, 235, 128, 224, 16, 240, shift: 0, bytesPerSample: 1)
            case .yuv420BiPlanarFullRange8:
                // make_frames.py writes `255 * y`; `0 + 255 * y` is the same double.
                self.init(0, 255, 0, 255, 128, 255, 0, 255, shift: 0, bytesPerSample: 1)
            case .yuv420BiPlanarVideoRange10:
                self.init(64, 876, 64, 940, 512, 896, 64, 960, shift: 6, bytesPerSample: 2)
            case .yuv420BiPlanarFullRange10:
                // Not in make_frames.py; FrameBus's definition, the 10-bit analogue of 420f.
                self.init(0, 1023, 0, 1023, 512, 1023, 0, 1023, shift: 6, bytesPerSample: 2)
            default:
                return nil
            }
        }

        private init(
            _ lumaOffset: Double,
            _ lumaScale: Double,
            _ lumaMinimum: Double,
            _ lumaMaximum: Double,
            _ chromaOffset: Double,
            _ chromaScale: Double,
            _ chromaMinimum: Double,
            _ chromaMaximum: Double,
            shift: Int,
            bytesPerSample: Int
        ) {
            self.lumaOffset = lumaOffset
            self.lumaScale = lumaScale
            self.lumaMinimum = lumaMinimum
            self.lumaMaximum = lumaMaximum
            self.chromaOffset = chromaOffset
            self.chromaScale = chromaScale
            self.chromaMinimum = chromaMinimum
            self.chromaMaximum = chromaMaximum
            self.shift = shift
            self.bytesPerSample = bytesPerSample
        }
    }

    @inline(__always)
    static func quantize(_ value: Double, _ minimum: Double, _ maximum: Double) -> Int {
        let rounded = (value + 0.5).rounded(.down)
        return Int(rounded < minimum ? minimum : (rounded > maximum ? maximum : rounded))
    }

    /// Converts the top-left `width` × `height` (both even) pixels of `image` into a bi-planar 4:2:0 layout.
    ///
    /// - Precondition: the destinations hold `height` rows of `lumaBytesPerRow` and `height / 2` rows of
    ///   `chromaBytesPerRow`, each at least `width * bytesPerSample` bytes.
    static func convertToYCbCr(
        _ image: RGBImage,
        width: Int,
        height: Int,
        quantization q: Quantization,
        luma: UnsafeMutableRawBufferPointer,
        lumaBytesPerRow: Int,
        chroma: UnsafeMutableRawBufferPointer,
        chromaBytesPerRow: Int
    ) {
        precondition(width % 2 == 0 && height % 2 == 0 && width <= image.width && height <= image.height)
        precondition(lumaBytesPerRow >= width * q.bytesPerSample && chromaBytesPerRow >= width * q.bytesPerSample)
        precondition(luma.count >= lumaBytesPerRow * (height - 1) + width * q.bytesPerSample)
        precondition(chroma.count >= chromaBytesPerRow * (height / 2 - 1) + width * q.bytesPerSample)
        // One table: v/255, then Kr, Kg, Kb times it, at offsets 0, 256, 512, 768.
        let tables = unit + redLuma + greenLuma + blueLuma
        let pbDivisor = pbDivisor
        let prDivisor = prDivisor
        let sourceStride = image.width * 3
        let sampleBytes = q.bytesPerSample
        unsafe image.pixels.withUnsafeBufferPointer { source in
            unsafe tables.withUnsafeBufferPointer { tables in
                // SAFETY: source offsets stay inside rows < height of `source` (width <= image.width), table
                // indices are < 1024, and destination offsets are bounded by the preconditions above.
                func store(_ code: Int, _ plane: UnsafeMutableRawBufferPointer, _ offset: Int) {
                    if sampleBytes == 1 {
                        unsafe plane[offset] = UInt8(truncatingIfNeeded: code)
                    } else {
                        let word = UInt16(truncatingIfNeeded: code << q.shift).littleEndian
                        unsafe plane.storeBytes(of: word, toByteOffset: offset, as: UInt16.self)
                    }
                }
                /// Converts one pixel: stores its Y code and returns its Pb and Pr.
                func pixel(_ offset: Int, lumaOffset: Int) -> (pb: Double, pr: Double) {
                    let r = Int(unsafe source[offset])
                    let g = Int(unsafe source[offset + 1])
                    let b = Int(unsafe source[offset + 2])
                    let y = unsafe tables[256 + r] + tables[512 + g] + tables[768 + b]
                    let code = quantize(q.lumaOffset + q.lumaScale * y, q.lumaMinimum, q.lumaMaximum)
                    unsafe store(code, luma, lumaOffset)
                    return unsafe ((tables[b] - y) / pbDivisor, (tables[r] - y) / prDivisor)
                }
                for pairRow in 0..<(height / 2) {
                    let top = 2 * pairRow * sourceStride
                    let lumaTop = 2 * pairRow * lumaBytesPerRow
                    let chromaRow = pairRow * chromaBytesPerRow
                    for pairColumn in 0..<(width / 2) {
                        let offset = top + pairColumn * 6
                        let lumaOffset = lumaTop + pairColumn * 2 * sampleBytes
                        let p00 = pixel(offset, lumaOffset: lumaOffset)
                        let p01 = pixel(offset + 3, lumaOffset: lumaOffset + sampleBytes)
                        let p10 = pixel(offset + sourceStride, lumaOffset: lumaOffset + lumaBytesPerRow)
                        let p11 = pixel(
                            offset + sourceStride + 3,
                            lumaOffset: lumaOffset + lumaBytesPerRow + sampleBytes
                        )
                        let meanPb = ((p00.pb + p01.pb) + (p10.pb + p11.pb)) / 4.0
                        let meanPr = ((p00.pr + p01.pr) + (p10.pr + p11.pr)) / 4.0
                        let chromaOffset = chromaRow + pairColumn * 2 * sampleBytes
                        let cb = quantize(q.chromaOffset + q.chromaScale * meanPb, q.chromaMinimum, q.chromaMaximum)
                        let cr = quantize(q.chromaOffset + q.chromaScale * meanPr, q.chromaMinimum, q.chromaMaximum)
                        unsafe store(cb, chroma, chromaOffset)
                        unsafe store(cr, chroma, chromaOffset + sampleBytes)
                    }
                }
            }
        }
    }

    /// Converts the top-left `width` × `height` pixels of `image` to B, G, R, 255.
    ///
    /// - Precondition: `destination` holds `height` rows of `bytesPerRow >= width * 4` bytes.
    static func convertToBGRA(
        _ image: RGBImage,
        width: Int,
        height: Int,
        destination: UnsafeMutableRawBufferPointer,
        bytesPerRow: Int
    ) {
        precondition(width <= image.width && height <= image.height && bytesPerRow >= width * 4)
        precondition(destination.count >= bytesPerRow * (height - 1) + width * 4)
        let sourceStride = image.width * 3
        unsafe image.pixels.withUnsafeBufferPointer { source in
            // SAFETY: indices stay within row `row` of the source and destination (preconditions above).
            for row in 0..<height {
                var from = row * sourceStride
                var to = row * bytesPerRow
                for _ in 0..<width {
                    unsafe destination[to] = source[from + 2]
                    unsafe destination[to + 1] = source[from + 1]
                    unsafe destination[to + 2] = source[from]
                    unsafe destination[to + 3] = 255
                    from += 3
                    to += 4
                }
            }
        }
    }
}

extension ImageConversion {
    /// Calls `body` with the writable bytes of every plane of `buffer` (which the caller has locked read-write),
    /// turning `PixelBuffer`'s untyped errors back into ``PixelBufferError``.
    static func withMutablePlanes(
        of buffer: PixelBuffer,
        operation: String,
        _ body: ([UnsafeMutableRawBufferPointer]) -> Void
    ) throws(PixelBufferError) {
        if buffer.pixelFormat.isCompressed {
            throw PixelBufferError(.opaqueFormat, "\(operation) on \(buffer.pixelFormat)")
        }
        do {
            if buffer.planeCount == 2 {
                try unsafe buffer.withUnsafeMutableBytes(ofPlane: 0) { first in
                    try unsafe buffer.withUnsafeMutableBytes(ofPlane: 1) { second in unsafe body([first, second]) }
                }
            } else {
                try unsafe buffer.withUnsafeMutableBytes(ofPlane: 0) { unsafe body([$0]) }
            }
        } catch let error as PixelBufferError {
            throw error
        } catch {
            // `body` does not throw, so PixelBuffer's own errors are the only ones possible.
            throw PixelBufferError(.surface, "\(operation): \(error)")
        }
    }

    /// Writes `image`'s even crop into the planes of `buffer` (locked read-write by the caller), whose size must be
    /// that crop.
    static func write(_ image: RGBImage, into buffer: PixelBuffer, operation: String) throws(PixelBufferError) {
        let width = image.width & ~1
        let height = image.height & ~1
        guard buffer.width == width, buffer.height == height else {
            throw PixelBufferError(
                .formatMismatch,
                "\(operation): buffer \(buffer.width)x\(buffer.height), image crop \(width)x\(height)"
            )
        }
        let format = buffer.pixelFormat
        let planeRows = (0..<buffer.planeCount).map { buffer.bytesPerRow(ofPlane: $0) }
        try unsafe withMutablePlanes(of: buffer, operation: operation) { planes in
            if let quantization = Quantization(format) {
                unsafe convertToYCbCr(
                    image,
                    width: width,
                    height: height,
                    quantization: quantization,
                    luma: planes[0],
                    lumaBytesPerRow: planeRows[0],
                    chroma: planes[1],
                    chromaBytesPerRow: planeRows[1]
                )
            } else {
                unsafe convertToBGRA(
                    image,
                    width: width,
                    height: height,
                    destination: planes[0],
                    bytesPerRow: planeRows[0]
                )
            }
        }
    }

    /// Copies `source` into `destination` at `offset`.
    ///
    /// - Precondition: the range lies inside `destination`.
    @inline(__always)
    static func copy(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer, at offset: Int)
    {
        precondition(offset >= 0 && offset + source.count <= destination.count)
        guard let base = destination.baseAddress, let from = source.baseAddress else { return }
        unsafe (base + offset).copyMemory(from: from, byteCount: source.count)
    }
}

extension ImageConversion {
    /// Fills `rowCount` rows of a plane: row `r` gets `templates[templateIndex(r)]` at `r * bytesPerRow`, then
    /// `overlay` at `r * bytesPerRow + overlayOffset` if `r` is in `overlayRows`. Row padding is not touched.
    ///
    /// - Precondition: every template and the overlay fit in a row (checked by ``copy(_:into:at:)``).
    static func fillPlane(
        _ plane: UnsafeMutableRawBufferPointer,
        bytesPerRow: Int,
        rowCount: Int,
        templates: [[UInt8]],
        templateIndex: (Int) -> Int,
        overlay: [UInt8],
        overlayOffset: Int,
        overlayRows: Range<Int>
    ) {
        precondition(templates.allSatisfy { $0.count <= bytesPerRow } && overlayOffset + overlay.count <= bytesPerRow)
        unsafe overlay.withUnsafeBytes { overlay in
            for row in 0..<rowCount {
                unsafe templates[templateIndex(row)].withUnsafeBytes { template in
                    unsafe copy(template, into: plane, at: row * bytesPerRow)
                }
                if overlayRows.contains(row) {
                    unsafe copy(overlay, into: plane, at: row * bytesPerRow + overlayOffset)
                }
            }
        }
    }
}
