import PixelBuffers

/// One plane of a base-format image in memory the caller owns: where its first row starts and the bytes from one
/// row to the next. For 4:2:0 formats plane 0 is Y and plane 1 interleaved CbCr; BGRA has only plane 0.
@unsafe package struct CodecDestinationPlane {
    package var base: UnsafeMutableRawPointer
    package var bytesPerRow: Int

    package init(base: UnsafeMutableRawPointer, bytesPerRow: Int) {
        unsafe self.base = base
        unsafe self.bytesPerRow = bytesPerRow
    }
}

extension SurfaceCodec {
    /// The alignment, in bytes, that every plane of a `format` image needs (its base address and bytes per row) to be
    /// decoded into in place by ``SurfaceCodecContext/decompress(_:width:height:format:plane0:plane1:verifiesChecksums:)``:
    /// the size of one element of the widest plane (a CbCr pair, a BGRA pixel), the rule pixel buffers the decoder
    /// writes are held to. Nil when `format` is not a base format the codec knows.
    package static func destinationAlignment(of format: PixelFormat, plane index: Int) -> Int? {
        guard !format.isCompressed, let codecFormat = CodecFormat(baseFourCC: format.fourCC) else { return nil }
        return codecFormat.kind == .bgra ? 4 : 2 * codecFormat.bytesPerSample
    }
}

extension SurfaceCodecContext {
    /// Decompresses compressed bytes in memory the caller gives straight into image planes the caller owns, with
    /// no intermediate buffer: the counterpart of ``decompress(_:into:verifiesChecksums:)`` for memory that is not
    /// a ``PixelBuffer`` (a C caller's, a mapping of another process's surface).
    ///
    /// `compressed` may be rewritten by another process meanwhile: the header and table are copied once into
    /// private memory and validated there, and payload bytes are read only within those private bounds, so a
    /// rewrite gives wrong pixels or an error, never a read or write out of bounds. Every plane is checked before
    /// anything is written: its bytes per row hold a row, it is aligned to the format's elements
    /// (``SurfaceCodec/destinationAlignment(of:plane:)``), and the bytes it spans are computed without overflow;
    /// the decoder then writes only the image's samples (`height` rows of each plane's row bytes, none of the
    /// padding after them). The caller promises that each plane's span is writable.
    ///
    /// - Parameters:
    ///   - compressed: the compressed surface's bytes (at least its header's bytes used).
    ///   - width: the image width; must match the header.
    ///   - height: the image height; must match the header.
    ///   - format: the base format; must match the header.
    ///   - plane0: Y, or BGRA's only plane.
    ///   - plane1: CbCr for 4:2:0 formats; ignored for BGRA.
    /// - Throws: ``CompressionError/Code-swift.struct/invalidArgument`` for planes that do not fit (missing, rows too
    ///   short, misaligned, spanning more than can be addressed), ``CompressionError/Code-swift.struct/formatMismatch``
    ///   when `format` is not a base format or the header describes another format or size, and for damaged data the
    ///   errors of ``decompress(_:into:verifiesChecksums:)``. On error the planes' contents are unspecified.
    package func decompress(
        _ compressed: UnsafeRawBufferPointer,
        width: Int,
        height: Int,
        format: PixelFormat,
        plane0: CodecDestinationPlane,
        plane1: CodecDestinationPlane?,
        verifiesChecksums: Bool = true
    ) throws(CompressionError) {
        let op = "SurfaceCodecContext.decompress(bytes)"
        guard !format.isCompressed, let codecFormat = CodecFormat(baseFourCC: format.fourCC) else {
            throw CompressionError(.formatMismatch, op + ": \(format) is not a base format")
        }
        guard width > 0, height > 0, !codecFormat.needsEvenSize || (width % 2 == 0 && height % 2 == 0) else {
            throw CompressionError(.invalidArgument, op + ": size \(width)x\(height)")
        }
        guard let source = compressed.baseAddress else {
            throw CompressionError(.truncated, op + ": no bytes")
        }
        // Plane 0: BGRA rows of width × 4 bytes, or Y rows of width samples; plane 1: height / 2 rows of width / 2
        // CbCr pairs, which is width samples too.
        let rowBytes0 = width.multipliedReportingOverflow(
            by: codecFormat.kind == .bgra ? 4 : codecFormat.bytesPerSample
        )
        guard !rowBytes0.overflow else { throw CompressionError(.invalidArgument, op + ": width \(width)") }
        unsafe try Self.check(plane0, index: 0, format, rowBytes: rowBytes0.partialValue, rows: height, op)
        var second = unsafe plane0
        if codecFormat.kind != .bgra {
            guard let plane1 = unsafe plane1 else {
                throw CompressionError(.invalidArgument, op + ": \(format) needs plane 1")
            }
            unsafe try Self.check(plane1, index: 1, format, rowBytes: rowBytes0.partialValue, rows: height / 2, op)
            unsafe second = plane1
        }
        let planes = unsafe ImagePlanes(
            plane0: plane0.base,
            bytesPerRow0: plane0.bytesPerRow,
            plane1: second.base,
            bytesPerRow1: second.bytesPerRow,
            originY: 0
        )
        try refuseReentry(op)
        let threads = threadCount
        try workspace.withLock { (workspace) throws(CompressionError) in
            var header = try unsafe TileCodec.parse(
                source,
                count: compressed.count,
                verifyChecksums: verifiesChecksums,
                storage: &workspace.parseStorage
            )
            defer { swap(&header.entries, &workspace.parseStorage.entries) }
            guard header.baseFourCC == format.fourCC, header.grid.width == width, header.grid.height == height else {
                throw CompressionError(
                    .formatMismatch,
                    op + ": the header describes another format or size than \(format) \(width)x\(height)"
                )
            }
            try unsafe TileCodec.decode(
                header,
                from: source,
                tiles: 0..<header.grid.tileCount,
                into: planes,
                threads: threads,
                verifyChecksums: verifiesChecksums,
                workspace: workspace
            )
        }
    }

    /// Checks that `plane` holds `rows` rows of `rowBytes` bytes, aligned to the format's elements, spanning an
    /// addressable range.
    private static func check(
        _ plane: CodecDestinationPlane,
        index: Int,
        _ format: PixelFormat,
        rowBytes: Int,
        rows: Int,
        _ op: String
    ) throws(CompressionError) {
        let alignment = SurfaceCodec.destinationAlignment(of: format, plane: index) ?? 1
        let bytesPerRow = unsafe plane.bytesPerRow
        guard bytesPerRow >= rowBytes else {
            throw CompressionError(
                .invalidArgument,
                op + ": plane \(index) has \(bytesPerRow) bytes per row, a row is \(rowBytes)"
            )
        }
        guard bytesPerRow % alignment == 0, unsafe Int(bitPattern: plane.base) % alignment == 0 else {
            throw CompressionError(
                .invalidArgument,
                op + ": plane \(index) is not aligned to \(alignment) bytes (the format's elements)"
            )
        }
        let (span, overflow) = bytesPerRow.multipliedReportingOverflow(by: max(rows - 1, 0))
        guard !overflow, span <= Int.max - rowBytes,
            UInt(bitPattern: unsafe Int(bitPattern: plane.base)) <= UInt.max - UInt(span + rowBytes)
        else {
            throw CompressionError(.invalidArgument, op + ": plane \(index) spans more bytes than can be addressed")
        }
    }
}
