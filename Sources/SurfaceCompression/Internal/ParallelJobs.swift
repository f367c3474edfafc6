/// The parallel part of an encode: workers take chunks of consecutive tiles (worker w: chunks w, w + workers, …)
/// and encode each into the staging area at its chunk's offset. Kept by the workspace and filled per call.
///
/// @unchecked Sendable: filled by the caller before the workers start, read by them, and not touched again by
/// the caller until they have finished; each worker writes only its own chunks and scratch.
@safe final class EncodeChunksJob: ParallelWork, @unchecked Sendable {
    var grid: TileGrid? = nil
    var image: ImagePlanes? = nil
    var table: UnsafeMutableRawPointer? = nil
    var staging: UnsafeMutableRawPointer? = nil
    var scratch: ScratchAreas? = nil
    var stride = 0
    var chunkCount = 0
    var workers = 1
    var starts: UnsafeBufferPointer<Int>? = nil
    var firsts: UnsafeBufferPointer<Int>? = nil
    var used: UnsafeMutableBufferPointer<Int>? = nil

    func work(worker: Int) {
        guard let grid, let image = unsafe image, let table = unsafe table, let staging = unsafe staging,
            let scratch = unsafe scratch, let starts = unsafe starts, let firsts = unsafe firsts,
            let used = unsafe used
        else { return }
        var chunk = worker
        while chunk < chunkCount {
            var cursor = unsafe starts[chunk]
            var above = unsafe TileCodec.AboveDictionaries(zstd: scratch.zstd(worker))
            for t in unsafe firsts[chunk]..<firsts[chunk + 1] {
                unsafe TileCodec.encodeTile(
                    grid,
                    tile: t,
                    from: image,
                    scratch: scratch[worker],
                    stride: stride,
                    table: table,
                    into: staging,
                    cursor: &cursor,
                    above: &above
                )
            }
            unsafe used[chunk] = cursor - starts[chunk]
            chunk += workers
        }
    }
}

/// The parallel part of a decode: worker w decodes a contiguous run of the tiles (neighbouring rows stay on one
/// core) and records the first error it meets. Kept by the workspace and filled per call.
///
/// @unchecked Sendable: as ``EncodeChunksJob``; each worker writes only its tiles, its scratch and its failure.
@safe final class DecodeTilesJob: ParallelWork, @unchecked Sendable {
    var grid: TileGrid? = nil
    var entries: UnsafeBufferPointer<TileCodec.Entry>? = nil
    var surface: UnsafeRawPointer? = nil
    var tiles: Range<Int> = 0..<0
    var image: ImagePlanes? = nil
    var scratch: ScratchAreas? = nil
    var stride = 0
    var workers = 1
    var verifyChecksums = true
    /// Whether the table has Up entries: decoded inner payloads are then kept for the tile below.
    var keepsInnerPayloads = false
    /// How many of the largest inner payloads each inner-payload area holds (``TileCodec/innerAreaPayloads``).
    var innerAreaPayloads = TileCodec.innerAreaPayloads
    var failures: UnsafeMutableBufferPointer<CompressionError?>? = nil
    /// Per worker: its ``TileCodec/InnerPayloads/tally``.
    var tallies: UnsafeMutableBufferPointer<TileCodec.DecodeTally>? = nil

    func work(worker: Int) {
        guard let grid, let entries = unsafe entries, let surface = unsafe surface, let image = unsafe image,
            let scratch = unsafe scratch, let failures = unsafe failures,
            let tallies = unsafe tallies
        else { return }
        let first = tiles.lowerBound + tiles.count * worker / workers
        let end = tiles.lowerBound + tiles.count * (worker + 1) / workers
        var inner = unsafe TileCodec.InnerPayloads(
            enabled: keepsInnerPayloads,
            areaPayloads: innerAreaPayloads,
            zstd: scratch.zstd(worker)
        )
        defer { unsafe tallies[worker] = inner.tally }
        // The payload checksums of this worker's next entries are computed a batch at a time, several at once.
        PayloadChecksums.withChecksums(verifies: verifyChecksums, limit: end * grid.componentCount) { checksums in
            for tile in first..<end {
                do throws(CompressionError) {
                    try unsafe TileCodec.decodeTile(
                        grid,
                        tile: tile,
                        entries: entries,
                        from: surface,
                        scratch: scratch[worker],
                        stride: stride,
                        into: image,
                        checksums: &checksums,
                        inner: &inner
                    )
                } catch {
                    unsafe failures[worker] = error
                    return
                }
            }
        }
    }
}
