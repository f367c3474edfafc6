// The shared-memory race harness (built by Fuzz/race.sh with AddressSanitizer, not by SwiftPM).
//
// A compressed surface lives in memory that its publisher may still write. This program encodes surfaces of
// every format and tile mode, then, for each, lets a writer thread rewrite bytes of the surface (table entries
// between valid and hostile values, modes, width nibbles, payload bytes, each restored after a moment) while
// the main thread parses and decodes it over and over, with checksums on and off. A thrown CompressionError is
// the expected outcome; any crash or out-of-bounds access (AddressSanitizer aborts) is a bug.
//
//   race-decoder SECONDS
import Foundation
import Synchronization

final class RaceFlags: Sendable {
    let stop = Atomic<Bool>(false)
    let writes = Atomic<Int>(0)
}

struct SharedBytes: @unchecked Sendable {
    // @unchecked: racing the decoder on these bytes is the point of the harness; only raw loads and stores.
    let base: UnsafeMutableRawPointer
    let count: Int
}

struct Generator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// An image whose tiles take every mode: a flat quarter (solid), a repeating band (LZ4), a gradient with a
/// little noise (packed), noise (raw); or, for `screen`, a page of repeated "glyphs" (packed8LZ4; for 16-bit
/// samples, words with zero padding bits: packed10LZ4).
func makeImage(_ grid: TileGrid, seed: UInt64, screen: Bool) -> UnsafeMutableRawPointer {
    let count = grid.rawImageByteCount
    let image = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 64)
    var random = Generator(state: seed)
    let bytesPerSample = grid.format.bytesPerSample
    for i in stride(from: 0, to: count, by: bytesPerSample) where screen {
        let j = i / bytesPerSample
        let x = j % grid.width
        let y = j / grid.width % grid.height
        let glyph = (x / 6 * 7 + y / 10 * 3) % 5
        // Layout version 8 grids: every other text line blank, so the rows pass the encoder's screen test (most
        // 8-byte words equal the word above or before them) and take the zstd mode.
        let blankLine = grid.layoutVersion >= TileMode.zstdLayoutVersion && y / 10 % 2 == 1
        let ink = !blankLine && x % 6 < 5 && y % 10 < 7 && (glyph * 37 + x % 6 * 5 + y % 10 * 11) % 4 == 0
        if bytesPerSample == 2 {
            image.storeBytes(of: UInt16(ink ? 0x2A40 : 0xE6C0).littleEndian, toByteOffset: i, as: UInt16.self)
        } else {
            image.storeBytes(of: ink ? 40 : 230, toByteOffset: i, as: UInt8.self)
        }
    }
    for i in 0..<count where !screen {
        let position = i * 4 / count
        let value: UInt64
        switch position {
        case 0: value = 7
        case 1: value = UInt64(i / 3 % 5)
        case 2: value = UInt64(i % 251 / 2) &+ random.next() % 4
        default: value = random.next()
        }
        image.storeBytes(of: UInt8(truncatingIfNeeded: value), toByteOffset: i, as: UInt8.self)
    }
    return image
}

/// The planes of `image`; `isPrivate`: only this decoder writes them (an lz4Up Y band may then take the band above
/// it in the plane as its dictionary).
func planes(_ grid: TileGrid, _ image: UnsafeMutableRawPointer, isPrivate: Bool = false) -> ImagePlanes {
    let rowBytes = grid.format.kind == .bgra ? grid.width * 4 : grid.width * grid.format.bytesPerSample
    return ImagePlanes(
        plane0: image,
        bytesPerRow0: rowBytes,
        plane1: grid.format.kind == .bgra ? image : image + rowBytes * grid.height,
        bytesPerRow1: rowBytes,
        isPrivate: isPrivate
    )
}

