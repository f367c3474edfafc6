import Foundation
import PixelBuffers
import Synchronization
import Testing
import TestSupport

@testable import SurfaceCompression

/// A publisher still holds its compressed surfaces writable: the decoder must take every bound from private
/// memory, read once, so that a rewrite while it decodes gives wrong pixels or an error, never a crash.
@Suite(.heavyWork, .timeLimit(.minutes(10))) struct SharedMemoryRaceTests {
    /// A compressed frame with many tiles and every mode (flat block: solid/LZ4; gradient with noise: packed).
    static func makeCompressed(
        _ format: PixelFormat,
        width: Int = 128,
        height: Int = 64
    ) throws -> (
        source: [UInt8], compressed: PixelBuffer, used: Int
    ) {
        let bytes = syntheticBytes(format, width: width, height: height, seed: 11)
        let source = try makeBuffer(bytes, width: width, height: height, format: format)
        let tiles = SurfaceCodec.TileSize(width: 32, height: 16)
        let compressed = try SurfaceCodec.makeCompressedBuffer(
            width: width,
            height: height,
            format: format,
            tileSize: tiles
        )
        let statistics = try SurfaceCodec.compress(source, into: compressed, options: .init(tileSize: tiles))
        return (bytes, compressed, statistics.compressedByteCount)
    }

    /// The hostile publisher of the issue: after the table is validated, one entry is rewritten to offsets and
    /// sizes far outside the surface. The old decoder read the entry again and crashed in the checksum.
    @Test(arguments: PixelFormat.baseFormats)
    func aTableRewrittenAfterValidationIsNeverReadAgain(format: PixelFormat) throws {
        let (source, compressed, _) = try Self.makeCompressed(format)
        let output = try PixelBuffer(width: compressed.width, height: compressed.height, pixelFormat: format)
        try compressed.lock()
        try output.lock()
        try compressed.surface.withUnsafeMutableBytes { bytes in
            let header = try TileCodec.parse(bytes.baseAddress!, count: bytes.count)
            // Rewrite every entry: offset, size and mode to hostile values (mode 0xFF, sizes near 4 GiB).
            for index in 0..<header.grid.entryCount {
                let entry = 64 + header.grid.entryByteCount * index
                bytes.storeBytes(of: UInt32(0xFFFF_FFF0), toByteOffset: entry, as: UInt32.self)
                bytes.storeBytes(of: UInt32(0xFFFF_FFF0), toByteOffset: entry + 4, as: UInt32.self)
                bytes.storeBytes(of: UInt32(0xFF), toByteOffset: entry + 8, as: UInt32.self)
            }
            try output.withUnsafeMutableBytes(ofPlane: 0) { plane0 in
                let plane1Index = format.planes.count - 1
                try output.withUnsafeMutableBytes(ofPlane: plane1Index) { plane1 in
                    let planes = ImagePlanes(
                        plane0: plane0.baseAddress!,
                        bytesPerRow0: output.bytesPerRow(ofPlane: 0),
                        plane1: plane1.baseAddress!,
                        bytesPerRow1: output.bytesPerRow(ofPlane: plane1Index)
                    )
                    // The payloads are intact, so decoding with the validated private table is exact.
                    try TileCodec.decode(
                        header,
                        from: bytes.baseAddress!,
                        tiles: 0..<header.grid.tileCount,
                        into: planes,
                        threads: 2,
                        workspace: CodecWorkspace(policy: .alwaysSplit)
                    )
                }
            }
        }
        try output.unlock()
        try compressed.unlock()
        #expect(try packed(output) == source)
    }

    /// Width nibbles rewritten to 15 after a first validating read: the decoder reads them once (a private copy),
    /// so the table index `w * 4` cannot leave its 36 entries. Driven here at the component level, where the
    /// rewrite can be placed exactly between validation and use: the payload's controls are rewritten before
    /// the call, and the result must still be a clean failure, not an out-of-bounds read.
    @Test func controlBytesAreValidatedFromThePrivateCopy() throws {
        let width = 16
        let height = 4
        var samples = [UInt8](repeating: 0, count: 4096)
        for i in 0..<width * height { samples[i] = UInt8(truncatingIfNeeded: i * 7 + i / 3) }
        var scratch = [UInt8](repeating: 0, count: 4096 * 6)
        let decoded = try scratch.withUnsafeMutableBytes { scratch -> Bool in
            let base = scratch.baseAddress!
            let choice = samples.withUnsafeMutableBufferPointer { s in
                ComponentCodec.encode8(
                    samples: s.baseAddress!,
                    width: width,
                    height: height,
                    residuals: (base + 4096).assumingMemoryBound(to: UInt8.self),
                    residuals2: (base + 2 * 4096).assumingMemoryBound(to: UInt8.self),
                    packed: base + 3 * 4096,
                    alternative: base + 4 * 4096
                )
            }
            try #require(choice.mode == .packed8)
            // A private copy of the payload, then every width nibble set to 15 (a width the table does not have).
            var payload = [UInt8](repeating: 0, count: choice.byteCount)
            payload.withUnsafeMutableBytes {
                $0.baseAddress!.copyMemory(from: choice.payload, byteCount: choice.byteCount)
            }
            let nibbleBytes = (width / 8 * height + 1) / 2
            for i in 0..<nibbleBytes { payload[i] = 0xFF }
            return payload.withUnsafeBytes { p in
                ComponentCodec.decodePacked8(
                    p.baseAddress!,
                    count: p.count,
                    width: width,
                    height: height,
                    controls: (base + 5 * 4096).assumingMemoryBound(to: UInt8.self),
                    controlsCapacity: 4096,
                    into: base.assumingMemoryBound(to: UInt8.self),
                    capacity: 4096
                )
            }
        }
        #expect(!decoded)
    }

    /// A writer thread rewrites bytes of the surface (table entries between valid and hostile values, width
    /// nibbles, payload bytes; each restored after a moment) while this thread decodes it over and over through
    /// the public API. Every decode must succeed or throw a ``CompressionError``; a crash fails the whole run.
    /// The same race runs under AddressSanitizer in `Fuzz/race.sh`.
    @Test(arguments: PixelFormat.baseFormats)
    func decodingWhileAnotherThreadRewritesTheSurfaceNeverCrashes(format: PixelFormat) async throws {
        let (source, compressed, used) = try Self.makeCompressed(format)
        let output = try PixelBuffer(width: compressed.width, height: compressed.height, pixelFormat: format)
        // The writer works on the mapping directly, as another process holding it writable would.
        let base = try Self.writableBase(of: compressed)
        let flags = Flags()
        let writer = Thread { [base, flags] in
            var random = SplitMix(seed: 99)
            let entries = (Int(base.value.load(fromByteOffset: 28, as: UInt32.self)))
            while !flags.stop.load(ordering: .relaxed) {
                let choice = random.next() % 4
                let offset: Int
                let hostile: UInt32
                switch choice {
                case 0:  // a table entry's offset or size
                    offset = 64 + 16 * Int(random.next() % UInt64(entries)) + 4 * Int(random.next() % 2)
                    hostile = random.next() % 2 == 0 ? 1 : 0xFFFF_FFF0
                case 1:  // a mode
                    offset = 64 + 16 * Int(random.next() % UInt64(entries)) + 8
                    hostile = UInt32(truncatingIfNeeded: random.next() % 7)
                default:  // anywhere in the payloads: control nibbles, residuals, LZ4 streams
                    offset = (64 + 16 * entries + Int(random.next() % UInt64(used - 64 - 16 * entries))) & ~3
                    hostile = UInt32(truncatingIfNeeded: random.next()) | 0xF0F0_F0F0
                }
                guard offset + 4 <= used else { continue }
                let original = base.value.loadUnaligned(fromByteOffset: offset, as: UInt32.self)
                base.value.storeBytes(of: hostile, toByteOffset: offset, as: UInt32.self)
                for _ in 0..<Int(random.next() % 2000) { _ = flags.stop.load(ordering: .relaxed) }
                base.value.storeBytes(of: original, toByteOffset: offset, as: UInt32.self)
                flags.writes.add(1, ordering: .relaxed)
            }
        }
        writer.start()
        defer { flags.stop.store(true, ordering: .relaxed) }
        var failures = 0
        var successes = 0
        // Iteration-bounded, not timed: enough decodes to overlap many rewrites.
        for iteration in 0..<3000 {
            do {
                let options = SurfaceCodec.Options.split(
                    1 + iteration % 2,
                    verifiesChecksums: iteration % 3 != 0
                )
                try SurfaceCodec.decompress(compressed, into: output, options: options)
                successes += 1
            } catch {
                failures += 1
            }
        }
        flags.stop.store(true, ordering: .relaxed)
        try #require(await eventually { writer.isFinished }, "the writer thread did not stop")
        #expect(flags.writes.load(ordering: .relaxed) > 0)
        // Once the writer has stopped and restored everything, the surface decodes exactly again.
        try SurfaceCodec.decompress(compressed, into: output)
        #expect(try packed(output) == source)
        #expect(successes + failures == 3000)
    }

    final class Flags: Sendable {
        let stop = Atomic<Bool>(false)
        let writes = Atomic<Int>(0)
    }

    /// The base of a compressed buffer's writable mapping, kept past the closure: the buffer outlives the test.
    struct Base: @unchecked Sendable {
        // @unchecked: the test's writer thread races the decoder on purpose; only raw loads and stores touch it.
        let value: UnsafeMutableRawPointer
    }

    static func writableBase(of buffer: PixelBuffer) throws -> Base {
        try buffer.lock()
        defer { try? buffer.unlock() }
        return buffer.surface.withUnsafeMutableBytes { Base(value: $0.baseAddress!) }
    }
}
