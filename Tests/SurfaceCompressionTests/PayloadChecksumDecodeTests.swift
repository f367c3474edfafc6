import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// The decoder checks payload checksums computed a batch of entries ahead (`PayloadChecksums`), with the verdicts
/// of checking each payload right before decoding it: a damaged byte in any one payload of a batch (its first, its
/// last, one on either side of a batch boundary, under every kernel tier, with one and two threads) fails that
/// entry with `checksumMismatch` and no other; the tiles before it are decoded; with two damaged payloads the first
/// one is named; with `verifiesChecksums: false` no checksum fails.
@Suite(.heavyWork, .timeLimit(.minutes(10))) struct PayloadChecksumDecodeTests {
    /// A compressed 420v frame, its source's packed bytes and its table: entry sizes and where payloads start.
    struct Frame {
        let width: Int
        let height: Int
        let tileSize: SurfaceCodec.TileSize
        let source: [UInt8]
        private(set) var sizes: [Int]
        private(set) var payloadStart: Int

        init(width: Int, height: Int, tileSize: SurfaceCodec.TileSize, noise: Int) throws {
            self.width = width
            self.height = height
            self.tileSize = tileSize
            source = syntheticBytes(.yuv420BiPlanarVideoRange8, width: width, height: height, seed: 16, noise: noise)
            sizes = []
            payloadStart = 0
            let (compressed, _) = try makeCompressed()
            var sizes: [Int] = []
            try compressed.lock([.readOnly])
            defer { try? compressed.unlock([.readOnly]) }
            compressed.surface.withUnsafeBytes { bytes in
                let count = Int(bytes.load(fromByteOffset: 28, as: UInt32.self))
                for i in 0..<count { sizes.append(Int(bytes.load(fromByteOffset: 64 + 16 * i, as: UInt32.self))) }
            }
            self.sizes = sizes
            payloadStart = 64 + 16 * sizes.count
        }

        func makeCompressed() throws -> (PixelBuffer, Int) {
            let buffer = try makeBuffer(source, width: width, height: height, format: .yuv420BiPlanarVideoRange8)
            let compressed = try SurfaceCodec.makeCompressedBuffer(
                width: width,
                height: height,
                format: .yuv420BiPlanarVideoRange8,
                tileSize: tileSize
            )
            let statistics = try SurfaceCodec.compress(buffer, into: compressed, options: .init(tileSize: tileSize))
            return (compressed, statistics.compressedByteCount)
        }

        /// A fresh compressed copy with one byte flipped in the middle of each of `entries`' payloads.
        func damaged(_ entries: [Int]) throws -> PixelBuffer {
            let (compressed, _) = try makeCompressed()
            try compressed.lock()
            defer { try? compressed.unlock() }
            compressed.surface.withUnsafeMutableBytes { bytes in
                for entry in entries {
                    let offset = payloadStart + sizes[..<entry].reduce(0, +) + sizes[entry] / 2
                    bytes[offset] ^= 0x40
                }
            }
            return compressed
        }

        /// Decodes `compressed`; returns the error (nil on success) and the output's packed bytes.
        func decode(
            _ compressed: PixelBuffer,
            threads: Int,
            verifies: Bool = true
        ) throws -> (CompressionError?, [UInt8]) {
            let output = try PixelBuffer(width: width, height: height, pixelFormat: .yuv420BiPlanarVideoRange8)
            var failure: CompressionError? = nil
            do {
                try SurfaceCodec.decompress(
                    compressed,
                    into: output,
                    options: .split(threads, verifiesChecksums: verifies)
                )
            } catch {
                failure = error
            }
            return (failure, try packed(output))
        }
    }

    /// Entries to damage: both ends of the table, both sides of the first batch boundaries that a batch of
    /// `PayloadChecksums.capacity` entries would make, and one in the middle.
    static func entriesToDamage(_ count: Int) -> [Int] {
        let c = PayloadChecksums.capacity
        return Set([0, 1, c - 1, c, c + 1, 2 * c, count / 2, count - 2, count - 1].filter { $0 >= 0 && $0 < count })
            .sorted()
    }

    static func expectMismatch(
        _ error: CompressionError?,
        entry: Int,
        _ context: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard let error else {
            Issue.record("\(context): a damaged payload decoded", sourceLocation: sourceLocation)
            return
        }
        #expect(error.code == .checksumMismatch, "\(context): \(error)", sourceLocation: sourceLocation)
        #expect(
            error.operation.hasSuffix(": tile \(entry / 3) component \(entry % 3)"),
            "\(context): \(error)",
            sourceLocation: sourceLocation
        )
    }

    /// Small tiles (32 × 32: 144 entries of a few hundred bytes), so batches end at the entry limit.
    @Test func aDamagedPayloadInABatchOfSmallTilesFailsThatEntry() throws {
        let frame = try Frame(width: 256, height: 192, tileSize: .init(width: 32, height: 32), noise: 8)
        #expect(frame.sizes.count == 144)
        try Self.check(frame)
    }

    /// Bands (64 rows of 1024 noisy pixels: payloads of tens of KiB), so batches end at the byte budget.
    @Test func aDamagedPayloadInABatchOfBandsFailsThatEntry() throws {
        let frame = try Frame(width: 1024, height: 512, tileSize: .default, noise: 200)
        #expect(frame.sizes.count == 24)
        try #require(
            frame.sizes.reduce(0, +) > 2 * PayloadChecksums.batchByteCount,
            "the payloads must fill several batches"
        )
        try Self.check(frame)
        // The bands before a damaged one are decoded (one thread decodes in order and stops at the damage).
        for entry in [4, 13, 23] {
            let band = entry / 3
            let (error, bytes) = try frame.decode(try frame.damaged([entry]), threads: 1)
            Self.expectMismatch(error, entry: entry, "entry \(entry)")
            let yBytes = band * 64 * frame.width
            let chromaStart = frame.width * frame.height
            let chromaBytes = band * 32 * frame.width
            #expect(bytes[..<yBytes] == frame.source[..<yBytes], "Y above band \(band)")
            #expect(
                bytes[chromaStart..<chromaStart + chromaBytes] == frame.source[chromaStart..<chromaStart + chromaBytes],
                "CbCr above band \(band)"
            )
        }
    }

    static func check(_ frame: Frame) throws {
        let (clean, bytes) = try frame.decode(try frame.makeCompressed().0, threads: 1)
        #expect(clean == nil)
        #expect(bytes == frame.source)
        for entry in entriesToDamage(frame.sizes.count) {
            let compressed = try frame.damaged([entry])
            // One thread runs on the calling thread, so the forced tier holds for the whole decode.
            for tier in Kernels.availableTiers {
                let (error, _) = try Kernels.withTier(tier) { try frame.decode(compressed, threads: 1) }
                expectMismatch(error, entry: entry, "entry \(entry), tier \(tier)")
            }
            let (error, _) = try frame.decode(compressed, threads: 2)
            expectMismatch(error, entry: entry, "entry \(entry), two threads")
            let (unchecked, _) = try frame.decode(compressed, threads: 1, verifies: false)
            #expect(unchecked?.code != .checksumMismatch, "entry \(entry) unchecked: \(String(describing: unchecked))")
        }
        // Two damaged payloads in one batch: the first is named.
        let count = frame.sizes.count
        for (first, second) in [(1, 2), (0, count - 1), (count / 2, count / 2 + 3)] {
            let (error, _) = try frame.decode(try frame.damaged([first, second]), threads: 1)
            expectMismatch(error, entry: first, "entries \(first) and \(second)")
        }
    }
}
