/// The compressed surface layout (versions 1 to 8) and the tile-parallel encoder and decoder over raw memory.
///
/// docs/COMPRESSED-LAYOUT.md is the full specification. Header, all integers little-endian:
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | magic `FBSC` (bytes 46 42 53 43) |
/// | 4 | 2 | layout version (4 if a packed10LZ4 or packed16LZ4 entry is present, else 3 if a packed8LZ4 one is, else 2; decoders also read 1) |
/// | 6 | 2 | header byte count (64) |
/// | 8 | 4 | base format FourCC (`420v`, …, big-endian packed as CoreVideo's OSType) |
/// | 12 | 4 | width in pixels |
/// | 16 | 4 | height in pixels |
/// | 20 | 4 | tile width in pixels (even) |
/// | 24 | 4 | tile height in pixels (even) |
/// | 28 | 4 | table entry count = tiles × components |
/// | 32 | 8 | bytes used: header + table + payloads |
/// | 40 | 8 | checksum of bytes 0..<40, 48..<64 and the table |
/// | 48 | 16 | reserved, zero |
/// | 64 | 16 × entries | tile table: per tile (row-major), per component. v2: size u32, mode u8, 3 zero bytes, payload checksum u64. v1: offset u32 (from the surface start), size u32, mode u8, 3 zero bytes, the payload checksum's low 32 bits |
///
/// Payloads follow the table back to back, in table order, ending exactly at "bytes used" (so v2's offsets are
/// the running sum of the sizes).
enum TileCodec {
    static let magic: UInt32 = 0x4353_4246  // "FBSC" little-endian

    /// One validated table entry, in private memory: the decoder takes every bound from here, never from the
    /// surface again (a publisher may rewrite the table while a subscriber decodes).
    struct Entry: Hashable, Sendable {
        var offset: Int
        var byteCount: Int
        var mode: TileMode
        var checksum: UInt64
        /// Layout version 6: the payload is the mode's LZ4 block with its literals Huffman-coded (§6.6); the mode
        /// byte is `mode` + ``TileMode/codedLiteralsFlag``.
        var codedLiterals = false
        /// Layout version 7: the payload is the mode's LZ4 block split into Huffman-coded streams (§6.7); the mode
        /// byte is `mode` + ``TileMode/codedSequencesFlag``.
        var codedSequences = false

        /// The mode byte as stored.
        var modeByte: UInt8 {
            mode.rawValue + (codedLiterals ? TileMode.codedLiteralsFlag : 0)
                + (codedSequences ? TileMode.codedSequencesFlag : 0)
        }
    }

    // MARK: Header

    static func writeHeader(
        _ grid: TileGrid,
        baseFourCC: UInt32,
        bytesUsed: Int,
        into p: UnsafeMutableRawPointer
    ) {
        unsafe p.initializeMemory(as: UInt8.self, repeating: 0, count: TileGrid.headerByteCount)
        unsafe p.storeBytes(of: magic.littleEndian, toByteOffset: 0, as: UInt32.self)
        unsafe p.storeBytes(
            of: UInt16(writtenLayoutVersion(grid, table: p)).littleEndian,
            toByteOffset: 4,
            as: UInt16.self
        )
        unsafe p.storeBytes(of: UInt16(TileGrid.headerByteCount).littleEndian, toByteOffset: 6, as: UInt16.self)
        unsafe p.storeBytes(of: baseFourCC.littleEndian, toByteOffset: 8, as: UInt32.self)
        unsafe p.storeBytes(of: UInt32(grid.width).littleEndian, toByteOffset: 12, as: UInt32.self)
        unsafe p.storeBytes(of: UInt32(grid.height).littleEndian, toByteOffset: 16, as: UInt32.self)
        unsafe p.storeBytes(of: UInt32(grid.tileWidth).littleEndian, toByteOffset: 20, as: UInt32.self)
        unsafe p.storeBytes(of: UInt32(grid.tileHeight).littleEndian, toByteOffset: 24, as: UInt32.self)
        unsafe p.storeBytes(of: UInt32(grid.entryCount).littleEndian, toByteOffset: 28, as: UInt32.self)
        unsafe p.storeBytes(of: UInt64(bytesUsed).littleEndian, toByteOffset: 32, as: UInt64.self)
        unsafe sealHeader(p, tableByteCount: grid.entryCount * grid.entryByteCount)
    }

    /// The version a header states: for a grid of version 3 or later, the lowest version (at least 2) that has
    /// every mode its table uses (the header and table bytes of versions 2 to 4 are the same), so that a decoder
    /// that knows only an older version still reads every surface it can.
    static func writtenLayoutVersion(_ grid: TileGrid, table p: UnsafeRawPointer) -> Int {
        guard grid.layoutVersion >= 3 else { return grid.layoutVersion }
        var version = 2
        for index in 0..<grid.entryCount {
            let mode = unsafe p.load(
                fromByteOffset: TileGrid.headerByteCount + index * grid.entryByteCount + 4,
                as: UInt8.self
            )
            if mode >= TileMode.codedSequencesFlag {
                version = max(version, TileMode.codedSequencesLayoutVersion)
            } else if mode >= TileMode.codedLiteralsFlag {
                version = max(version, TileMode.codedLiteralsLayoutVersion)
            } else if let mode = TileMode(rawValue: mode) {
                version = max(version, mode.minimumLayoutVersion)
            }
        }
        return min(version, grid.layoutVersion)
    }

    /// Computes and stores the header checksum (tests use it to forge consistent damaged tables).
    static func sealHeader(_ p: UnsafeMutableRawPointer, tableByteCount: Int) {
        unsafe p.storeBytes(
            of: headerChecksum(UnsafeRawPointer(p), tableByteCount: tableByteCount).littleEndian,
            toByteOffset: 40,
            as: UInt64.self
        )
    }

    static func headerChecksum(_ p: UnsafeRawPointer, tableByteCount: Int) -> UInt64 {
        var h = unsafe Checksum.hash(p, count: 40)
        h = unsafe Checksum.hash(p + 48, count: 16, seed: h)
        return unsafe Checksum.hash(p + TileGrid.headerByteCount, count: tableByteCount, seed: h)
    }

    static func writeEntry(_ entry: Entry, index: Int, of grid: TileGrid, into p: UnsafeMutableRawPointer) {
        let e = unsafe p + TileGrid.headerByteCount + index * grid.entryByteCount
        if grid.layoutVersion == 1 {
            unsafe e.storeBytes(of: UInt32(entry.offset).littleEndian, toByteOffset: 0, as: UInt32.self)
            unsafe e.storeBytes(of: UInt32(entry.byteCount).littleEndian, toByteOffset: 4, as: UInt32.self)
            unsafe e.storeBytes(of: UInt32(entry.modeByte).littleEndian, toByteOffset: 8, as: UInt32.self)
            unsafe e.storeBytes(
                of: UInt32(truncatingIfNeeded: entry.checksum).littleEndian,
                toByteOffset: 12,
                as: UInt32.self
            )
        } else {
            unsafe e.storeBytes(of: UInt32(entry.byteCount).littleEndian, toByteOffset: 0, as: UInt32.self)
            unsafe e.storeBytes(of: UInt32(entry.modeByte).littleEndian, toByteOffset: 4, as: UInt32.self)
            unsafe e.storeBytes(of: entry.checksum.littleEndian, toByteOffset: 8, as: UInt64.self)
        }
    }

    /// Moves the offset of entry `index` (of a table the encoder wrote) down by `shift` bytes; v2 stores none.
    static func moveEntryOffset(index: Int, down shift: Int, in grid: TileGrid, _ p: UnsafeMutableRawPointer) {
        guard grid.layoutVersion == 1 else { return }
        let at = TileGrid.headerByteCount + index * grid.entryByteCount
        let offset = Int(UInt32(littleEndian: unsafe p.loadUnaligned(fromByteOffset: at, as: UInt32.self)))
        unsafe p.storeBytes(of: UInt32(offset - shift).littleEndian, toByteOffset: at, as: UInt32.self)
    }

