/// How a base format splits into separately coded components, and how an image splits into tiles.
///
/// Components: 4:2:0 formats code Y, Cb and Cr (CbCr de-interleaved); BGRA codes G, B−G, R−G and A
/// ("subtract green", planar). Every component of a tile is coded on its own, so a tile's table entries are
/// `componentCount` consecutive entries.
struct CodecFormat: Hashable, Sendable {
    enum Kind: Hashable, Sendable {
        /// 420v / 420f: 8-bit Y, Cb, Cr.
        case yuv8
        /// x420 / xf20: 16-bit words (10 bits MSB-aligned, padding bits kept when set).
        case yuv16
        /// BGRA: 8-bit G, B−G, R−G, A.
        case bgra
    }

    let kind: Kind

    init(kind: Kind) { self.kind = kind }

    init?(baseFourCC: UInt32) {
        switch baseFourCC {
        case 0x3432_3076, 0x3432_3066: kind = .yuv8  // 420v, 420f
        case 0x7834_3230, 0x7866_3230: kind = .yuv16  // x420, xf20
        case 0x4247_5241: kind = .bgra  // BGRA
        default: return nil
        }
    }

    var componentCount: Int { kind == .bgra ? 4 : 3 }
    var bytesPerSample: Int { kind == .yuv16 ? 2 : 1 }
    /// Horizontal and vertical subsampling of a component.
    func subsampling(_ component: Int) -> Int { kind == .bgra || component == 0 ? 1 : 2 }
    /// Whether both image dimensions must be even.
    var needsEvenSize: Bool { kind != .bgra }
}

/// The tile geometry of one compressed surface: everything the header determines.
struct TileGrid: Hashable, Sendable {
    let format: CodecFormat
    let width: Int
    let height: Int
    let tileWidth: Int
    let tileHeight: Int
    let tilesAcross: Int
    let tilesDown: Int
    /// The layout version the surface is written in: 1 (entries with offsets and 32-bit payload checksums), 2
    /// (entries without offsets, which are implied, and with 64-bit payload checksums; both 16 bytes an entry) or
    /// 3 (version 2 plus the packed8LZ4 mode) or 4 (version 3 plus packed10LZ4 and packed16LZ4) or 5 (version 4 plus
    /// the Up modes, whose LZ4 reaches into the tile above) or 6 (version 5 plus LZ4 blocks with Huffman-coded
    /// literals, mode byte + ``TileMode/codedLiteralsFlag``) or 7 (version 6 plus LZ4 blocks split into coded streams,
    /// mode byte + ``TileMode/codedSequencesFlag``) or 8 (version 7 plus mode ``TileMode/zstd``, a zstd frame of the
    /// samples). The encoder encodes with ``currentLayoutVersion`` and states 2 in
    /// the header when no entry needs a later one, else the lowest that has every mode used (`TileCodec.writtenLayoutVersion`).
    let layoutVersion: Int
    /// Whether the encoder searches its LZ4 winners again with liblz4's HC search (``SurfaceCodec/Effort/best``)
    /// or keeps the fast search's blocks (``SurfaceCodec/Effort/fast``, the default). Not in the header: the
    /// decoder never reads it.
    var searchesHarder = false

    /// Whether the encoder may replace this grid's tile height with ``ScreenBands/rows`` when the frame looks like
    /// screen content (``SurfaceCodec/TileSize/default`` only: a tile size the caller named is kept). Not in the
    /// header: the decoder reads whatever tile size the header states.
    var choosesScreenBands = false
    /// Whether this grid is the taller screen-band grid the encoder chose (``ScreenBands``): it then encodes no Up
    /// entries, so its chunks are single tiles and every thread gets a share of a frame of few bands.
    var usesScreenBands = false

    /// Whether the encoder stores screen-like components as zstd frames (``TileMode/zstd``): layout version 8, at
    /// either effort (unless the bench's `FRAMEBUS_CODEC_ZSTD_LEVEL=0` asks for version 7's output).
    var encodesZstd: Bool { layoutVersion >= TileMode.zstdLayoutVersion && ZstdFrame.isEnabled }

    /// The zstd level of those frames: ``ZstdFrame/level`` (1) at effort fast, ``ZstdFrame/bestLevel`` at effort best.
    var zstdLevel: Int { searchesHarder ? ZstdFrame.bestLevel : ZstdFrame.level }

