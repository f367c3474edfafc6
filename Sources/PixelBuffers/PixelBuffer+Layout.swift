import Surfaces

extension PixelBuffer {
    /// The surface layout for a base format: rows padded to `bytesPerRowAlignment`, planes starting at multiples of
    /// it, the allocation rounded up to whole 4 KiB pages.
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/invalidSize``, ``PixelBufferError/Code-swift.struct/invalidAlignment``,
    ///   ``PixelBufferError/Code-swift.struct/opaqueFormat``.
    public static func layout(
        width: Int,
        height: Int,
        pixelFormat: PixelFormat,
        bytesPerRowAlignment: Int = defaultBytesPerRowAlignment
    ) throws(PixelBufferError) -> SurfaceLayout {
        let operation = "PixelBuffer.layout(\(width)x\(height) \(pixelFormat))"
        if pixelFormat.isCompressed { throw PixelBufferError(.opaqueFormat, operation) }
        guard pixelFormat.isValidSize(width: width, height: height) else {
            throw PixelBufferError(.invalidSize, operation)
        }
        guard bytesPerRowAlignment > 0, bytesPerRowAlignment <= 4096,
            bytesPerRowAlignment & (bytesPerRowAlignment - 1) == 0
        else { throw PixelBufferError(.invalidAlignment, operation + " alignment \(bytesPerRowAlignment)") }
        func align(_ value: Int, _ alignment: Int) -> Int { (value + alignment - 1) / alignment * alignment }
        var offset = 0
        var planes: [PlaneLayout] = []
        for plane in pixelFormat.planes {
            let planeWidth = width / plane.horizontalSubsampling
            let planeHeight = height / plane.verticalSubsampling
            let bytesPerRow = align(planeWidth * plane.bytesPerElement, bytesPerRowAlignment)
            offset = align(offset, bytesPerRowAlignment)
            planes.append(
                PlaneLayout(
                    offset: offset,
                    bytesPerRow: bytesPerRow,
                    width: planeWidth,
                    height: planeHeight,
                    bytesPerElement: plane.bytesPerElement
                )
            )
            offset += bytesPerRow * planeHeight
        }
        return SurfaceLayout(
            pixelFormat: pixelFormat.fourCC,
            width: width,
            height: height,
            planes: planes,
            allocationSize: align(offset, 4096)
        )
    }

    static func opaqueLayout(
        width: Int,
        height: Int,
        compressedFormat: PixelFormat,
        opaqueByteCount: Int
    ) throws(PixelBufferError) -> SurfaceLayout {
        let operation = "PixelBuffer(\(width)x\(height) \(compressedFormat), \(opaqueByteCount) bytes)"
        guard compressedFormat.isCompressed else {
            throw PixelBufferError(.formatMismatch, operation + ": not compressed")
        }
        guard compressedFormat.isValidSize(width: width, height: height), opaqueByteCount > 0,
            opaqueByteCount <= SurfaceLayout.maximumAllocationSize
        else { throw PixelBufferError(.invalidSize, operation) }
        return SurfaceLayout(
            pixelFormat: compressedFormat.fourCC,
            width: width,
            height: height,
            planes: [],
            allocationSize: opaqueByteCount
        )
    }

    /// Checks that an imported layout is what `format` needs: the right planes with the right geometry.
    static func check(_ layout: SurfaceLayout, fits format: PixelFormat) throws(PixelBufferError) {
        // A subscriber wraps every frame it receives: the operation's text is made only when the check fails.
        func failure(_ code: PixelBufferError.Code, _ detail: String = "") -> PixelBufferError {
            PixelBufferError(code, "PixelBuffer(surface: \(layout.width)x\(layout.height) \(format))" + detail)
        }
        guard format.isValidSize(width: layout.width, height: layout.height) else {
            throw failure(.invalidSize)
        }
        if format.isCompressed {
            guard layout.planes.isEmpty else { throw failure(.formatMismatch, ": planes on opaque") }
            return
        }
        let expected = format.planes
        guard layout.planes.count == expected.count else {
            throw failure(.formatMismatch, ": \(layout.planes.count) planes")
        }
        for (plane, geometry) in zip(layout.planes, expected) {
            guard plane.width == layout.width / geometry.horizontalSubsampling,
                plane.height == layout.height / geometry.verticalSubsampling,
                plane.bytesPerElement == geometry.bytesPerElement
            else { throw failure(.formatMismatch, ": plane geometry") }
        }
    }
}