    /// The fields of entry `index` as stored. v2 stores no offset: it is `impliedOffset`, the end of the
    /// previous payload. v1's checksum is 32 bits.
    static func readEntry(
        index: Int,
        of grid: TileGrid,
        impliedOffset: Int,
        from p: UnsafeRawPointer
    ) -> (offset: Int, byteCount: Int, mode: UInt32, checksum: UInt64) {
        let e = unsafe p + TileGrid.headerByteCount + index * grid.entryByteCount
        let word0 = Int(UInt32(littleEndian: unsafe e.loadUnaligned(fromByteOffset: 0, as: UInt32.self)))
        let word1 = UInt32(littleEndian: unsafe e.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
        if grid.layoutVersion == 1 {
            let mode = UInt32(littleEndian: unsafe e.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
            let checksum = UInt32(littleEndian: unsafe e.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
            return (word0, Int(word1), mode, UInt64(checksum))
        }
        let checksum = UInt64(littleEndian: unsafe e.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        return (impliedOffset, word0, word1, checksum)
    }

    /// What a parsed, validated header and table say, copied out of the surface.
    ///
    /// Everything here lives in private memory and was validated once; the decoder takes every offset, size
    /// and mode from `entries`, never from the surface again.
    struct Header: Hashable, Sendable {
        var baseFourCC: UInt32
        var grid: TileGrid
        var bytesUsed: Int
        /// One validated entry per tile and component, in table order.
        var entries: [Entry]
    }

    /// Reusable private memory for ``parse(_:count:verifyChecksums:storage:)``, so that parsing allocates
    /// nothing once it has seen a table of the same size.
    struct ParseStorage {
        /// The private copy of the header and table bytes.
        var tableBytes: [UInt8] = []
        /// Entries of the previous parse, handed back for their capacity.
        var entries: [Entry] = []
    }

    /// Reads only the first 64 bytes: magic, version and bytes used, without validating the table.
    static func bytesUsed(_ p: UnsafeRawPointer, count: Int) throws(CompressionError) -> Int {
        let op = "SurfaceCodec.bytesUsed"
        guard count >= TileGrid.headerByteCount else { throw CompressionError(.truncated, op) }
        // Each field is loaded once into a local and checked there.
        guard UInt32(littleEndian: unsafe p.loadUnaligned(as: UInt32.self)) == magic else {
            throw CompressionError(.badMagic, op)
        }
        let version = Int(UInt16(littleEndian: unsafe p.loadUnaligned(fromByteOffset: 4, as: UInt16.self)))
        guard TileGrid.supportedLayoutVersions.contains(version) else {
            throw CompressionError(.unsupportedVersion, op + ": layout version \(version)")
        }
        let used = UInt64(littleEndian: unsafe p.loadUnaligned(fromByteOffset: 32, as: UInt64.self))
        guard used <= UInt64(Int.max) else { throw CompressionError(.invalidHeader, op) }
        return Int(used)
    }

    /// Validates the header and the whole tile table of `count` bytes at `p`, which another process may be
    /// writing while this runs.
    ///
    /// The header and the table are copied into private memory once (`storage`), and every check and every
    /// value returned comes from that copy; the surface is not read again here.
    static func parse(
        _ p: UnsafeRawPointer,
        count: Int,
        verifyChecksums: Bool = true
    ) throws(CompressionError) -> Header {
        var storage = ParseStorage()
        return try unsafe parse(p, count: count, verifyChecksums: verifyChecksums, storage: &storage)
    }

    /// ``parse(_:count:verifyChecksums:)`` reusing `storage`'s memory.
    static func parse(
        _ p: UnsafeRawPointer,
        count: Int,
        verifyChecksums: Bool,
        storage: inout ParseStorage
    ) throws(CompressionError) -> Header {
        let op = "SurfaceCodec.decode"
        guard count >= TileGrid.headerByteCount else { throw CompressionError(.truncated, op) }
        if storage.tableBytes.count < TileGrid.headerByteCount {
            storage.tableBytes = [UInt8](repeating: 0, count: TileGrid.headerByteCount)
        }
        unsafe storage.tableBytes.withUnsafeMutableBytes { copy in
            unsafe copy.baseAddress!.copyMemory(from: p, byteCount: TileGrid.headerByteCount)
        }
        let header = try unsafe storage.tableBytes.withUnsafeBytes { copy in
            Result { () throws(CompressionError) in try unsafe parseHeader(copy.baseAddress!, count: count, op) }
        }.get()
        let grid = header.grid
        let tableEnd = grid.payloadStart  // <= bytes used <= count: parseHeader checked
        if storage.tableBytes.count < tableEnd {
            storage.tableBytes = [UInt8](repeating: 0, count: tableEnd)
            unsafe storage.tableBytes.withUnsafeMutableBytes { copy in
                unsafe copy.baseAddress!.copyMemory(from: p, byteCount: TileGrid.headerByteCount)
            }
        }
        unsafe storage.tableBytes.withUnsafeMutableBytes { copy in
            unsafe (copy.baseAddress! + TileGrid.headerByteCount).copyMemory(
                from: p + TileGrid.headerByteCount,
                byteCount: tableEnd - TileGrid.headerByteCount
            )
        }
        var entries: [Entry] = []
        swap(&entries, &storage.entries)
        entries.removeAll(keepingCapacity: true)
        try unsafe storage.tableBytes.withUnsafeBytes { copy in
            Result { () throws(CompressionError) in
                try unsafe parseTable(
                    copy.baseAddress!,
                    grid: grid,
                    bytesUsed: header.bytesUsed,
                    verifyChecksums: verifyChecksums,
                    into: &entries,
                    op
                )
            }
        }.get()
        var result = header
        result.entries = entries
        return result
    }

    /// Checks the 64 header bytes at `h` (private memory) against a surface of `count` bytes.
    private static func parseHeader(_ h: UnsafeRawPointer, count: Int, _ op: String) throws(CompressionError) -> Header
    {
        guard UInt32(littleEndian: unsafe h.loadUnaligned(as: UInt32.self)) == magic else {
            throw CompressionError(.badMagic, op)
        }
        let version = Int(UInt16(littleEndian: unsafe h.loadUnaligned(fromByteOffset: 4, as: UInt16.self)))
        guard TileGrid.supportedLayoutVersions.contains(version) else {
            throw CompressionError(.unsupportedVersion, op + ": layout version \(version)")
        }
        let used64 = UInt64(littleEndian: unsafe h.loadUnaligned(fromByteOffset: 32, as: UInt64.self))
        guard used64 <= UInt64(Int.max) else { throw CompressionError(.invalidHeader, op) }
        let used = Int(used64)
        let headerBytes = Int(UInt16(littleEndian: unsafe h.loadUnaligned(fromByteOffset: 6, as: UInt16.self)))
        guard headerBytes == TileGrid.headerByteCount else {
            throw CompressionError(.invalidHeader, op + ": header size")
        }
        let fourCC = UInt32(littleEndian: unsafe h.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
        func field(_ offset: Int) -> Int {
            Int(UInt32(littleEndian: unsafe h.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        }
        guard let format = CodecFormat(baseFourCC: fourCC) else {
            throw CompressionError(.invalidHeader, op + ": unknown base format")
        }
        guard
            let grid = TileGrid(
                format: format,
                width: field(12),
                height: field(16),
                tileWidth: field(20),
                tileHeight: field(24),
                layoutVersion: version
            ),
            grid.tileWidth == field(20), grid.tileHeight == field(24)
        else {
            throw CompressionError(.invalidHeader, op + ": size or tile size")
        }
        guard field(28) == grid.entryCount else { throw CompressionError(.invalidHeader, op + ": entry count") }
        for offset in stride(from: 48, to: 64, by: 8) {
            guard unsafe h.loadUnaligned(fromByteOffset: offset, as: UInt64.self) == 0 else {
                throw CompressionError(.invalidHeader, op + ": reserved bytes")
            }
        }
        guard used >= grid.payloadStart, used <= grid.maximumByteCount else {
            throw CompressionError(.invalidHeader, op + ": bytes used \(used)")
        }
        guard count >= used else { throw CompressionError(.truncated, op + ": \(count) of \(used) bytes") }
        return Header(baseFourCC: fourCC, grid: grid, bytesUsed: used, entries: [])
    }

    /// Checks the header checksum and every entry of the private copy `t` of header and table, appending the
    /// entries to `entries`.
    private static func parseTable(
        _ t: UnsafeRawPointer,
        grid: TileGrid,
        bytesUsed used: Int,
        verifyChecksums: Bool,
        into entries: inout [Entry],
        _ op: String
    ) throws(CompressionError) {
        if verifyChecksums {
            let stored = UInt64(littleEndian: unsafe t.loadUnaligned(fromByteOffset: 40, as: UInt64.self))
            guard unsafe headerChecksum(t, tableByteCount: grid.entryCount * grid.entryByteCount) == stored else {
                throw CompressionError(.checksumMismatch, op + ": header")
            }
        }
        var expected = grid.payloadStart
        let components = grid.componentCount
        let bytesPerSample = grid.format.bytesPerSample
        for index in 0..<grid.entryCount {
            let e = unsafe readEntry(index: index, of: grid, impliedOffset: expected, from: t)
            let raw = grid.rawByteCount(tile: index / components, component: index % components)
            // Formatted only on failure: string interpolation per entry would cost more than the check.
            func where_() -> String { "\(op): tile \(index / components) component \(index % components)" }
            guard e.offset >= grid.payloadStart, e.byteCount <= raw, e.offset + e.byteCount <= used else {
                throw CompressionError(.tableOutOfRange, where_())
            }
            guard e.offset == expected else { throw CompressionError(.overlappingTiles, where_()) }
            // Layout version 6: an LZ4-block mode plus codedLiteralsFlag is that mode with Huffman-coded literals.
            // Layout version 7: plus codedSequencesFlag, that mode with its whole block split into coded streams.
            let codedSequences = e.mode >= UInt32(TileMode.codedSequencesFlag)
            let codedLiterals = !codedSequences && e.mode >= UInt32(TileMode.codedLiteralsFlag)
            let baseMode =
                codedSequences
                ? e.mode &- UInt32(TileMode.codedSequencesFlag)
                : codedLiterals ? e.mode &- UInt32(TileMode.codedLiteralsFlag) : e.mode
            guard baseMode <= 0xFF, let mode = TileMode(rawValue: UInt8(baseMode)),
                mode.isValid(bytesPerSample: bytesPerSample, layoutVersion: grid.layoutVersion),
                !codedLiterals || mode.isLZ4Block && grid.layoutVersion >= TileMode.codedLiteralsLayoutVersion,
                !codedSequences || mode.isLZ4Block && grid.layoutVersion >= TileMode.codedSequencesLayoutVersion
            else { throw CompressionError(.invalidTileMode, where_()) }
            if mode.usesTileAbove {
                // The tile above is in the same chain (chains restart every TileMode.chainRows tile rows, so
                // resolving one is bounded work).
                let row = index / components / grid.tilesAcross
                guard row % TileMode.chainRows != 0 else {
                    throw CompressionError(.invalidTileMode, where_() + ": first tile row of a chain")
                }
            }
            switch mode {
            case .raw: guard e.byteCount == raw else { throw CompressionError(.corruptPayload, where_()) }
            case .solid:
                guard e.byteCount == bytesPerSample else { throw CompressionError(.corruptPayload, where_()) }
            default: guard e.byteCount > 0 else { throw CompressionError(.corruptPayload, where_()) }
            }
            entries.append(
                Entry(
                    offset: e.offset,
                    byteCount: e.byteCount,
                    mode: mode,
                    checksum: e.checksum,
                    codedLiterals: codedLiterals,
                    codedSequences: codedSequences
                )
            )
            expected += e.byteCount
        }
        guard expected == used else {
            throw CompressionError(.overlappingTiles, op + ": payloads end at \(expected), not \(used)")
        }
    }

    // MARK: Encoding

    /// Scratch slots an encoding worker needs (see ``encodeTile``).
    static let encodeScratchSlots = 8

    /// Encodes the image into `destination` (at least `grid.maximumByteCount` bytes); returns bytes used.
    ///
    /// Only the header, the table and the bytes used are written, front to back, so the pages of a surface past
    /// its bytes used are never touched (a compressed surface is not pre-populated: untouched pages cost no
    /// memory). With several threads, each chunk of consecutive tiles is encoded into the workspace's private
    /// staging area, at the offset its tiles would have if every earlier tile were raw (so chunks never
    /// collide), and the chunks are then copied into the surface back to back.
    static func encode(
        _ grid: TileGrid,
        baseFourCC: UInt32,
        from image: ImagePlanes,
        into destination: UnsafeMutableRawPointer,
        threads: Int,
        workspace: CodecWorkspace = CodecWorkspace()
    ) -> Int {
        let tileCount = grid.tileCount
        // With Up modes, chunks are whole chains (TileMode.chainRows bands), so that the tile above a tile is
        // encoded just before it by the same worker and the bytes do not depend on the number of threads.
        let chains = grid.encodesTileAbove
        let chainCount = (tileCount + TileMode.chainRows - 1) / TileMode.chainRows
        let split = workspace.policy.encodeWorkers(
            threads: threads,
            chunks: chains ? chainCount : tileCount,
            rawBytes: grid.rawImageByteCount
        )
        let chunkCount = split <= 1 ? 1 : chains ? chainCount : min(tileCount, split * 4)
        let workers = min(chunkCount, split)
        workspace.lastEncodeWorkers = workers
        let stride = grid.scratchComponentStride
        let scratch = unsafe workspace.scratch(workers: workers, byteCount: encodeScratchByteCount(grid))
        if chunkCount == 1 {
            var cursor = grid.payloadStart
            var above = unsafe AboveDictionaries(zstd: scratch.zstd(0))
            for t in 0..<tileCount {
                unsafe encodeTile(
                    grid,
                    tile: t,
                    from: image,
                    scratch: scratch[0],
                    stride: stride,
                    table: destination,
                    into: destination,
                    cursor: &cursor,
                    above: &above
                )
            }
            unsafe writeHeader(grid, baseFourCC: baseFourCC, bytesUsed: cursor, into: destination)
            return cursor
        }
        // Chunk c holds tiles firstTile[c]..<firstTile[c + 1] and writes its payloads from regionStart[c].
        CodecWorkspace.reset(&workspace.regionStart, count: chunkCount + 1, to: 0)
        CodecWorkspace.reset(&workspace.chunkFirstTile, count: chunkCount + 1, to: 0)
        CodecWorkspace.reset(&workspace.chunkUsed, count: chunkCount, to: 0)
        var offset = grid.payloadStart
        var tile = 0
        for chunk in 0...chunkCount {
            let first = chains ? min(chunk * TileMode.chainRows, tileCount) : tileCount * chunk / chunkCount
            while tile < first {
                offset += grid.rawByteCount(tile: tile)
                tile += 1
            }
            workspace.regionStart[chunk] = offset
            workspace.chunkFirstTile[chunk] = first
        }
        let staging = unsafe workspace.staging(byteCount: grid.maximumByteCount)
        unsafe workspace.chunkUsed.withUnsafeMutableBufferPointer { used in
            unsafe workspace.regionStart.withUnsafeBufferPointer { starts in
                unsafe workspace.chunkFirstTile.withUnsafeBufferPointer { firsts in
                    let job = workspace.encodeJob
                    job.grid = grid
                    unsafe job.image = image
                    unsafe job.table = destination
                    unsafe job.staging = staging
                    unsafe job.scratch = scratch
                    job.stride = stride
                    job.chunkCount = chunkCount
                    job.workers = workers
                    unsafe job.starts = starts
                    unsafe job.firsts = firsts
                    unsafe job.used = used
                    workspace.parallel(workers: workers, job)
                    unsafe job.scratch = nil
                }
            }
        }
        // Pack the chunks into the surface and move their table offsets down.
        var write = grid.payloadStart
        let components = grid.componentCount
        for chunk in 0..<chunkCount {
            let start = workspace.regionStart[chunk]
            let used = workspace.chunkUsed[chunk]
            unsafe (destination + write).copyMemory(from: staging + start, byteCount: used)
            let shift = start - write
            if shift != 0 {
                for index in workspace.chunkFirstTile[chunk] * components..<workspace.chunkFirstTile[chunk + 1]
                    * components
                {
                    unsafe moveEntryOffset(index: index, down: shift, in: grid, destination)
                }
            }
            write += used
        }
        unsafe writeHeader(grid, baseFourCC: baseFourCC, bytesUsed: write, into: destination)
        return write
    }

    /// Bytes of one encoding worker's scratch: ``encodeScratchSlots`` slots, liblz4's HC state, and for grids that
    /// use Up modes one area per component for the packed payload of the tile above (`bytesPerSample` slots each:
    /// a packed10/packed16 payload takes up to about 2.1 × the component's samples' bytes).
    static func encodeScratchByteCount(_ grid: TileGrid) -> Int {
        let dictionaries = grid.encodesTileAbove ? grid.componentCount * grid.format.bytesPerSample : 0
        return grid.scratchComponentStride * (encodeScratchSlots + dictionaries) + LZ4Block.highCompressionStateByteCount
    }

    /// What the encoder keeps of the tile encoded just before (the tile above, in a band grid): per component the
    /// packed mode and size of its inner payload, held in the worker's dictionary areas (0: none).
    struct AboveDictionaries {
        var counts: InlineArray<4, Int> = .init(repeating: 0)
        /// The worker's zstd contexts (``ScratchAreas/zstd(_:)``).
        var zstd: ZstdContexts
    }

    /// Scratch slots: 0..<4 components, 4 and 7 residuals, 5 packed output, 6 alternative output; after the 8
    /// slots, liblz4's HC state, then (grids that use Up modes) the dictionary areas of ``AboveDictionaries``. The
    /// worker's zstd contexts (layout version 8 at effort fast) come with `above`.
    static func encodeTile(
        _ grid: TileGrid,
        tile: Int,
        from image: ImagePlanes,
        scratch: UnsafeMutableRawPointer,
        stride: Int,
        table: UnsafeMutableRawPointer,
        into destination: UnsafeMutableRawPointer,
        cursor: inout Int,
        above: inout AboveDictionaries
    ) {
        unsafe TileSamples.gather(grid, tile: tile, from: image, into: scratch, stride: stride)
        let residuals = unsafe scratch + 4 * stride
        let packed = unsafe scratch + 5 * stride
        let alternative = unsafe scratch + 6 * stride
        // liblz4's state: HC for effort best, the fast search's (smaller) for effort fast, in the same place.
        let searchState = unsafe scratch + encodeScratchSlots * stride
        let best = grid.searchesHarder
        let highCompressionState = unsafe best ? searchState : nil
        let dictionaries = unsafe searchState + LZ4Block.highCompressionStateByteCount
        let dictionaryStride = stride * grid.format.bytesPerSample
        // Up modes: the tile above was encoded just before (band grids, chunks of whole chains); its packed
        // payloads are the dictionaries. A chain restarts every TileMode.chainRows rows.
        let row = tile / grid.tilesAcross
        let usesAbove = grid.encodesTileAbove && row % TileMode.chainRows != 0
        let keepsForBelow = grid.encodesTileAbove && (row + 1) % TileMode.chainRows != 0 && row + 1 < grid.tilesDown
        for c in 0..<grid.componentCount {
            let extent = grid.componentExtent(tile: tile, component: c)
            let samples = unsafe scratch + c * stride
            var choice: ComponentCodec.Choice
            let rawBytes = extent.width * extent.height * grid.format.bytesPerSample
            // Layout version 8: a component that looks like screen content (most 8-byte words equal the
            // word above) is stored as one zstd frame of its samples when that is smaller than raw, and nothing else
            // is tried; photographs, and screen components zstd cannot shrink, take the modes below.
            var zstdWritten = 0
            if grid.encodesZstd,
                unsafe ComponentCodec.looksLikeScreen(
                    UnsafeRawPointer(samples),
                    rowBytes: rawBytes / extent.height,
                    rows: extent.height,
                    allowsLeft: true
                ),
                unsafe !ComponentCodec.isSolid(
                    UnsafeRawPointer(samples),
                    count: rawBytes,
                    bytesPerSample: grid.format.bytesPerSample
                )
            {
                zstdWritten = unsafe ZstdFrame.compress(
                    samples,
                    count: rawBytes,
                    into: alternative,
                    capacity: rawBytes - 1,
                    level: grid.zstdLevel,
                    contexts: above.zstd
                )
            }
            if zstdWritten > 0 {
                unsafe choice = ComponentCodec.Choice(
                    mode: .zstd,
                    payload: UnsafeRawPointer(alternative),
                    byteCount: zstdWritten
                )
            } else if grid.format.bytesPerSample == 1 {
                unsafe choice = ComponentCodec.encode8(
                    samples: samples.assumingMemoryBound(to: UInt8.self),
                    width: extent.width,
                    height: extent.height,
                    residuals: residuals.assumingMemoryBound(to: UInt8.self),
                    residuals2: (scratch + 7 * stride).assumingMemoryBound(to: UInt8.self),
                    packed: packed,
                    alternative: alternative,
                    allowsPacked8LZ4: TileMode.packed8LZ4.minimumLayoutVersion <= grid.layoutVersion,
                    highCompressionState: highCompressionState
                )
            } else {
                unsafe choice = ComponentCodec.encode16(
                    samples: samples.assumingMemoryBound(to: UInt16.self),
                    width: extent.width,
                    height: extent.height,
                    residuals: residuals.assumingMemoryBound(to: UInt16.self),
                    residuals2: (scratch + 7 * stride).assumingMemoryBound(to: UInt16.self),
                    packed: packed,
                    alternative: alternative,
                    allowsPacked16LZ4: TileMode.packed10LZ4.minimumLayoutVersion <= grid.layoutVersion,
                    highCompressionState: highCompressionState
                )
            }
            let dictionary = unsafe dictionaries + c * dictionaryStride
            let screenLike = unsafe choice.mode == .lz4 || choice.mode.innerMode != nil && choice.triedPackedLZ4
            if usesAbove, above.counts[c] > 0, screenLike, unsafe choice.byteCount > 1 {
                // The samples through LZ4 with the tile above's inner payload as dictionary, into slot 7 (free: no
                // choice lives there). Effort fast tries it only where the samples' LZ4 won (the packed payload's
                // through LZ4 tries its own Up mode below), with the fast search.
                let output = unsafe scratch + 7 * stride
                let written =
                    unsafe best
                    ? LZ4Block.compressHC(
                        samples,
                        count: rawBytes,
                        dictionary: dictionary,
                        dictionaryCount: above.counts[c],
                        into: output,
                        capacity: choice.byteCount - 1,
                        state: searchState
                    )
                    : choice.mode == .lz4
                        ? LZ4Block.compress(
                            samples,
                            count: rawBytes,
                            dictionary: dictionary,
                            dictionaryCount: above.counts[c],
                            into: output,
                            capacity: choice.byteCount - 1,
                            state: searchState
                        ) : 0
                if written > 0 {
                    unsafe choice.mode = .lz4Up
                    unsafe choice.payload = UnsafeRawPointer(output)
                    unsafe choice.byteCount = written
                }
                // The packed payload the same way, into residual slot 4 or 6, whichever the choice is not in.
                if let packedMode = unsafe choice.packedMode, unsafe choice.triedPackedLZ4, unsafe choice.byteCount > 1 {
                    let output = unsafe choice.payload == UnsafeRawPointer(residuals) ? alternative : residuals
                    let written =
                        unsafe best
                        ? LZ4Block.compressHC(
                            packed,
                            count: choice.packedByteCount,
                            dictionary: dictionary,
                            dictionaryCount: above.counts[c],
                            into: output,
                            capacity: choice.byteCount - 1,
                            state: searchState
                        )
                        : choice.mode != .lz4 && choice.mode != .lz4Up
                            ? LZ4Block.compress(
                                packed,
                                count: choice.packedByteCount,
                                dictionary: dictionary,
                                dictionaryCount: above.counts[c],
                                into: output,
                                capacity: choice.byteCount - 1,
                                state: searchState
                            ) : 0
                    if written > 0 {
                        unsafe choice.mode = packedMode.upMode
                        unsafe choice.payload = UnsafeRawPointer(output)
                        unsafe choice.byteCount = written
                    }
                }
            }
            // Keep this tile's inner payload (its packed payload, or its samples) for the tile below. Not a zstd
            // tile's (layout version 8, effort fast): the tile below is zstd too or content that fails the screen
            // test, which the Up modes rarely help, and the copy would cost a pass over every screen component.
            above.counts[c] = 0
            if keepsForBelow, unsafe choice.mode != .zstd {
                if unsafe choice.mode.innerMode != nil {
                    unsafe dictionary.copyMemory(from: packed, byteCount: choice.packedByteCount)
                    above.counts[c] = unsafe choice.packedByteCount
                } else {
                    unsafe dictionary.copyMemory(from: samples, byteCount: rawBytes)
                    above.counts[c] = rawBytes
                }
            }
            // Layout version 6: an LZ4 block with its literals Huffman-coded, kept when smaller, tried only where the
            // block is at least `codedLiteralsMinimumRatio` times smaller than the samples (screen content). Into
            // slot 4 or 6, whichever the choice is not in (both free now: the dictionary for the tile below was
            // copied above).
            var codedLiterals = false
            var codedSequences = false
            if grid.layoutVersion >= TileMode.codedLiteralsLayoutVersion, unsafe choice.mode.isLZ4Block,
                unsafe choice.byteCount > 1,
                unsafe choice.byteCount.multipliedReportingOverflow(by: LZ4Block.codedLiteralsMinimumRatio).partialValue
                    <= rawBytes
            {
                let block = unsafe choice.payload
                let blockCount = unsafe choice.byteCount
                let output = unsafe choice.payload == UnsafeRawPointer(residuals) ? alternative : residuals
                let saving = unsafe max(1, choice.byteCount * LZ4Block.codedLiteralsMinimumSaving / 100)
                let written = unsafe LZ4Block.codeLiterals(
                    choice.payload,
                    count: choice.byteCount,
                    into: output,
                    capacity: choice.byteCount - saving
                )
                if written > 0 {
                    unsafe choice.payload = UnsafeRawPointer(output)
                    unsafe choice.byteCount = written
                    codedLiterals = true
                }
                // Layout version 7: the whole block split into streams, each Huffman-coded where that pays (§6.7),
                // kept when smaller than the best so far by `codedSequencesMinimumSaving` percent of the block. Into
                // `output` too (written only when it wins, so a coded-literals block there is replaced only then),
                // the streams gathered first in whichever of slots 4, 6 and 7 holds neither the block nor `output`.
                if grid.layoutVersion >= TileMode.codedSequencesLayoutVersion {
                    let slot7 = unsafe scratch + 7 * stride
                    let streams =
                        unsafe block != UnsafeRawPointer(slot7) && output != slot7
                        ? slot7 : block != UnsafeRawPointer(residuals) && output != residuals ? residuals : alternative
                    let sequenceSaving = max(1, blockCount * LZ4Block.codedSequencesMinimumSaving / 100)
                    let capacity = unsafe choice.byteCount - sequenceSaving
                    let sequenced = unsafe capacity > 0
                        ? LZ4Block.codeSequences(
                            block,
                            count: blockCount,
                            into: output,
                            capacity: capacity,
                            scratch: streams
                        ) : 0
                    if sequenced > 0 {
                        unsafe choice.payload = UnsafeRawPointer(output)
                        unsafe choice.byteCount = sequenced
                        codedLiterals = false
                        codedSequences = true
                    }
                }
            }
            let target = unsafe destination + cursor
            unsafe target.copyMemory(from: choice.payload, byteCount: choice.byteCount)
            // v2 stores all 64 bits; v1 its low 32 (writeEntry).
            let checksum = unsafe Checksum.hash(choice.payload, count: choice.byteCount)
            let entry = unsafe Entry(
                offset: cursor,
                byteCount: choice.byteCount,
                mode: choice.mode,
                checksum: checksum,
                codedLiterals: codedLiterals,
                codedSequences: codedSequences
            )
            unsafe writeEntry(entry, index: tile * grid.componentCount + c, of: grid, into: table)
            cursor += unsafe choice.byteCount
        }
    }

    // MARK: Decoding

    /// Scratch slots a decoding worker needs: 0..<4 components, 4 residuals (16-bit), 5 a private copy of a
    /// payload's control bytes or of an LZ4 payload, 6 and 7 (one area) the packed10/packed16 payload an LZ4
    /// stream gives (at most about 2.1 × the samples' bytes), 8 a private copy of a coded-literals payload
    /// (``decompressLZ4Entry(_:payload:scratch:stride:rawBytes:dictionaryCount:into:capacity:where:)``).
    static let decodeScratchSlots = 9

    /// Decodes the zstd entry `e` (payload at `payload`, in the surface) into exactly `rawBytes` bytes at `output`
    /// (its capacity): the payload is copied into private slot 5 first (libzstd is safe on hostile input, not on
    /// input that changes while it reads; e.byteCount <= raw <= the slot), and libzstd runs in the worker's context
    /// `contexts`. Throws `corruptPayload` unless the copy is one zstd frame that states and
    /// decodes to exactly `rawBytes` bytes, without a dictionary, its window at most 8 MiB (§6.9).
    static func decompressZstdEntry(
        _ e: Entry,
        payload: UnsafeRawPointer,
        scratch: UnsafeMutableRawPointer,
        stride: Int,
        rawBytes: Int,
        into output: UnsafeMutableRawPointer,
        contexts: ZstdContexts,
        where where_: () -> String
    ) throws(CompressionError) {
        let copy = unsafe scratch + 5 * stride
        unsafe copy.copyMemory(from: payload, byteCount: e.byteCount)
        guard
            unsafe ZstdFrame.decompress(
                UnsafeRawPointer(copy),
                count: e.byteCount,
                into: output,
                rawBytes: rawBytes,
                contexts: contexts
            )
        else { throw CompressionError(.corruptPayload, where_() + " (zstd)") }
    }

    /// Decompresses the LZ4 block of LZ4-block entry `e` (payload at `payload`, in the surface) into `output`, at
    /// most `capacity` bytes, with the `dictionaryCount` bytes right before `output` as its dictionary (§6.5; 0 for
    /// none), and returns the decompressed size, or a negative number when LZ4 refuses the block. Every byte it
    /// reads of the payload comes from one private copy: a plain entry's is copied into slot 5 and given to liblz4;
    /// a coded one (§6.6) is copied into slot 8 and decoded from there in one pass over its sequences (its literals
    /// decoded first into slot 5, then copied to their places in `output`); a block the one-pass decoder stops at
    /// (never one an LZ4 encoder makes) is rebuilt from that copy into slot 5. Every block given to liblz4 is first
    /// checked against the LZ4 block rule (COMPRESSED-LAYOUT.md §6.8, ``LZ4Block/check(_:count:capacity:dictionaryCount:)``):
    /// the rule decides, never liblz4, so a block that breaks it gives a negative number whatever liblz4 would
    /// say. `rawBytes`, the component's raw bytes, bounds a coded entry's block. Throws `corruptPayload` when the
    /// coded literals are invalid. `output` and its dictionary are not in slots 5 or 8.
    static func decompressLZ4Entry(
        _ e: Entry,
        payload: UnsafeRawPointer,
        scratch: UnsafeMutableRawPointer,
        stride: Int,
        rawBytes: Int,
        dictionaryCount: Int = 0,
        into output: UnsafeMutableRawPointer,
        capacity: Int,
        where where_: () -> String
    ) throws(CompressionError) -> Int {
        let privateCopy = unsafe scratch + 5 * stride
        var block = unsafe privateCopy
        var blockCount = e.byteCount
        if e.codedSequences {
            // §6.7: the same steps on a sequence-coded block; when liblz4 must judge, the rebuilt block goes over
            // the private copy (slot 8), whose streams are decoded into slot 5 first.
            let coded = unsafe scratch + 8 * stride
            unsafe coded.copyMemory(from: payload, byteCount: e.byteCount)
            let blockCapacity = min(rawBytes, stride)
            let count = unsafe LZ4Block.decompressSequenceCoded(
                UnsafeRawPointer(coded),
                count: e.byteCount,
                blockCapacity: blockCapacity,
                dictionaryCount: dictionaryCount,
                into: output,
                capacity: capacity,
                scratch: privateCopy,
                scratchCapacity: stride
            )
            if count >= 0 { return count }
            guard count == LZ4Block.undecided else {
                throw CompressionError(.corruptPayload, where_() + " (coded sequences)")
            }
            blockCount = unsafe LZ4Block.decodeSequences(
                UnsafeRawPointer(coded),
                count: e.byteCount,
                into: coded,
                capacity: blockCapacity,
                scratch: privateCopy,
                scratchCapacity: stride
            )
            guard blockCount > 0 else { throw CompressionError(.corruptPayload, where_() + " (coded sequences)") }
            unsafe block = coded
        } else if e.codedLiterals {
            let coded = unsafe scratch + 8 * stride
            unsafe coded.copyMemory(from: payload, byteCount: e.byteCount)
            let blockCapacity = min(rawBytes, stride)
            let count = unsafe LZ4Block.decompressCoded(
                UnsafeRawPointer(coded),
                count: e.byteCount,
                blockCapacity: blockCapacity,
                dictionaryCount: dictionaryCount,
                into: output,
                capacity: capacity,
                scratch: privateCopy,
                scratchCapacity: stride
            )
            if count >= 0 { return count }
            guard count == LZ4Block.undecided else {
                throw CompressionError(.corruptPayload, where_() + " (coded literals)")
            }
            blockCount = unsafe LZ4Block.decodeLiterals(
                UnsafeRawPointer(coded),
                count: e.byteCount,
                into: privateCopy,
                capacity: blockCapacity
            )
            guard blockCount > 0 else { throw CompressionError(.corruptPayload, where_() + " (coded literals)") }
        } else {
            unsafe privateCopy.copyMemory(from: payload, byteCount: e.byteCount)
        }
        // §6.8: the rule decides, on the private block, before liblz4 sees it (liblz4 accepts offset 0, for one).
        guard
            unsafe LZ4Block.check(block, count: blockCount, capacity: capacity, dictionaryCount: dictionaryCount)
                >= 0
        else { return -1 }
        guard dictionaryCount > 0 else {
            return unsafe LZ4Block.decompress(block, count: blockCount, into: output, capacity: capacity)
        }
        return unsafe LZ4Block.decompress(
            block,
            count: blockCount,
            dictionary: UnsafeRawPointer(output - dictionaryCount),
            dictionaryCount: dictionaryCount,
            into: output,
            capacity: capacity
        )
    }

    /// Decodes tiles `tiles` (a range of tile indices) into `image`, in parallel when `threads` > 1 and the tiles are
    /// worth splitting (the workspace's ``ParallelPolicy``).
    ///
    /// Every offset, size and mode comes from `header.entries` (private, validated); `p` is read only for
    /// payload bytes, within those bounds, so a surface rewritten meanwhile gives wrong pixels or an error.
    /// `innerAreaPayloads` sizes each worker's inner-payload areas (``innerAreaPayloads``; smaller in tests, so
    /// that chains outgrow them).
    static func decode(
        _ header: Header,
        from p: UnsafeRawPointer,
        tiles: Range<Int>,
        into image: ImagePlanes,
        threads: Int,
        verifyChecksums: Bool = true,
        workspace: CodecWorkspace = CodecWorkspace(),
        innerAreaPayloads: Int = TileCodec.innerAreaPayloads
    ) throws(CompressionError) {
        let grid = header.grid
        precondition(header.entries.count == grid.entryCount, "decode needs a parsed header")
        guard !tiles.isEmpty else {
            workspace.lastDecodeWorkers = 0
            return
        }
        var rawBytes = tiles == 0..<grid.tileCount ? grid.rawImageByteCount : 0
        if rawBytes == 0 { for tile in tiles { rawBytes += grid.rawByteCount(tile: tile) } }
        let workers = workspace.policy.decodeWorkers(threads: threads, tiles: tiles.count, rawBytes: rawBytes)
        workspace.lastDecodeWorkers = workers
        let stride = grid.scratchComponentStride
        // Up entries: each worker keeps two inner-payload areas per component (the tile above's, the tile's own).
        let keepsInner = header.entries.contains { $0.mode.usesTileAbove }
        let areaPayloads = max(1, innerAreaPayloads)
        let innerBytes = keepsInner ? grid.componentCount * innerAreaByteCount(grid, payloads: areaPayloads) : 0
        let scratch = unsafe workspace.scratch(workers: workers, byteCount: stride * decodeScratchSlots + innerBytes)
        CodecWorkspace.reset(&workspace.failures, count: workers, to: nil)
        CodecWorkspace.reset(&workspace.decodeTallies, count: workers, to: DecodeTally())
        unsafe workspace.failures.withUnsafeMutableBufferPointer { failures in
            unsafe workspace.decodeTallies.withUnsafeMutableBufferPointer { tallies in
                unsafe header.entries.withUnsafeBufferPointer { entries in
                    let job = workspace.decodeJob
                    job.grid = grid
                    unsafe job.entries = entries
                    unsafe job.surface = p
                    job.tiles = tiles
                    unsafe job.image = image
                    unsafe job.scratch = scratch
                    job.stride = stride
                    job.workers = workers
                    job.verifyChecksums = verifyChecksums
                    job.keepsInnerPayloads = keepsInner
                    job.innerAreaPayloads = areaPayloads
                    unsafe job.failures = failures
                    unsafe job.tallies = tallies
                    workspace.parallel(workers: workers, job)
                    unsafe job.scratch = nil
                    unsafe job.failures = nil
                    unsafe job.tallies = nil
                }
            }
        }
        for failure in workspace.failures { if let failure { throw failure } }
    }

    /// A decoding worker's inner payloads (surfaces with Up entries): per component, which tile's inner payload
    /// (the packed payload its entry is or decompresses to, or its samples) the component's private area holds,
    /// where it starts in the area and its size. The area of component c (``innerAreaBase(_:component:_:_:payloads:)``)
    /// holds a chain's inner payloads end to end: an Up entry decodes right after the payload of the tile above,
    /// so that LZ4 finds its dictionary right before its output (liblz4's fast prefix path; a dictionary elsewhere
    /// decodes several times slower) without a copy. Only when the area's end is near is the dictionary's tail
    /// (at most ``dictionaryReach`` bytes) moved to the area's start, before its first payload.
    struct InnerPayloads {
        var enabled: Bool
        var tiles: InlineArray<4, Int> = .init(repeating: -1)
        var starts: InlineArray<4, Int> = .init(repeating: 0)
        var counts: InlineArray<4, Int> = .init(repeating: 0)
        /// How many of the largest inner payloads each area holds (``innerAreaPayloads``; tests make it smaller).
        var areaPayloads: Int
        /// The last tile this worker decoded in this call, all of its samples now in the image: when the image is
        /// private (``ImagePlanes/isPrivate``) with contiguous Y rows, that tile's Y is the dictionary of an `lz4Up`
        /// Y entry below, right before the rows it decodes into (see ``decodeTile``).
        var lastTile = -1
        /// What this worker did in this call that tests check (the paths taken).
        var tally = DecodeTally()
        /// The worker's zstd contexts (``ScratchAreas/zstd(_:)``).
        var zstd: ZstdContexts

        init(enabled: Bool, areaPayloads: Int = TileCodec.innerAreaPayloads, zstd: ZstdContexts) {
            self.enabled = enabled
            self.areaPayloads = max(1, areaPayloads)
            self.zstd = zstd
        }
    }

    /// What a decoding worker did, for tests that claim a path ran (``CodecWorkspace/decodeTallies``).
    struct DecodeTally: Hashable, Sendable {
        /// `lz4Up` Y entries decoded straight into a private plane, with the Y of the tile above there as dictionary.
        var planeDictionaryDecodes = 0
        /// Inner payloads of tiles above decoded again from the surface (the worker did not keep them: its first
        /// tile, or a tile whose dictionary it did not keep).
        var reloadedInnerPayloads = 0

        static func + (a: DecodeTally, b: DecodeTally) -> DecodeTally {
            DecodeTally(
                planeDictionaryDecodes: a.planeDictionaryDecodes + b.planeDictionaryDecodes,
                reloadedInnerPayloads: a.reloadedInnerPayloads + b.reloadedInnerPayloads
            )
        }
    }

    /// How far back an LZ4 match reaches: the most of a dictionary that can matter.
    static let dictionaryReach = 65536

    /// How many of the largest inner payloads one component's area holds end to end. Real payloads are mostly
    /// smaller than the largest (8-bit samples fill about half of it), so a whole chain usually fits.
    static let innerAreaPayloads = TileMode.chainRows / 2

    /// The size of the largest inner payload of a tile of `grid` (a packed16 payload, about 2.1 × the samples'
    /// bytes, fits in `bytesPerSample` slots).
    static func innerPayloadByteCount(_ grid: TileGrid) -> Int {
        grid.scratchComponentStride * grid.format.bytesPerSample
    }

    /// Bytes of one component's inner-payload area: the dictionary room, then `payloads` (``innerAreaPayloads``) of
    /// the largest inner payloads.
    static func innerAreaByteCount(_ grid: TileGrid, payloads: Int) -> Int {
        dictionaryReach + payloads * innerPayloadByteCount(grid)
    }

    /// Where the inner-payload area of component `c` starts (its first payload starts ``dictionaryReach`` bytes
    /// later, room for a dictionary moved before it).
    static func innerAreaBase(
        _ grid: TileGrid,
        component c: Int,
        _ scratch: UnsafeMutableRawPointer,
        _ stride: Int,
        payloads: Int
    ) -> UnsafeMutableRawPointer {
        unsafe scratch + decodeScratchSlots * stride + c * innerAreaByteCount(grid, payloads: payloads)
    }

    /// Puts the inner payload of tile `tile`, component `c`, into the component's area and returns where it is and
    /// its size. For an Up entry the inner payload of the tile above is loaded first when the area does not hold
    /// it (the first tile a worker decodes, or a grid of several tiles across): at most ``TileMode/chainRows`` − 1
    /// further entries, a bound parse enforces. The entry is decoded right after it, its last ``dictionaryReach``
    /// bytes (or all, if fewer) serving as the dictionary where they are; when the area has no room left after it
    /// for the entry's largest output, that tail is first moved to the area's start.
    ///
    /// Everything is private: each payload is copied before LZ4 reads it, and the result stays in the worker's
    /// scratch. A dictionary entry that is itself bad (its checksum, when checked, or its LZ4) fails this entry.
    static func loadInnerPayload(
        _ grid: TileGrid,
        tile: Int,
        component c: Int,
        entries: UnsafeBufferPointer<Entry>,
        from p: UnsafeRawPointer,
        scratch: UnsafeMutableRawPointer,
        stride: Int,
        verifyChecksums: Bool,
        checksPayload: Bool,
        inner: inout InnerPayloads
    ) throws(CompressionError) -> (pointer: UnsafeRawPointer, count: Int) {
        let components = grid.componentCount
        let e = unsafe entries[tile * components + c]
        func where_() -> String { "SurfaceCodec.decode: tile \(tile) component \(c)" }
        // A tile of the chain above that this worker did not decode: its checksum is checked here, as its own
        // decode would (the entry being decoded was checked by decodeTile).
        if checksPayload && verifyChecksums {
            let mask: UInt64 = grid.layoutVersion == 1 ? 0xFFFF_FFFF : ~0
            guard (unsafe Checksum.hash(p + e.offset, count: e.byteCount) ^ e.checksum) & mask == 0 else {
                throw CompressionError(.checksumMismatch, where_() + " (a dictionary)")
            }
        }
        let extent = grid.componentExtent(tile: tile, component: c)
        let rawBytes = extent.width * extent.height * grid.format.bytesPerSample
        let packedCapacity =
            grid.format.bytesPerSample == 1
            ? ComponentCodec.maximumPacked8ByteCount(width: extent.width, height: extent.height)
            : ComponentCodec.maximumPacked16ByteCount(width: extent.width, height: extent.height)
        let samples = e.mode.innerMode == nil  // raw, solid, lz4, lz4Up: the inner payload is the samples
        // The most this entry's inner payload can be (raw and packed payloads are at most the raw size, which
        // parse checked); the area's payload room holds at least one of these.
        let capacity = samples ? rawBytes : max(packedCapacity, rawBytes)
        let base = unsafe innerAreaBase(grid, component: c, scratch, stride, payloads: inner.areaPayloads)
        let areaEnd = innerAreaByteCount(grid, payloads: inner.areaPayloads)
        var start = dictionaryReach
        var dictionaryCount = 0
        if e.mode.usesTileAbove {
            let aboveTile = tile - grid.tilesAcross  // >= 0: parse refuses Up entries in the first row of a chain
            if inner.tiles[c] != aboveTile {
                inner.tally.reloadedInnerPayloads += 1
                _ = try unsafe loadInnerPayload(
                    grid,
                    tile: aboveTile,
                    component: c,
                    entries: entries,
                    from: p,
                    scratch: scratch,
                    stride: stride,
                    verifyChecksums: verifyChecksums,
                    checksPayload: true,
                    inner: &inner
                )
            }
            dictionaryCount = min(inner.counts[c], dictionaryReach)
            start = inner.starts[c] + inner.counts[c]
            if start > areaEnd - capacity {
                // No room after the dictionary: its tail moves to the area's start, right before the first
                // payload's place (moveMemory: the two may overlap when the area's payloads are few).
                unsafe (base + (dictionaryReach - dictionaryCount)).moveInitializeMemory(
                    as: UInt8.self,
                    from: (base + (start - dictionaryCount)).assumingMemoryBound(to: UInt8.self),
                    count: dictionaryCount
                )
                start = dictionaryReach
            }
        }
        let output = unsafe base + start
        inner.tiles[c] = -1
        let payload = unsafe p + e.offset
        var count: Int
        switch e.mode {
        case .raw, .packed8, .packed10, .packed16:
            // The payload itself (at most the raw size, which the area holds), copied.
            unsafe output.copyMemory(from: payload, byteCount: e.byteCount)
            count = e.byteCount
        case .solid:
            if grid.format.bytesPerSample == 1 {
                unsafe output.initializeMemory(as: UInt8.self, repeating: payload.load(as: UInt8.self), count: rawBytes)
            } else {
                let v = unsafe payload.loadUnaligned(as: UInt16.self)
                unsafe output.initializeMemory(as: UInt16.self, repeating: v, count: rawBytes / 2)
            }
            count = rawBytes
        case .lz4, .packed8LZ4, .packed10LZ4, .packed16LZ4, .lz4Up, .packed8LZ4Up, .packed10LZ4Up, .packed16LZ4Up:
            // LZ4 reads a private copy (its bounds checks read lengths from the input); an Up entry's dictionary
            // is right before the output (0 bytes for the others).
            count = try unsafe decompressLZ4Entry(
                e,
                payload: payload,
                scratch: scratch,
                stride: stride,
                rawBytes: rawBytes,
                dictionaryCount: dictionaryCount,
                into: output,
                capacity: samples ? rawBytes : packedCapacity,
                where: where_
            )
            if samples && count != rawBytes { count = -1 }
        case .zstd:
            try unsafe decompressZstdEntry(
                e,
                payload: payload,
                scratch: scratch,
                stride: stride,
                rawBytes: rawBytes,
                into: output,
                contexts: inner.zstd,
                where: where_
            )
            count = rawBytes
        }
        guard count > 0 else { throw CompressionError(.corruptPayload, where_() + " (lz4)") }
        inner.tiles[c] = tile
        inner.starts[c] = start
        inner.counts[c] = count
        return (UnsafeRawPointer(output), count)
    }

    /// Whether tile `tile`'s component `c` goes through an inner-payload area: its entry uses the tile above, or the
    /// entry below uses it.
    static func needsInnerPayload(
        _ grid: TileGrid,
        tile: Int,
        component c: Int,
        entries: UnsafeBufferPointer<Entry>
    ) -> Bool {
        let components = grid.componentCount
        if unsafe entries[tile * components + c].mode.usesTileAbove { return true }
        let below = tile + grid.tilesAcross
        return unsafe below < grid.tileCount && entries[below * components + c].mode.usesTileAbove
    }

    static func decodeTile(
        _ grid: TileGrid,
        tile: Int,
        entries: UnsafeBufferPointer<Entry>,
        from p: UnsafeRawPointer,
        scratch: UnsafeMutableRawPointer,
        stride: Int,
        into image: ImagePlanes,
        checksums: inout PayloadChecksums,
        inner: inout InnerPayloads
    ) throws(CompressionError) {
        let verifyChecksums = checksums.verifies
        var pointers = unsafe ComponentPointers(c0: scratch, c1: scratch, c2: scratch, c3: scratch)
        let bytesPerSample = grid.format.bytesPerSample
        // The Y of an 8-bit 4:2:0 band (a tile as wide as the image) is decoded straight into the plane (its rows
        // from `planeRows`), no copy after: packed by a vector kernel (any tier but the portable one), which writes
        // exactly the tile's samples, and LZ4 where the plane's rows are contiguous.
        let rect = grid.tileRect(tile)
        let isBandOf8BitY = grid.format.kind == .yuv8 && rect.x == 0 && rect.width == grid.width
        let yIntoPlane = isBandOf8BitY && Kernels.decodesStrided
        // Likewise the packed10 Y of a 10-bit 4:2:0 band whose width is a multiple of 8 (whole blocks end where the
        // rows do), by the AVX2 kernel.
        let y10IntoPlane =
            unsafe grid.format.kind == .yuv16 && rect.x == 0 && rect.width == grid.width && rect.width & 7 == 0
            && image.bytesPerRow0 & 1 == 0 && Int(bitPattern: image.plane0) & 1 == 0 && Kernels.decodesStrided10
        let planeRows = unsafe image.plane0 + (rect.y - image.originY) * image.bytesPerRow0
        var yWrittenInPlace = false
        // The Y rows of a 4:2:0 band follow one another in the plane with no padding: the band's Y there is exactly
        // its raw bytes, and the band above's ends right before it.
        let isBandOfY = grid.format.kind != .bgra && rect.x == 0 && rect.width == grid.width
        let yRowsContiguous = unsafe isBandOfY && image.bytesPerRow0 == rect.width * bytesPerSample
        let privateCopy = unsafe scratch + 5 * stride
        // Version 1 stored the low 32 bits of each payload checksum, version 2 all 64.
        let checksumMask: UInt64 = grid.layoutVersion == 1 ? 0xFFFF_FFFF : ~0
        for c in 0..<grid.componentCount {
            let e = unsafe entries[tile * grid.componentCount + c]
            let payload = unsafe p + e.offset
            let slot = unsafe scratch + c * stride
            let extent = grid.componentExtent(tile: tile, component: c)
            let n = extent.width * extent.height
            func where_() -> String { "SurfaceCodec.decode: tile \(tile) component \(c)" }
            if verifyChecksums {
                // Computed ahead with the next entries' (PayloadChecksums), checked here as if just computed.
                let computed = unsafe checksums.checksum(
                    ofEntry: tile * grid.componentCount + c,
                    entries: entries,
                    surface: p
                )
                guard (computed ^ e.checksum) & checksumMask == 0 else {
                    throw CompressionError(.checksumMismatch, where_())
                }
            }
            var source = UnsafeRawPointer(slot)
            // Surfaces with Up entries, the Y of a band, rows contiguous in a plane only this process can write: an
            // lz4 entry, and an lz4Up entry whose tile above this worker has just decoded into the plane (its Y, the
            // dictionary, is then right before this band's rows), decode straight into the plane. liblz4 and the
            // coded decoder take their prefix path there; no private area, no copy. The plane is memory this decoder
            // wrote and nobody else can write (§9 rule 4); shared or padded planes take the private area below.
            if c == 0, unsafe inner.enabled && yRowsContiguous && image.isPrivate, e.mode == .lz4 || e.mode == .lz4Up {
                let above = tile - grid.tilesAcross
                let usesPlane =
                    unsafe e.mode == .lz4
                    || above == inner.lastTile && entries[above * grid.componentCount].mode.innerMode == nil
                if usesPlane {
                    let raw = n * bytesPerSample
                    let dictionaryCount =
                        e.mode == .lz4Up ? min(grid.rawByteCount(tile: above, component: 0), dictionaryReach) : 0
                    guard
                        try unsafe decompressLZ4Entry(
                            e,
                            payload: payload,
                            scratch: scratch,
                            stride: stride,
                            rawBytes: raw,
                            dictionaryCount: dictionaryCount,
                            into: planeRows,
                            capacity: raw,
                            where: where_
                        ) == raw
                    else {
                        throw CompressionError(.corruptPayload, where_() + " (lz4)")
                    }
                    yWrittenInPlace = true
                    if e.mode == .lz4Up { inner.tally.planeDictionaryDecodes += 1 }
                    // The area no longer holds the inner payload of the tile above this one's. A packed Up entry
                    // below takes this band's Y as its dictionary from the area: its last 64 KiB go there (read back
                    // from the private plane); an lz4Up entry below finds it in the plane.
                    inner.tiles[0] = -1
                    let below = tile + grid.tilesAcross
                    if below < grid.tileCount {
                        let belowMode = unsafe entries[below * grid.componentCount].mode
                        if belowMode.usesTileAbove && belowMode.innerMode != nil {
                            let count = min(raw, dictionaryReach)
                            let base = unsafe innerAreaBase(
                                grid,
                                component: 0,
                                scratch,
                                stride,
                                payloads: inner.areaPayloads
                            )
                            unsafe (base + (dictionaryReach - count)).copyMemory(
                                from: planeRows + (raw - count),
                                byteCount: count
                            )
                            inner.tiles[0] = tile
                            inner.starts[0] = dictionaryReach - count
                            inner.counts[0] = count
                        }
                    }
                    continue
                }
            }
            // Surfaces with Up entries: an entry that uses the tile above, or that the entry below uses, goes
            // through a private inner-payload area kept for the tile below.
            var innerPayload: (pointer: UnsafeRawPointer, count: Int)? = nil
            if unsafe inner.enabled && needsInnerPayload(grid, tile: tile, component: c, entries: entries) {
                unsafe innerPayload = try unsafe loadInnerPayload(
                    grid,
                    tile: tile,
                    component: c,
                    entries: entries,
                    from: p,
                    scratch: scratch,
                    stride: stride,
                    verifyChecksums: verifyChecksums,
                    checksPayload: false,
                    inner: &inner
                )
            }
            if let innerPayload = unsafe innerPayload, e.mode.innerMode == nil {
                // raw, solid, lz4, lz4Up: the area holds the samples.
                unsafe source = innerPayload.pointer
            } else {
            switch e.mode {
            case .raw:
                // Read where it is: the size is private and equals the component's (parse checked it).
                unsafe source = payload
            case .solid:
                if bytesPerSample == 1 {
                    unsafe slot.initializeMemory(as: UInt8.self, repeating: payload.load(as: UInt8.self), count: n)
                } else {
                    let v = unsafe payload.loadUnaligned(as: UInt16.self)
                    unsafe slot.initializeMemory(as: UInt16.self, repeating: v, count: n)
                }
            case .lz4:
                // liblz4 reads lengths and offsets from its input more than once in places; give it a private
                // copy, so a rewrite under it cannot move its bounds (e.byteCount <= raw <= the slot).
                let raw = n * bytesPerSample
                // The Y of a 4:2:0 band whose plane rows are contiguous (no padding) is decompressed straight into
                // the plane: the band's rows are then exactly `raw` bytes there.
                let inPlane = c == 0 && yRowsContiguous
                let target = unsafe inPlane ? planeRows : slot
                guard
                    try unsafe decompressLZ4Entry(
                        e,
                        payload: payload,
                        scratch: scratch,
                        stride: stride,
                        rawBytes: raw,
                        into: target,
                        capacity: raw,
                        where: where_
                    ) == raw
                else {
                    throw CompressionError(.corruptPayload, where_() + " (lz4)")
                }
                if inPlane { yWrittenInPlace = true }
            case .packed8, .packed8LZ4, .packed8LZ4Up:
                var packed = unsafe payload
                var packedCount = e.byteCount
                if let innerPayload = unsafe innerPayload {
                    unsafe packed = innerPayload.pointer
                    packedCount = unsafe innerPayload.count
                } else if e.mode == .packed8LZ4 {
                    // As for lz4: LZ4 reads a private copy. The packed payload it gives is private too (slot 4, free
                    // for 8-bit samples), at most the component's worst packed size, which the slot holds.
                    let packedSlot = unsafe scratch + 4 * stride
                    packedCount = try unsafe decompressLZ4Entry(
                        e,
                        payload: payload,
                        scratch: scratch,
                        stride: stride,
                        rawBytes: n * bytesPerSample,
                        into: packedSlot,
                        capacity: ComponentCodec.maximumPacked8ByteCount(width: extent.width, height: extent.height),
                        where: where_
                    )
                    guard packedCount > 0 else { throw CompressionError(.corruptPayload, where_() + " (lz4)") }
                    unsafe packed = UnsafeRawPointer(packedSlot)
                }
                let inPlane = yIntoPlane && c == 0
                let target = unsafe inPlane ? planeRows : slot
                guard
                    unsafe ComponentCodec.decodePacked8(
                        packed,
                        count: packedCount,
                        width: extent.width,
                        height: extent.height,
                        controls: privateCopy.assumingMemoryBound(to: UInt8.self),
                        controlsCapacity: stride,
                        into: target.assumingMemoryBound(to: UInt8.self),
                        // The plane: exactly the tile's rows there (the grid lies inside it); a slot: its bytes.
                        capacity: inPlane ? (extent.height - 1) * image.bytesPerRow0 + extent.width : stride,
                        rowStride: inPlane ? image.bytesPerRow0 : nil
                    )
                else { throw CompressionError(.corruptPayload, where_()) }
                if inPlane { yWrittenInPlace = true }
            case .zstd:
                // As for lz4: libzstd reads a private copy; the Y of a band with contiguous plane rows goes straight
                // into the plane.
                let inPlane = c == 0 && yRowsContiguous
                let target = unsafe inPlane ? planeRows : slot
                try unsafe decompressZstdEntry(
                    e,
                    payload: payload,
                    scratch: scratch,
                    stride: stride,
                    rawBytes: n * bytesPerSample,
                    into: target,
                    contexts: inner.zstd,
                    where: where_
                )
                if inPlane { yWrittenInPlace = true }
            case .lz4Up:
                throw CompressionError(.corruptPayload, where_())  // has an inner payload: handled above
            case .packed10, .packed16, .packed10LZ4, .packed16LZ4, .packed10LZ4Up, .packed16LZ4Up:
                var packed = unsafe payload
                var packedCount = e.byteCount
                if let innerPayload = unsafe innerPayload {
                    unsafe packed = innerPayload.pointer
                    packedCount = unsafe innerPayload.count
                } else if e.mode == .packed10LZ4 || e.mode == .packed16LZ4 {
                    // As for packed8LZ4: LZ4 reads a private copy, and writes the packed payload into private
                    // slots 6 and 7, at most the component's worst packed size (<= 2 slots, TileGrid).
                    let packedSlots = unsafe scratch + 6 * stride
                    packedCount = try unsafe decompressLZ4Entry(
                        e,
                        payload: payload,
                        scratch: scratch,
                        stride: stride,
                        rawBytes: n * bytesPerSample,
                        into: packedSlots,
                        capacity: ComponentCodec.maximumPacked16ByteCount(
                            width: extent.width,
                            height: extent.height
                        ),
                        where: where_
                    )
                    guard packedCount > 0 else { throw CompressionError(.corruptPayload, where_() + " (lz4)") }
                    unsafe packed = UnsafeRawPointer(packedSlots)
                }
                let tenBit = e.mode.innerMode == .packed10
                let inPlane = y10IntoPlane && c == 0 && tenBit
                let target = unsafe inPlane ? planeRows : slot
                guard
                    unsafe ComponentCodec.decodePacked16(
                        packed,
                        count: packedCount,
                        tenBit: tenBit,
                        width: extent.width,
                        height: extent.height,
                        controls: privateCopy.assumingMemoryBound(to: UInt8.self),
                        controlsCapacity: stride,
                        residuals: (scratch + 4 * stride).assumingMemoryBound(to: UInt16.self),
                        into: target.assumingMemoryBound(to: UInt16.self),
                        // The plane: exactly the tile's rows there (the grid lies inside it); a slot: its samples.
                        capacity: unsafe inPlane
                            ? (extent.height - 1) * (image.bytesPerRow0 / 2) + extent.width : stride / 2,
                        rowStride: unsafe inPlane ? image.bytesPerRow0 / 2 : nil
                    )
                else { throw CompressionError(.corruptPayload, where_()) }
                if inPlane { yWrittenInPlace = true }
            }
            }
            switch c {
            case 0: unsafe pointers.c0 = source
            case 1: unsafe pointers.c1 = source
            case 2: unsafe pointers.c2 = source
            default: unsafe pointers.c3 = source
            }
        }
        unsafe TileSamples.scatter(
            grid,
            tile: tile,
            components: pointers,
            into: image,
            skipsComponent0: yWrittenInPlace
        )
        inner.lastTile = tile
    }
}
