import PixelBuffers

extension RGBImage {
    /// Converts the image to a base pixel format and returns the tightly packed bytes that
    /// `Corpus/make_frames.py` writes for it, bit for bit.
    ///
    /// The conversion is BT.709 (Kr = 0.2126, Kb = 0.0722) on gamma-encoded R'G'B' in float64, 4:2:0 chroma
    /// averaged over each 2×2 block (centre-sited), rounded half up (`floor(x + 0.5)`) and clipped:
    ///
    /// | format | Y | Cb, Cr | layout |
    /// |---|---|---|---|
    /// | `420v` | 16 + 219 Y' in 16...235 | 128 + 224 P in 16...240 | Y plane, then CbCr pairs (NV12) |
    /// | `420f` | 255 Y' in 0...255 | 128 + 255 P in 0...255 | NV12 |
    /// | `x420` | 64 + 876 Y' in 64...940 | 512 + 896 P in 64...960 | P010: little-endian 16-bit words, `<< 6` |
    /// | `xf20` | 1023 Y' in 0...1023 | 512 + 1023 P in 0...1023 | P010 |
    /// | `BGRA` | — | — | B, G, R, 255 |
    ///
    /// `xf20` is not produced by make_frames.py; it is FrameBus's definition, the 10-bit analogue of `420f`.
    ///
    /// As in make_frames.py, an odd last column or row is dropped first (for every format, BGRA included), so the
    /// result describes ``croppedToEven()``: `w * h * 3 / 2` bytes for 8-bit 4:2:0, `w * h * 3` for 10-bit,
    /// `w * h * 4` for BGRA, with `w`, `h` the even-cropped size.
    ///
    /// - Parameter format: A base (uncompressed) format.
    /// - Returns: The packed planes, Y first.
    /// - Precondition: `format` is not compressed, and both dimensions are at least 2.
    public func convertedBytes(to format: PixelFormat) -> [UInt8] {
        precondition(!format.isCompressed, "convertedBytes(to:) needs a base format, not \(format)")
        let evenWidth = width & ~1
        let evenHeight = height & ~1
        precondition(evenWidth > 0 && evenHeight > 0, "a 1-pixel-wide or -high image has no even crop")
        if let quantization = ImageConversion.Quantization(format) {
            let lumaBytesPerRow = evenWidth * quantization.bytesPerSample
            let lumaByteCount = lumaBytesPerRow * evenHeight
            var bytes = [UInt8](repeating: 0, count: lumaByteCount + lumaByteCount / 2)
            // SAFETY: the two ranges are disjoint and lie inside `bytes`, sized for exactly these planes.
            unsafe bytes.withUnsafeMutableBytes { buffer in
                unsafe ImageConversion.convertToYCbCr(
                    self,
                    width: evenWidth,
                    height: evenHeight,
                    quantization: quantization,
                    luma: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<lumaByteCount]),
                    lumaBytesPerRow: lumaBytesPerRow,
                    chroma: UnsafeMutableRawBufferPointer(rebasing: buffer[lumaByteCount...]),
                    chromaBytesPerRow: lumaBytesPerRow
                )
            }
            return bytes
        }
        var bytes = [UInt8](repeating: 0, count: evenWidth * evenHeight * 4)
        // SAFETY: `bytes` holds exactly evenHeight rows of evenWidth * 4 bytes.
        unsafe bytes.withUnsafeMutableBytes { buffer in
            unsafe ImageConversion.convertToBGRA(
                self,
                width: evenWidth,
                height: evenHeight,
                destination: buffer,
                bytesPerRow: evenWidth * 4
            )
        }
        return bytes
    }
}

extension RGBImage {
    /// Makes a pixel buffer holding this image converted to `pixelFormat`, with BT.709 attachments.
    ///
    /// The conversion is the one ``convertedBytes(to:)`` describes, written row by row into the buffer's padded
    /// planes. Odd sizes are cropped to even first, so the buffer is `width & ~1` × `height & ~1`.
    ///
    /// ```swift
    /// let frame = try RGBImage(contentsOfPNGFile: path).makePixelBuffer(pixelFormat: .yuv420BiPlanarVideoRange8)
    /// ```
    ///
    /// - Parameters:
    ///   - pixelFormat: A base format.
    ///   - bytesPerRowAlignment: The row alignment of the new buffer.
    /// - Returns: An unlocked buffer with ``PixelBufferAttachments/bt709`` attachments.
    /// - Throws: ``PixelBufferError/Code-swift.struct/opaqueFormat`` for a compressed format (encode a base buffer
    ///   with `SurfaceCompression` instead), ``PixelBufferError/Code-swift.struct/invalidSize`` for an image less
    ///   than 2 pixels wide or high, ``PixelBufferError/Code-swift.struct/invalidAlignment``,
    ///   ``PixelBufferError/Code-swift.struct/surface``.
    public func makePixelBuffer(
        pixelFormat: PixelFormat,
        bytesPerRowAlignment: Int = PixelBuffer.defaultBytesPerRowAlignment
    ) throws(PixelBufferError) -> PixelBuffer {
        let buffer = try PixelBuffer(
            width: width & ~1,
            height: height & ~1,
            pixelFormat: pixelFormat,
            bytesPerRowAlignment: bytesPerRowAlignment,
            attachments: .bt709
        )
        try buffer.lock()
        do {
            try ImageConversion.write(self, into: buffer, operation: "RGBImage.makePixelBuffer(\(pixelFormat))")
        } catch {
            try? buffer.unlock()
            throw error
        }
        try buffer.unlock()
        return buffer
    }

    /// Converts this image into an existing buffer, for example one from a ``PixelBufferPool``.
    ///
    /// The caller holds a read-write lock on `buffer` (as for any CPU write to a pixel buffer). The buffer's
    /// format selects the conversion (``convertedBytes(to:)`` describes it); row padding is left untouched.
    ///
    /// - Parameter buffer: A locked buffer of a base format whose size is ``croppedToEven()``'s.
    /// - Throws: ``PixelBufferError/Code-swift.struct/formatMismatch`` for another size,
    ///   ``PixelBufferError/Code-swift.struct/opaqueFormat`` for a compressed format,
    ///   ``PixelBufferError/Code-swift.struct/surface`` if the buffer is not locked or is read-only.
    public func write(into buffer: PixelBuffer) throws(PixelBufferError) {
        try ImageConversion.write(self, into: buffer, operation: "RGBImage.write(into:)")
    }
}