func race(
    _ grid: TileGrid,
    fourCC: UInt32,
    screen: Bool,
    seconds: Double,
    seed: UInt64
) -> (decodes: Int, errors: Int, writes: Int, packed8LZ4: Int, up: Int, coded: Int, inPlane: Int, zstd: Int) {
    let source = makeImage(grid, seed: seed, screen: screen)
    defer { source.deallocate() }
    let scratch = UnsafeMutableRawPointer.allocate(byteCount: grid.maximumByteCount, alignment: 64)
    defer { scratch.deallocate() }
    // Both encoder efforts, by seed (every other grid): the fast search's blocks and the HC search's. The HC search
    // makes the 8-bit Y lz4Up bands of the in-plane path (the fast encoder tries lz4Up only where lz4 won).
    // Layout version 8 grids always at effort fast: their screen content takes the zstd mode.
    var encoder = grid
    encoder.searchesHarder = grid.layoutVersion < TileMode.zstdLayoutVersion && seed % 2 == 0
    let used = TileCodec.encode(encoder, baseFourCC: fourCC, from: planes(grid, source), into: scratch, threads: 1)
    // Exactly the bytes used, so AddressSanitizer sees any read past the end of the surface.
    let surface = SharedBytes(base: .allocate(byteCount: used, alignment: 64), count: used)
    defer { surface.base.deallocate() }
    surface.base.copyMemory(from: scratch, byteCount: used)
    let throughLZ4: Set<UInt8> = [
        TileMode.packed8LZ4, .packed10LZ4, .packed16LZ4, .packed8LZ4Up, .packed10LZ4Up, .packed16LZ4Up,
    ].map(\.rawValue).reduce(into: []) { $0.insert($1) }
    // Mode bytes without the coded-literals flag (layout version 6 adds 16 to an LZ4-block mode) or the
    // coded-sequences flag (version 7 adds 32).
    let baseModes = (0..<grid.entryCount).map {
        let mode = scratch.load(fromByteOffset: 64 + grid.entryByteCount * $0 + 4, as: UInt8.self)
        if mode >= TileMode.codedSequencesFlag { return mode - TileMode.codedSequencesFlag }
        return mode >= TileMode.codedLiteralsFlag ? mode - TileMode.codedLiteralsFlag : mode
    }
    // Up entries (layout version 5): their LZ4 reaches into the tile above's inner payload.
    let up = baseModes.filter { TileMode(rawValue: $0)?.usesTileAbove == true }.count
    let packed8LZ4 = baseModes.filter { throughLZ4.contains($0) }.count
    // zstd entries (layout version 8): libzstd decodes a private copy of each frame.
    let zstd = baseModes.filter { $0 == TileMode.zstd.rawValue }.count
    // Entries whose LZ4 block has Huffman-coded literals (layout version 6) or coded sequences (version 7).
    let coded = (0..<grid.entryCount).filter {
        scratch.load(fromByteOffset: 64 + grid.entryByteCount * $0 + 4, as: UInt8.self) >= TileMode.codedLiteralsFlag
    }.count
    let output = UnsafeMutableRawPointer.allocate(byteCount: grid.rawImageByteCount, alignment: 64)
    defer { output.deallocate() }
    let flags = RaceFlags()
    let entries = grid.entryCount
    let entryBytes = grid.entryByteCount
    let tableEnd = grid.payloadStart
    let writer = Thread { [surface, flags] in
        var random = Generator(state: seed ^ 0x5555)
        while !flags.stop.load(ordering: .relaxed) {
            let offset: Int
            let hostile: UInt32
            switch random.next() % 5 {
            case 0:
                offset = 64 + entryBytes * Int(random.next() % UInt64(entries)) + 4 * Int(random.next() % 2)
                hostile = [1, 0, 0xFFFF_FFF0, 0x7FFF_FFFF][Int(random.next() % 4)]
            case 1:  // the mode (v2: at byte 4 of the entry)
                offset = 64 + entryBytes * Int(random.next() % UInt64(entries)) + 4
                // 16...29: coded-literals modes, 32...45: coded-sequences modes
                hostile = UInt32(truncatingIfNeeded: random.next() % 46)
            case 2:
                offset = Int(random.next() % UInt64(64)) & ~3
                hostile = UInt32(truncatingIfNeeded: random.next())
            default:
                guard used > tableEnd + 4 else { continue }
                offset = tableEnd + Int(random.next() % UInt64(used - tableEnd - 4))
                hostile = UInt32(truncatingIfNeeded: random.next()) | 0xF0F0_F0F0
            }
            guard offset + 4 <= surface.count else { continue }
            let original = surface.base.loadUnaligned(fromByteOffset: offset, as: UInt32.self)
            surface.base.storeBytes(of: hostile, toByteOffset: offset, as: UInt32.self)
            for _ in 0..<Int(random.next() % 3000) { _ = flags.stop.load(ordering: .relaxed) }
            surface.base.storeBytes(of: original, toByteOffset: offset, as: UInt32.self)
            flags.writes.add(1, ordering: .relaxed)
            // As long intact, so decodes also get past validation and race the payload decoders.
            for _ in 0..<Int(random.next() % 3000) { _ = flags.stop.load(ordering: .relaxed) }
        }
    }
    writer.start()
    let deadline = Date().addingTimeInterval(seconds)
    var decodes = 0
    var errors = 0
    var storage = TileCodec.ParseStorage()
    // lz4Up Y bands decoded in the private plane with the band above there as dictionary (counted, so a run that
    // never takes that path under rewrites shows it).
    let workspace = CodecWorkspace()
    var inPlane = 0
    while Date() < deadline {
        for verify in [false, true] {
            // The output is this thread's alone: alternately taken as private (the in-plane dictionary path).
            let isPrivate = decodes & 2 == 0
            decodes += 1
            do {
                let header = try TileCodec.parse(
                    UnsafeRawPointer(surface.base),
                    count: used,
                    verifyChecksums: verify,
                    storage: &storage
                )
                try TileCodec.decode(
                    header,
                    from: UnsafeRawPointer(surface.base),
                    tiles: 0..<header.grid.tileCount,
                    into: planes(header.grid, output, isPrivate: isPrivate),
                    threads: 1,
                    verifyChecksums: verify,
                    workspace: workspace
                )
                inPlane += workspace.decodeTally.planeDictionaryDecodes
                // One tile row on its own (the last): an Up entry's chain of dictionaries is read from the surface
                // again, under the same rewrites.
                let lastRow = header.grid.tileCount - header.grid.tilesAcross
                try TileCodec.decode(
                    header,
                    from: UnsafeRawPointer(surface.base),
                    tiles: lastRow..<header.grid.tileCount,
                    into: planes(header.grid, output, isPrivate: isPrivate),
                    threads: 1,
                    verifyChecksums: verify
                )
                storage.entries = header.entries
            } catch {
                errors += 1
            }
        }
    }
    flags.stop.store(true, ordering: .relaxed)
    while !writer.isFinished { usleep(1000) }
    return (decodes, errors, flags.writes.load(ordering: .relaxed), packed8LZ4, up, coded, inPlane, zstd)
}

