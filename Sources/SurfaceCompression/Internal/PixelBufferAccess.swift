import PixelBuffers
import Surfaces

/// The bridge from pixel buffers to the raw-memory codec: locking, plane pointers, and the checks that make
/// the pointers safe to use (formats, sizes, bytes per row, alignment).
enum PixelBufferAccess {
    static func lock(_ buffer: PixelBuffer, readOnly: Bool, _ op: String) throws(CompressionError) {
        do { try buffer.lock(readOnly ? [.readOnly] : []) } catch {
            throw CompressionError(.pixelBuffer, op, underlying: error)
        }
    }

    static func unlock(_ buffer: PixelBuffer, readOnly: Bool) {
        try? buffer.unlock(readOnly ? [.readOnly] : [])
    }

    /// Checks a base-format buffer's planes (locked by the caller) and calls `body` with them.
    static func withPlanes<R>(
        of buffer: PixelBuffer,
        writable: Bool,
        _ op: String,
        originY: Int = 0,
        _ body: (ImagePlanes) throws(CompressionError) -> R
    ) throws(CompressionError) -> R {
        let format = buffer.pixelFormat
        guard !format.isCompressed, let codecFormat = CodecFormat(baseFourCC: format.fourCC) else {
            throw CompressionError(.formatMismatch, op + ": \(format) is not a base format")
        }
        let planeCount = codecFormat.kind == .bgra ? 1 : 2
        guard buffer.planeCount == planeCount else { throw CompressionError(.formatMismatch, op + ": planes") }
        if writable && buffer.surface.isReadOnly {
            throw CompressionError(
                .pixelBuffer,
                op,
                underlying: PixelBufferError(
                    code: .surface,
                    operation: op,
                    underlying: SurfaceError(code: .readOnly, operation: op)
                )
            )
        }
        let elementBytes = codecFormat.kind == .bgra ? 4 : codecFormat.bytesPerSample * 2
        // Two locals rather than an array: this runs per frame and must not allocate.
        var base0: UnsafeMutableRawPointer? = nil
        var base1: UnsafeMutableRawPointer? = nil
        for index in 0..<planeCount {
            let layout = buffer.planeLayout(index)
            let expectedWidth = index == 0 ? buffer.width : buffer.width / 2
            guard layout.width == expectedWidth, layout.bytesPerRow >= layout.width * layout.bytesPerElement,
                layout.bytesPerRow % elementBytes == 0
            else { throw CompressionError(.formatMismatch, op + ": plane \(index) layout") }
            let base = unsafe buffer.surface.withUnsafeBytes(ofPlane: index) { bytes in
                unsafe UnsafeMutableRawPointer(mutating: bytes.baseAddress!)
            }
            guard Int(bitPattern: base) % elementBytes == 0 else {
                throw CompressionError(.invalidArgument, op + ": plane \(index) is not aligned to its elements")
            }
            if index == 0 { unsafe base0 = base } else { unsafe base1 = base }
        }
        guard let plane0 = unsafe base0 else { throw CompressionError(.formatMismatch, op + ": planes") }
        let planes = unsafe ImagePlanes(
            plane0: plane0,
            bytesPerRow0: buffer.planeLayout(0).bytesPerRow,
            plane1: base1 ?? plane0,
            bytesPerRow1: buffer.planeLayout(planeCount - 1).bytesPerRow,
            originY: originY,
            // A writable memfd surface was made by this process and sealed against every other writable mapping
            // (an imported one is mapped read-only); a DMA-BUF may be written by its exporter or a device.
            isPrivate: writable && buffer.surface.backing == .memfd && !buffer.surface.isReadOnly
        )
        return try unsafe body(planes)
    }

    /// Calls `body` with the opaque bytes of a compressed buffer (locked by the caller).
    static func withOpaqueBytes<R>(
        of buffer: PixelBuffer,
        _ body: (UnsafeMutableRawBufferPointer) throws(CompressionError) -> R
    ) throws(CompressionError) -> R {
        try unsafe buffer.surface.withUnsafeBytes { (bytes) throws(CompressionError) -> R in
            try unsafe body(UnsafeMutableRawBufferPointer(mutating: bytes))
        }
    }
}

