import PixelBuffers

/// The lossless codec between a base-format pixel buffer and its compressed variant (`420v` ↔ `&8v0`, …).
///
/// A compressed surface is tiled: a 64-byte header (magic, layout version, base format, size, tile size,
/// bytes used, checksum), a table with one entry per tile and component (size, mode, 64-bit checksum), and
/// the payloads; docs/COMPRESSED-LAYOUT.md specifies it. The encoder writes the lowest layout version whose modes
/// the surface uses (2 to 7, whatever the content: a photograph with a repetitive band needs the screen modes there);
/// the decoder reads versions 1 to 7 and refuses any other with
/// ``CompressionError/Code-swift.struct/unsupportedVersion``. How hard the encoder searches is an ``Effort``
/// (``Effort/fast`` by default, for live streams). Each
/// component of each tile is stored as the smallest of: one solid value, LZ4, "up" or "left" prediction (chosen
/// per block of 8 samples) with bit-packed residuals, those packed residuals through LZ4 (screen content), or
/// raw. 4:2:0 formats code Y, Cb and Cr
/// separately; BGRA codes G, B−G, R−G and A. 10-bit formats drop their six padding bits only where they are
/// all zero, so every bit survives. The surface is allocated for the worst case
/// (``maximumCompressedByteCount(width:height:format:tileSize:)``), and only the bytes used are ever read.
///
/// ```swift
/// let pool = try SurfaceCodec.makeCompressedPool(width: 1920, height: 1080, format: .yuv420BiPlanarVideoRange8)
/// let compressed = try pool.makePixelBuffer()
/// let stats = try SurfaceCodec.compress(frame, into: compressed)
/// print(stats.ratio)
/// try SurfaceCodec.decompress(compressed, into: output)
/// ```
///
/// Every function locks the buffers it reads (read-only) and writes (read-write) itself, so callers must not
/// hold a read-write lock on them. The decoder treats compressed bytes as hostile, including a publisher that
/// rewrites them while they are decoded: every bound comes from a private copy read once, so a damaged surface
/// gives a ``CompressionError`` (or, if it changes during decoding, wrong pixels), never a crash or an
/// out-of-bounds access. These functions allocate their working memory per call; a ``SurfaceCodecContext``
/// keeps it, so that a stream of frames allocates nothing per frame.
public enum SurfaceCodec {
    /// The tile size in pixels: a tile row is what ``decodeTileRows(of:into:options:_:)`` hands over at once.
    public struct TileSize: Hashable, Sendable {
        /// Tile width in pixels (even); `nil` for tiles as wide as the image (bands).
        public var width: Int?
        /// Tile height in pixels (even).
        public var height: Int

        public init(width: Int?, height: Int) {
            self.width = width
            self.height = height
        }

        /// The default: full-width bands of 64 rows (measured: the best ratio on photographs of the geometries
        /// tried, and a tile row small enough to stay in L2 when streamed). With this tile size, and only with it,
        /// the encoder writes a frame that looks like screen content in taller bands (256 rows, at most 2^22 pixels
        /// a band), whose zstd frames find the repeats of text and documents further up the screen; the tile size
        /// is in the surface's header, so decoders need nothing new. A frame is never larger than
        /// ``SurfaceCodec/maximumCompressedByteCount(width:height:format:tileSize:)`` of this size.
        public static let `default` = TileSize(width: nil, height: 64)
    }

    /// How hard the encoder searches for the smallest payload of each tile component. The decoder does not care:
    /// both write the same layout, and a surface decodes the same whatever effort made it.
    public enum Effort: String, Hashable, Sendable, CaseIterable {
        /// Live encoding (the default): screen-like components as zstd frames at level 1 (layout version 8), the
        /// others (photographs) through one pass of liblz4's fast match search per candidate, the tile above as
        /// dictionary through the same fast search.
        case fast
        /// Offline encoding (recording, archiving): screen-like components as zstd frames at level 7, the LZ4
        /// winners searched again with liblz4's HC search (level 3; level 9 for the tile-above dictionary modes).
        /// Smaller on screen content, several times slower to encode; photographs get the same bytes as `fast`
        /// (docs/BENCHMARKS.md).
        case best
    }