@main
enum RaceDecoder {
    static func main() {
        let seconds = CommandLine.arguments.count > 1 ? Double(CommandLine.arguments[1]) ?? 10 : 10
        let cases: [(UInt32, CodecFormat.Kind, Int, Int, Int, Int, Bool)] = [
            (0x3432_3076, .yuv8, 128, 64, 32, 16, false),  // 420v
            (0x7834_3230, .yuv16, 128, 64, 32, 16, false),  // x420
            (0x4247_5241, .bgra, 96, 48, 32, 16, false),  // BGRA
            (0x3432_3076, .yuv8, 256, 32, 256, 8, false),  // 420v, bands
            (0x3432_3076, .yuv8, 256, 64, 256, 32, true),  // 420v screen content, bands
            (0x4247_5241, .bgra, 128, 64, 128, 32, true),  // BGRA screen content, bands
            (0x7834_3230, .yuv16, 256, 64, 256, 32, true),  // x420 screen content, bands (packed10LZ4)
            // Eight tile rows of screen content: Up entries (layout version 5) in rows 1 to 7.
            (0x3432_3076, .yuv8, 256, 128, 256, 16, true),  // 420v
            (0x4247_5241, .bgra, 128, 128, 128, 16, true),  // BGRA
            (0x7834_3230, .yuv16, 256, 128, 256, 16, true),  // x420
        ]
        // The same screen content in layout version 8 (effort fast): zstd entries (the cases above are version 7).
        let zstdCases: [(UInt32, CodecFormat.Kind, Int, Int, Int, Int, Bool)] = [
            (0x3432_3076, .yuv8, 256, 64, 256, 32, true),  // 420v
            (0x4247_5241, .bgra, 128, 64, 128, 32, true),  // BGRA
            (0x7834_3230, .yuv16, 256, 128, 256, 16, true),  // x420
            // The taller bands the encoder writes screen frames in at the default tile size (ScreenBands).
            (0x3432_3076, .yuv8, 128, 600, 128, 256, true),  // 420v
            (0x4247_5241, .bgra, 64, 600, 64, 256, true),  // BGRA
        ]
        let share = seconds / Double(cases.count + zstdCases.count)
        var codedEntries = 0
        var inPlaneDecodes = 0
        for (index, (fourCC, kind, width, height, tileWidth, tileHeight, screen)) in (cases + zstdCases).enumerated() {
            let version = index < cases.count ? 7 : TileMode.zstdLayoutVersion
            let grid = TileGrid(
                format: CodecFormat(kind: kind),
                width: width,
                height: height,
                tileWidth: tileWidth,
                tileHeight: tileHeight,
                layoutVersion: version
            )!
            let result = race(grid, fourCC: fourCC, screen: screen, seconds: share, seed: UInt64(index + 1))
            print(
                "v\(version) \(kind) \(width)x\(height) tiles \(tileWidth)x\(tileHeight)\(screen ? " screen" : ""): "
                    + "\(result.decodes) decodes, \(result.errors) errors, \(result.writes) rewrites, "
                    + "\(result.packed8LZ4) packed-through-LZ4 entries, \(result.up) Up entries, "
                    + "\(result.coded) coded-literals or coded-sequences entries, \(result.inPlane) in-plane Up decodes, "
                    + "\(result.zstd) zstd entries; no crash"
            )
            codedEntries += result.coded
            inPlaneDecodes += result.inPlane
            if version >= TileMode.zstdLayoutVersion {
                guard result.zstd > 0, result.writes > 0 else {
                    print("the version 8 screen-content surface has no zstd entry to race, or the writer never ran")
                    exit(1)
                }
                continue
            }
            guard !screen || tileHeight > 16 || result.up > 0 else {
                print("the eight-row screen-content surface has no Up entry to race")
                exit(1)
            }
            guard !screen || result.packed8LZ4 > 0 else {
                print("the screen-content surface has no packed-through-LZ4 entry to race")
                exit(1)
            }
            guard result.writes > 0 else {
                print("the writer never ran")
                exit(1)
            }
        }
        guard codedEntries > 0 else {
            print("no surface has a coded-literals or coded-sequences entry (layout version 6 or 7) to race")
            exit(1)
        }
        guard inPlaneDecodes > 0 else {
            print("no lz4Up Y band decoded in a private plane (the band above as dictionary) under rewrites")
            exit(1)
        }
    }
}