    static let headerByteCount = 64
    static let currentLayoutVersion = 8
    static let supportedLayoutVersions = 1...8
    /// Bytes of one table entry.
    var entryByteCount: Int { 16 }
    /// The largest tile, in pixels; it bounds every scratch buffer.
    static let maximumTileArea = 1 << 22

    /// Returns nil when the geometry is impossible (the caller turns that into its error).
    init?(
        format: CodecFormat,
        width: Int,
        height: Int,
        tileWidth: Int,
        tileHeight: Int,
        layoutVersion: Int = TileGrid.currentLayoutVersion
    ) {
        guard Self.supportedLayoutVersions.contains(layoutVersion) else { return nil }
        self.layoutVersion = layoutVersion
        guard width > 0, height > 0, width <= 16384, height <= 16384 else { return nil }
        if format.needsEvenSize { guard width % 2 == 0, height % 2 == 0 else { return nil } }
        guard tileWidth >= 2, tileHeight >= 2, tileWidth % 2 == 0, tileHeight % 2 == 0 else { return nil }
        self.format = format
        self.width = width
        self.height = height
        // A tile larger than the image is clamped (rounded up to even), so the header stays canonical.
        let clampedWidth = min(tileWidth, (width + 1) & ~1)
        let clampedHeight = min(tileHeight, (height + 1) & ~1)
        guard clampedWidth * clampedHeight <= Self.maximumTileArea else { return nil }
        self.tileWidth = clampedWidth
        self.tileHeight = clampedHeight
        self.tilesAcross = (width + clampedWidth - 1) / clampedWidth
        self.tilesDown = (height + clampedHeight - 1) / clampedHeight
    }

    var tileCount: Int { tilesAcross * tilesDown }

    /// Whether the encoder tries the Up modes (a tile's LZ4 with the tile above's packed payload as dictionary):
    /// from layout version 5, on full-width bands, where the tile above is the one encoded just before.
    var encodesTileAbove: Bool { layoutVersion >= 5 && tilesAcross == 1 && tilesDown > 1 && !usesScreenBands }
    var componentCount: Int { format.componentCount }
    var entryCount: Int { tileCount * componentCount }
    var payloadStart: Int { Self.headerByteCount + entryByteCount * entryCount }

    /// The pixel rectangle of a tile.
    func tileRect(_ tile: Int) -> (x: Int, y: Int, width: Int, height: Int) {
        let x = (tile % tilesAcross) * tileWidth
        let y = (tile / tilesAcross) * tileHeight
        return (x, y, min(tileWidth, width - x), min(tileHeight, height - y))
    }

    /// Samples per row and rows of one component of a tile.
    func componentExtent(tile: Int, component: Int) -> (width: Int, height: Int) {
        let rect = tileRect(tile)
        let s = format.subsampling(component)
        return (rect.width / s, rect.height / s)
    }

    /// Bytes of one component of a tile, uncompressed.
    func rawByteCount(tile: Int, component: Int) -> Int {
        let e = componentExtent(tile: tile, component: component)
        return e.width * e.height * format.bytesPerSample
    }

    /// Bytes of all components of a tile, uncompressed.
    func rawByteCount(tile: Int) -> Int {
        var total = 0
        for c in 0..<componentCount { total += rawByteCount(tile: tile, component: c) }
        return total
    }

    /// Bytes of the whole base-format image, tightly packed.
    var rawImageByteCount: Int {
        switch format.kind {
        case .yuv8: width * height * 3 / 2
        case .yuv16: width * height * 3
        case .bgra: width * height * 4
        }
    }

    /// The worst case: header, table and every tile stored raw.
    var maximumByteCount: Int { payloadStart + rawImageByteCount }

    /// The largest component of any tile, in samples.
    var maximumComponentSamples: Int { tileWidth * tileHeight }

    /// Bytes of one component slot in a scratch buffer: the largest component rounded up to whole
    /// 16-sample blocks (each row rounded up to whole 8-sample blocks), plus slack for the 16-byte stores of the bit packer, 64-byte aligned.
    var scratchComponentStride: Int {
        let bytes = (tileWidth + 16) * tileHeight * 2 + 128
        return (bytes + 63) & ~63
    }
}