    /// How to run the codec.
    public struct Options: Hashable, Sendable {
        /// Worker threads at most; 0 uses every online processor, 1 runs on the calling thread. A frame too small
        /// to pay for the hand-off to another thread runs on fewer (docs/BENCHMARKS.md, "The codec on two threads").
        public var threadCount: Int
        /// The tile size the encoder uses (the decoder reads it from the header).
        public var tileSize: TileSize
        /// Whether the decoder checks the header, table and payload checksums (bit flips). Structural checks
        /// always run: turning this off never makes the decoder unsafe, only blind to flipped sample bits.
        public var verifiesChecksums: Bool
        /// How hard the encoder searches (``Effort/fast`` by default).
        public var effort: Effort
        /// The layout version the encoder writes in (tests: an older version's modes only).
        var layoutVersion = TileGrid.currentLayoutVersion
        /// When a call splits its work between threads (tests: ``ParallelPolicy/alwaysSplit`` on small images).
        var parallelPolicy = ParallelPolicy.default

        public init(
            threadCount: Int = 0,
            tileSize: TileSize = .default,
            verifiesChecksums: Bool = true,
            effort: Effort = .fast
        ) {
            self.threadCount = threadCount
            self.tileSize = tileSize
            self.verifiesChecksums = verifiesChecksums
            self.effort = effort
        }

        var resolvedThreads: Int { threadCount > 0 ? threadCount : System.processorCount }
    }

    /// What one compression produced.
    public struct Statistics: Hashable, Sendable {
        /// Bytes of the base-format image, tightly packed (no row padding).
        public var rawByteCount: Int
        /// Bytes used in the compressed surface: header, table and payloads.
        public var compressedByteCount: Int
        /// `rawByteCount / compressedByteCount`.
        public var ratio: Double { Double(rawByteCount) / Double(max(compressedByteCount, 1)) }
    }

    static func grid(
        width: Int,
        height: Int,
        format: PixelFormat,
        tileSize: TileSize,
        layoutVersion: Int = TileGrid.currentLayoutVersion,
        effort: Effort = .fast,
        _ op: String
    ) throws(CompressionError) -> TileGrid {
        guard let codecFormat = CodecFormat(baseFourCC: format.base.fourCC) else {
            throw CompressionError(.formatMismatch, op + ": \(format)")
        }
        guard
            var grid = TileGrid(
                format: codecFormat,
                width: width,
                height: height,
                tileWidth: tileSize.width ?? ((width + 1) & ~1),
                tileHeight: tileSize.height,
                layoutVersion: layoutVersion
            )
        else { throw CompressionError(.invalidArgument, op + ": \(width)x\(height), tiles \(tileSize)") }
        grid.searchesHarder = effort == .best
        grid.choosesScreenBands = tileSize == .default
        return grid
    }

    /// The bytes a compressed surface needs in the worst case: every tile raw, plus header and table.
    ///
    /// - Parameter format: a base format or its compressed variant.
    /// - Throws: ``CompressionError/Code-swift.struct/invalidArgument`` for an impossible size or tile size.
    public static func maximumCompressedByteCount(
        width: Int,
        height: Int,
        format: PixelFormat,
        tileSize: TileSize = .default
    ) throws(CompressionError) -> Int {
        try grid(
            width: width,
            height: height,
            format: format,
            tileSize: tileSize,
            "SurfaceCodec.maximumCompressedByteCount"
        )
        .maximumByteCount
    }

    /// The fewest bytes any valid compressed surface of this size may have: the worst case
    /// (``maximumCompressedByteCount(width:height:format:tileSize:)``) of the tile size with the fewest tiles
    /// possible, counted as one tile: the 64-byte header, one 16-byte table entry per component, and the raw image.
    ///
    /// Every tile size the codec accepts needs at least this much, so a receiver that refuses a smaller surface
    /// refuses no honest publisher, whatever tile size it encodes with (docs/COMPRESSED-LAYOUT.md §7).
    ///
    /// - Throws: ``CompressionError/Code-swift.struct/invalidArgument`` for an impossible size,
    ///   ``CompressionError/Code-swift.struct/formatMismatch`` for a format the codec does not know.
    public static func minimumCompressedByteCount(
        width: Int,
        height: Int,
        format: PixelFormat
    ) throws(CompressionError) -> Int {
        // The grid of 2×2 tiles validates the size; its raw image size does not depend on the tiling.
        let grid = try grid(
            width: width,
            height: height,
            format: format,
            tileSize: TileSize(width: 2, height: 2),
            "SurfaceCodec.minimumCompressedByteCount"
        )
        return TileGrid.headerByteCount + grid.entryByteCount * grid.componentCount + grid.rawImageByteCount
    }