/// The codec over pixel buffers, without the public API's argument handling. Every function takes the
/// workspace whose memory it reuses (a fresh one for the one-shot API, the context's for ``SurfaceCodecContext``).
enum CodecDriver {
    static func compress(
        _ source: PixelBuffer,
        into destination: PixelBuffer,
        grid: TileGrid,
        threads: Int,
        workspace: CodecWorkspace
    ) throws(CompressionError) -> Int {
        let op = "SurfaceCodec.compress"
        guard destination.surface.allocationSize >= grid.maximumByteCount else {
            throw CompressionError(
                .destinationTooSmall,
                op + ": \(destination.surface.allocationSize) < \(grid.maximumByteCount) bytes"
            )
        }
        try PixelBufferAccess.lock(source, readOnly: true, op)
        defer { PixelBufferAccess.unlock(source, readOnly: true) }
        try PixelBufferAccess.lock(destination, readOnly: false, op)
        defer { PixelBufferAccess.unlock(destination, readOnly: false) }
        return try unsafe PixelBufferAccess.withPlanes(of: source, writable: false, op) {
            (planes) throws(CompressionError) -> Int in
            // A screen frame at the default tile size gets taller bands (fewer entries: the surface's
            // maximumByteCount for `grid`, checked above, bounds the taller grid's too).
            let grid = unsafe ScreenBands.grid(grid, for: planes)
            return unsafe destination.surface.withUnsafeMutableBytes { (bytes: UnsafeMutableRawBufferPointer) -> Int in
                unsafe TileCodec.encode(
                    grid,
                    baseFourCC: source.pixelFormat.fourCC,
                    from: planes,
                    into: bytes.baseAddress!,
                    threads: threads,
                    workspace: workspace
                )
            }
        }
    }

    /// Parses the header of a locked compressed buffer and checks it against the buffer's own format and size.
    static func header(
        of compressed: PixelBuffer,
        verifyChecksums: Bool,
        workspace: CodecWorkspace,
        _ op: String
    ) throws(CompressionError) -> TileCodec.Header {
        try unsafe PixelBufferAccess.withOpaqueBytes(of: compressed) { (bytes) throws(CompressionError) in
            let header = try unsafe TileCodec.parse(
                bytes.baseAddress!,
                count: bytes.count,
                verifyChecksums: verifyChecksums,
                storage: &workspace.parseStorage
            )
            guard header.baseFourCC == compressed.pixelFormat.base.fourCC, header.grid.width == compressed.width,
                header.grid.height == compressed.height
            else { throw CompressionError(.formatMismatch, op + ": header describes another format or size") }
            return header
        }
    }

    static func decompress(
        _ compressed: PixelBuffer,
        into destination: PixelBuffer,
        threads: Int,
        verifyChecksums: Bool,
        workspace: CodecWorkspace
    ) throws(CompressionError) {
        let op = "SurfaceCodec.decompress"
        guard compressed.pixelFormat.isCompressed else {
            throw CompressionError(.formatMismatch, op + ": source is not compressed")
        }
        guard destination.pixelFormat == compressed.pixelFormat.base, destination.width == compressed.width,
            destination.height == compressed.height
        else {
            throw CompressionError(
                .formatMismatch,
                op + ": destination is \(destination.pixelFormat) \(destination.width)x\(destination.height)"
            )
        }
        try PixelBufferAccess.lock(compressed, readOnly: true, op)
        defer { PixelBufferAccess.unlock(compressed, readOnly: true) }
        try PixelBufferAccess.lock(destination, readOnly: false, op)
        defer { PixelBufferAccess.unlock(destination, readOnly: false) }
        var header = try header(of: compressed, verifyChecksums: verifyChecksums, workspace: workspace, op)
        defer { swap(&header.entries, &workspace.parseStorage.entries) }
        try unsafe PixelBufferAccess.withPlanes(of: destination, writable: true, op) {
            (planes) throws(CompressionError) in
            try unsafe PixelBufferAccess.withOpaqueBytes(of: compressed) { (bytes) throws(CompressionError) in
                try unsafe TileCodec.decode(
                    header,
                    from: bytes.baseAddress!,
                    tiles: 0..<header.grid.tileCount,
                    into: planes,
                    threads: threads,
                    verifyChecksums: verifyChecksums,
                    workspace: workspace
                )
            }
        }
    }

