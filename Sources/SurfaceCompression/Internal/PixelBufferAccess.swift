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
        var bases: [UnsafeMutableRawPointer] = unsafe []
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
            unsafe bases.append(base)
        }
        let planes = unsafe ImagePlanes(
            plane0: bases[0],
            bytesPerRow0: buffer.planeLayout(0).bytesPerRow,
            plane1: bases[planeCount - 1],
            bytesPerRow1: buffer.planeLayout(planeCount - 1).bytesPerRow,
            originY: originY
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

/// The codec over pixel buffers, without the public API's argument handling.
enum CodecDriver {
    static func compress(
        _ source: PixelBuffer,
        into destination: PixelBuffer,
        grid: TileGrid,
        threads: Int
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
            unsafe destination.surface.withUnsafeMutableBytes { (bytes: UnsafeMutableRawBufferPointer) -> Int in
                unsafe TileCodec.encode(
                    grid,
                    baseFourCC: source.pixelFormat.fourCC,
                    from: planes,
                    into: bytes.baseAddress!,
                    threads: threads
                )
            }
        }
    }

    /// Parses the header of a locked compressed buffer and checks it against the buffer's own format and size.
    static func header(
        of compressed: PixelBuffer,
        verifyChecksums: Bool,
        _ op: String
    ) throws(CompressionError) -> TileCodec.Header {
        try unsafe PixelBufferAccess.withOpaqueBytes(of: compressed) { (bytes) throws(CompressionError) in
            let header = try unsafe TileCodec.parse(
                bytes.baseAddress!,
                count: bytes.count,
                verifyChecksums: verifyChecksums
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
        verifyChecksums: Bool
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
        let header = try header(of: compressed, verifyChecksums: verifyChecksums, op)
        try unsafe PixelBufferAccess.withPlanes(of: destination, writable: true, op) {
            (planes) throws(CompressionError) in
            try unsafe PixelBufferAccess.withOpaqueBytes(of: compressed) { (bytes) throws(CompressionError) in
                try unsafe TileCodec.decode(
                    header,
                    from: bytes.baseAddress!,
                    tiles: 0..<header.grid.tileCount,
                    into: planes,
                    threads: threads,
                    verifyChecksums: verifyChecksums
                )
            }
        }
    }

    static func decodeTileRows(
        of compressed: PixelBuffer,
        into scratch: PixelBuffer,
        threads: Int,
        verifyChecksums: Bool,
        _ body: (Range<Int>) -> Void
    ) throws(CompressionError) {
        let op = "SurfaceCodec.decodeTileRows"
        guard compressed.pixelFormat.isCompressed else {
            throw CompressionError(.formatMismatch, op + ": source is not compressed")
        }
        try PixelBufferAccess.lock(compressed, readOnly: true, op)
        defer { PixelBufferAccess.unlock(compressed, readOnly: true) }
        let header = try header(of: compressed, verifyChecksums: verifyChecksums, op)
        let grid = header.grid
        guard scratch.pixelFormat == compressed.pixelFormat.base, scratch.width == compressed.width,
            scratch.height >= min(grid.tileHeight, grid.height)
        else {
            throw CompressionError(
                .formatMismatch,
                op
                    + ": scratch must be \(compressed.pixelFormat.base), \(compressed.width) wide and at least \(grid.tileHeight) rows"
            )
        }
        try PixelBufferAccess.lock(scratch, readOnly: false, op)
        defer { PixelBufferAccess.unlock(scratch, readOnly: false) }
        for row in 0..<grid.tilesDown {
            let y = row * grid.tileHeight
            try unsafe PixelBufferAccess.withPlanes(of: scratch, writable: true, op, originY: y) {
                (planes) throws(CompressionError) in
                try unsafe PixelBufferAccess.withOpaqueBytes(of: compressed) { (bytes) throws(CompressionError) in
                    try unsafe TileCodec.decode(
                        header,
                        from: bytes.baseAddress!,
                        tiles: row * grid.tilesAcross..<(row + 1) * grid.tilesAcross,
                        into: planes,
                        threads: threads,
                        verifyChecksums: verifyChecksums
                    )
                }
            }
            body(y..<min(y + grid.tileHeight, grid.height))
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
        let header = try header(of: compressed, verifyChecksums: false, op)
        var counts = [Int](repeating: 0, count: TileMode.allCases.count)
        for entry in header.entries { counts[Int(entry.mode.rawValue)] += 1 }
        return counts
    }
}