    /// Makes a pool of compressed pixel buffers sized for the worst case.
    ///
    /// - Parameter format: a base format or its compressed variant; the pool makes the compressed variant.
    /// - Throws: ``CompressionError/Code-swift.struct/invalidArgument``, or
    ///   ``CompressionError/Code-swift.struct/pixelBuffer`` if the pool cannot be made.
    public static func makeCompressedPool(
        width: Int,
        height: Int,
        format: PixelFormat,
        tileSize: TileSize = .default,
        minimumBufferCount: Int = 0,
        allocationThreshold: Int? = nil
    ) throws(CompressionError) -> PixelBufferPool {
        let byteCount = try maximumCompressedByteCount(width: width, height: height, format: format, tileSize: tileSize)
        guard let compressed = format.base.compressedVariant else {
            throw CompressionError(.formatMismatch, "SurfaceCodec.makeCompressedPool: \(format)")
        }
        do {
            return try PixelBufferPool(
                attributes: .init(
                    width: width,
                    height: height,
                    pixelFormat: compressed,
                    opaqueByteCount: byteCount,
                    minimumBufferCount: minimumBufferCount,
                    allocationThreshold: allocationThreshold
                )
            )
        } catch {
            throw CompressionError(.pixelBuffer, "SurfaceCodec.makeCompressedPool", underlying: error)
        }
    }

    /// Makes one compressed pixel buffer sized for the worst case.
    public static func makeCompressedBuffer(
        width: Int,
        height: Int,
        format: PixelFormat,
        tileSize: TileSize = .default
    ) throws(CompressionError) -> PixelBuffer {
        let byteCount = try maximumCompressedByteCount(width: width, height: height, format: format, tileSize: tileSize)
        guard let compressed = format.base.compressedVariant else {
            throw CompressionError(.formatMismatch, "SurfaceCodec.makeCompressedBuffer: \(format)")
        }
        do {
            return try PixelBuffer(
                width: width,
                height: height,
                compressedFormat: compressed,
                opaqueByteCount: byteCount
            )
        } catch {
            throw CompressionError(.pixelBuffer, "SurfaceCodec.makeCompressedBuffer", underlying: error)
        }
    }

    /// Compresses a base-format buffer into a buffer of its compressed variant, losslessly.
    ///
    /// - Parameters:
    ///   - source: a base-format buffer (`420v`, `420f`, `x420`, `xf20`, `BGRA`).
    ///   - destination: a buffer of `source`'s compressed variant, same size, at least
    ///     ``maximumCompressedByteCount(width:height:format:tileSize:)`` bytes (a pool from
    ///     ``makeCompressedPool(width:height:format:tileSize:minimumBufferCount:allocationThreshold:)``).
    /// - Returns: the raw and used byte counts.
    /// - Throws: ``CompressionError/Code-swift.struct/formatMismatch``,
    ///   ``CompressionError/Code-swift.struct/destinationTooSmall``, ``CompressionError/Code-swift.struct/pixelBuffer``
    ///   (lock failures, a read-only destination).
    @discardableResult
    public static func compress(
        _ source: PixelBuffer,
        into destination: PixelBuffer,
        options: Options = Options()
    ) throws(CompressionError) -> Statistics {
        let op = "SurfaceCodec.compress"
        guard !source.pixelFormat.isCompressed, destination.pixelFormat == source.pixelFormat.compressedVariant,
            destination.width == source.width, destination.height == source.height
        else {
            throw CompressionError(
                .formatMismatch,
                op
                    + ": \(source.pixelFormat) \(source.width)x\(source.height) into \(destination.pixelFormat) \(destination.width)x\(destination.height)"
            )
        }
        let grid = try grid(
            width: source.width,
            height: source.height,
            format: source.pixelFormat,
            tileSize: options.tileSize,
            layoutVersion: options.layoutVersion,
            effort: options.effort,
            op
        )
        let used = try CodecDriver.compress(
            source,
            into: destination,
            grid: grid,
            threads: options.resolvedThreads,
            workspace: CodecWorkspace(policy: options.parallelPolicy)
        )
        return Statistics(rawByteCount: grid.rawImageByteCount, compressedByteCount: used)
    }