    /// Decodes batches of tile rows into `scratch` (as many at once as it holds, their tiles in parallel)
    /// and hands each batch to `body` in order, on the calling thread.
    static func decodeTileRows(
        of compressed: PixelBuffer,
        into scratch: PixelBuffer,
        threads: Int,
        verifyChecksums: Bool,
        workspace: CodecWorkspace,
        _ body: (Range<Int>) throws -> Void
    ) throws {
        let op = "SurfaceCodec.decodeTileRows"
        guard compressed.pixelFormat.isCompressed else {
            throw CompressionError(.formatMismatch, op + ": source is not compressed")
        }
        try PixelBufferAccess.lock(compressed, readOnly: true, op)
        defer { PixelBufferAccess.unlock(compressed, readOnly: true) }
        var header = try header(of: compressed, verifyChecksums: verifyChecksums, workspace: workspace, op)
        defer { swap(&header.entries, &workspace.parseStorage.entries) }
        let grid = header.grid
        let rowHeight = min(grid.tileHeight, grid.height)
        guard scratch.pixelFormat == compressed.pixelFormat.base, scratch.width == compressed.width,
            scratch.height >= rowHeight
        else {
            throw CompressionError(
                .formatMismatch,
                op
                    + ": scratch must be \(compressed.pixelFormat.base), \(compressed.width) wide and at least \(rowHeight) rows"
            )
        }
        // Tile rows decoded at once: as many as the scratch holds (at least one). Their tiles are decoded in
        // parallel; with bands (one tile per tile row) this is where the parallelism comes from.
        let batch = max(1, scratch.height / grid.tileHeight)
        try PixelBufferAccess.lock(scratch, readOnly: false, op)
        defer { PixelBufferAccess.unlock(scratch, readOnly: false) }
        var row = 0
        while row < grid.tilesDown {
            let end = min(row + batch, grid.tilesDown)
            let y = row * grid.tileHeight
            try unsafe PixelBufferAccess.withPlanes(of: scratch, writable: true, op, originY: y) {
                (planes) throws(CompressionError) in
                try unsafe PixelBufferAccess.withOpaqueBytes(of: compressed) { (bytes) throws(CompressionError) in
                    try unsafe TileCodec.decode(
                        header,
                        from: bytes.baseAddress!,
                        tiles: row * grid.tilesAcross..<end * grid.tilesAcross,
                        into: planes,
                        threads: threads,
                        verifyChecksums: verifyChecksums,
                        workspace: workspace
                    )
                }
            }
            try body(y..<min(end * grid.tileHeight, grid.height))
            row = end
        }
    }

    static func bytesUsed(of compressed: PixelBuffer) throws(CompressionError) -> Int {
        let op = "SurfaceCodec.bytesUsed"
        guard compressed.pixelFormat.isCompressed else {
            throw CompressionError(.formatMismatch, op + ": not compressed")
        }
        try PixelBufferAccess.lock(compressed, readOnly: true, op)
        defer { PixelBufferAccess.unlock(compressed, readOnly: true) }
        return try unsafe PixelBufferAccess.withOpaqueBytes(of: compressed) { (bytes) throws(CompressionError) in
            try unsafe TileCodec.bytesUsed(bytes.baseAddress!, count: bytes.count)
        }
    }

    /// Tile mode counts of a locked, parsed surface, for statistics.
    static func modeCounts(of compressed: PixelBuffer) throws(CompressionError) -> [Int] {
        let op = "SurfaceCodec.statistics"
        try PixelBufferAccess.lock(compressed, readOnly: true, op)
        defer { PixelBufferAccess.unlock(compressed, readOnly: true) }
        let header = try header(of: compressed, verifyChecksums: false, workspace: CodecWorkspace(), op)
        // Per mode, then the entries with coded literals (layout version 6) and with coded sequences (version 7; both
        // also counted under their mode).
        var counts = [Int](repeating: 0, count: TileMode.allCases.count + 2)
        for entry in header.entries {
            counts[Int(entry.mode.rawValue)] += 1
            if entry.codedLiterals { counts[TileMode.allCases.count] += 1 }
            if entry.codedSequences { counts[TileMode.allCases.count + 1] += 1 }
        }
        return counts
    }
}
