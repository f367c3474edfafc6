#if canImport(Glibc)
import Glibc
#endif

/// Taller bands for screen content (no layout change: any tile size is valid, docs/COMPRESSED-LAYOUT.md §4).
///
/// Each `zstd` entry (§6.9) is an independent frame, so zstd's window never reaches past its band: on real
/// screenshots, 64-row bands cost 27 % of the ratio zstd -1 gets on whole planes (terminals and documents repeat far
/// beyond 64 rows). When the caller left the tile size at its default and the frame looks like screen content, the
/// encoder writes bands of ``rows`` rows instead; photographs keep the 64-row bands their modes were tuned on.
enum ScreenBands {
    /// The band height for screen frames: 256 rows by default, or `FRAMEBUS_CODEC_SCREEN_BAND_ROWS` (rounded down
    /// to even; 0 or anything below 64 keeps 64-row bands on every frame: the bench's before and after in one
    /// binary), read once per process.
    static let rows: Int = {
        if let value = unsafe getenv("FRAMEBUS_CODEC_SCREEN_BAND_ROWS"), let rows = Int(unsafe String(cString: value)) {
            return max(0, min(rows, 16384)) & ~1
        }
        return 256
    }()

    /// The grid to encode `image` with: `grid` itself unless it may choose screen bands
    /// (``TileGrid/choosesScreenBands``), stores screen content as zstd frames, is a band grid of shorter bands than
    /// ``rows`` with more than one band, and plane 0 looks like screen content (``looksLikeScreen(_:grid:)``); else the
    /// same grid with bands of ``rows`` rows (fewer where a band would pass ``TileGrid/maximumTileArea``).
    static func grid(_ grid: TileGrid, for image: ImagePlanes) -> TileGrid {
        guard grid.choosesScreenBands, grid.encodesZstd, grid.tilesAcross == 1, grid.tilesDown > 1,
            rows >= 64, rows > grid.tileHeight
        else { return grid }
        let fitting = min(rows, (TileGrid.maximumTileArea / grid.tileWidth) & ~1)
        guard fitting > grid.tileHeight, unsafe looksLikeScreen(image, grid: grid),
            var taller = TileGrid(
                format: grid.format,
                width: grid.width,
                height: grid.height,
                tileWidth: grid.tileWidth,
                tileHeight: fitting,
                layoutVersion: grid.layoutVersion
            )
        else { return grid }
        taller.searchesHarder = grid.searchesHarder
        taller.usesScreenBands = true
        return taller
    }

    /// Whether plane 0 (Y, or BGRA's pixels) looks like screen content: at least half of the 8-byte words of every
    /// 16th row equal the word above them or the word before them in the row, the test a component passes to be
    /// stored as zstd (``ComponentCodec/looksLikeScreen(_:rowBytes:rows:allowsLeft:)``) on a sixteenth of the
    /// rows: about 0.1 ms for a 4K frame.
    static func looksLikeScreen(_ image: ImagePlanes, grid: TileGrid) -> Bool {
        let pixelBytes = grid.format.kind == .bgra ? 4 : grid.format.bytesPerSample
        let words = (grid.width &* pixelBytes) &>> 3
        guard grid.height > 1, words > 0 else { return false }
        var equal = 0
        var sampled = 0
        for y in stride(from: 1, to: grid.height, by: 16) {
            sampled &+= words
            let row = unsafe UnsafeRawPointer(image.plane0) + (y &- image.originY) &* image.bytesPerRow0
            let above = unsafe row - image.bytesPerRow0
            var left = unsafe row.loadUnaligned(as: UInt64.self) ^ 1  // the first word has no word to its left
            for i in 0..<words {
                let a = unsafe above.loadUnaligned(fromByteOffset: i &<< 3, as: UInt64.self)
                let b = unsafe row.loadUnaligned(fromByteOffset: i &<< 3, as: UInt64.self)
                equal &+= a == b || left == b ? 1 : 0
                left = b
            }
        }
        return equal &* 2 >= sampled
    }
}