    /// Decompresses a compressed buffer into a buffer of its base format, bit-exact.
    ///
    /// - Throws: ``CompressionError/Code-swift.struct/formatMismatch`` if the destination is not the base format
    ///   and size, and for a damaged surface one of ``CompressionError/Code-swift.struct/truncated``,
    ///   ``CompressionError/Code-swift.struct/badMagic``, ``CompressionError/Code-swift.struct/unsupportedVersion``,
    ///   ``CompressionError/Code-swift.struct/invalidHeader``, ``CompressionError/Code-swift.struct/checksumMismatch``,
    ///   ``CompressionError/Code-swift.struct/tableOutOfRange``, ``CompressionError/Code-swift.struct/overlappingTiles``,
    ///   ``CompressionError/Code-swift.struct/invalidTileMode``, ``CompressionError/Code-swift.struct/corruptPayload``.
    ///   On error the destination's contents are unspecified.
    public static func decompress(
        _ compressed: PixelBuffer,
        into destination: PixelBuffer,
        options: Options = Options()
    ) throws(CompressionError) {
        try CodecDriver.decompress(
            compressed,
            into: destination,
            threads: options.resolvedThreads,
            verifyChecksums: options.verifiesChecksums,
            workspace: CodecWorkspace(policy: options.parallelPolicy)
        )
    }

    /// Decodes a compressed buffer a few tile rows at a time into a small scratch buffer, so the whole raw frame
    /// never exists in memory.
    ///
    /// Tile rows are decoded into `scratch` in batches, top to bottom: as many tile rows at once as `scratch`
    /// holds (its height divided by ``tileRowHeight(of:)``), the tiles of a batch decoded in parallel by the
    /// options' threads. Then `body(rows)` runs on the calling thread: the image rows `rows` are in the
    /// first `rows.count` rows of `scratch`, which is locked read-write meanwhile, so `body` reads it with
    /// `scratch.withUnsafeBytes(ofPlane:)`.
    ///
    /// - Parameters:
    ///   - scratch: a base-format buffer as wide as the image and at least one tile row high
    ///     (``tileRowHeight(of:)``); make it N tile rows high to decode N tile rows at once, in parallel.
    ///   - body: called once per batch, in order; if it throws, decoding stops and its error is rethrown.
    /// - Throws: a ``CompressionError`` as ``decompress(_:into:options:)``, or what `body` throws; batches
    ///   decoded before an error have been handed over.
    public static func decodeTileRows(
        of compressed: PixelBuffer,
        into scratch: PixelBuffer,
        options: Options = Options(),
        _ body: (_ rows: Range<Int>) throws -> Void
    ) throws {
        try CodecDriver.decodeTileRows(
            of: compressed,
            into: scratch,
            threads: options.resolvedThreads,
            verifyChecksums: options.verifiesChecksums,
            workspace: CodecWorkspace(policy: options.parallelPolicy),
            body
        )
    }

    /// The height in pixels of one tile row of a compressed buffer (validates the header and table).
    public static func tileRowHeight(of compressed: PixelBuffer) throws(CompressionError) -> Int {
        let op = "SurfaceCodec.tileRowHeight"
        try PixelBufferAccess.lock(compressed, readOnly: true, op)
        defer { PixelBufferAccess.unlock(compressed, readOnly: true) }
        let grid = try CodecDriver.header(of: compressed, verifyChecksums: false, workspace: CodecWorkspace(), op).grid
        return min(grid.tileHeight, grid.height)
    }

    /// The bytes used by a compressed buffer, read from its header: what a consumer reads, the bandwidth figure.
    ///
    /// - Throws: ``CompressionError/Code-swift.struct/truncated``, ``CompressionError/Code-swift.struct/badMagic``,
    ///   ``CompressionError/Code-swift.struct/unsupportedVersion``, ``CompressionError/Code-swift.struct/formatMismatch``
    ///   for a base-format buffer.
    public static func bytesUsed(of compressed: PixelBuffer) throws(CompressionError) -> Int {
        try CodecDriver.bytesUsed(of: compressed)
    }

    /// How many table entries (tile components) use each mode: raw, solid, lz4, packed8, packed10, packed16,
    /// packed8LZ4, packed10LZ4, packed16LZ4, packed8LZ4Up, packed10LZ4Up, packed16LZ4Up, lz4Up and zstd, and under
    /// "codedLiterals" how many of those LZ4-block entries store their literals Huffman-coded (layout version 6),
    /// under "codedSequences" how many store their block as coded streams (layout version 7; both are counted under
    /// their mode too). Modes with no entry are left out.
    public static func modeCounts(of compressed: PixelBuffer) throws(CompressionError) -> [String: Int] {
        let counts = try CodecDriver.modeCounts(of: compressed)
        let names = [
            "raw", "solid", "lz4", "packed8", "packed10", "packed16", "packed8LZ4", "packed10LZ4", "packed16LZ4",
            "packed8LZ4Up", "packed10LZ4Up", "packed16LZ4Up", "lz4Up", "zstd", "codedLiterals", "codedSequences",
        ]
        var result: [String: Int] = [:]
        for (name, count) in zip(names, counts) where count > 0 { result[name] = count }
        return result
    }
}
