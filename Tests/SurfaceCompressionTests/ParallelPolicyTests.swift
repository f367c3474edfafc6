import PixelBuffers
@testable import SurfaceCompression
import Testing
import TestSupport

extension SurfaceCodec.Options {
    /// `threads` threads, and every call split between them whatever the frame's size: the multi-worker path on
    /// the small images of the tests (``ParallelPolicy/alwaysSplit``).
    static func split(
        _ threads: Int,
        tileSize: SurfaceCodec.TileSize = .default,
        verifiesChecksums: Bool = true
    ) -> Self {
        var options = Self(threadCount: threads, tileSize: tileSize, verifiesChecksums: verifiesChecksums)
        options.parallelPolicy = .alwaysSplit
        return options
    }
}

/// How many workers an encode or a decode uses (``ParallelPolicy``): one for a frame too small to pay for the
/// hand-off, several for a large one, and every thread when a test forces the split; the workers counted are the
/// ones the codec used, and every frame decodes bit-exact whichever way it was split.
@Suite(.heavyWork, .timeLimit(.minutes(10))) struct ParallelPolicyTests {
    /// The rule itself: a second worker only when each worker gets at least the minimum raw bytes, never more
    /// workers than threads or units of work; `alwaysSplit` splits whenever there are threads and units.
    @Test func theRuleGivesEachWorkerTheMinimumOfWork() {
        let policy = ParallelPolicy.default
        let perWorker = policy.minimumDecodeBytesPerWorker
        #expect(perWorker > 0 && policy.minimumEncodeBytesPerWorker > 0)
        // A 768 × 512 420v photograph (589,824 raw bytes) stays on one worker.
        #expect(policy.decodeWorkers(threads: 2, tiles: 8, rawBytes: 768 * 512 * 3 / 2) == 1)
        #expect(policy.decodeWorkers(threads: 2, tiles: 17, rawBytes: 2 * perWorker - 1) == 1)
        #expect(policy.decodeWorkers(threads: 2, tiles: 17, rawBytes: 2 * perWorker) == 2)
        #expect(policy.decodeWorkers(threads: 4, tiles: 17, rawBytes: 3 * perWorker) == 3)
        #expect(policy.decodeWorkers(threads: 1, tiles: 17, rawBytes: 100 * perWorker) == 1)
        #expect(policy.decodeWorkers(threads: 8, tiles: 2, rawBytes: 100 * perWorker) == 2)
        #expect(policy.decodeWorkers(threads: 2, tiles: 17, rawBytes: 0) == 1)
        let encodePerWorker = policy.minimumEncodeBytesPerWorker
        #expect(policy.encodeWorkers(threads: 2, chunks: 3, rawBytes: 2 * encodePerWorker - 1) == 1)
        #expect(policy.encodeWorkers(threads: 2, chunks: 3, rawBytes: 2 * encodePerWorker) == 2)
        #expect(policy.encodeWorkers(threads: 4, chunks: 1, rawBytes: 100 * encodePerWorker) == 1)
        let always = ParallelPolicy.alwaysSplit
        #expect(always.decodeWorkers(threads: 2, tiles: 2, rawBytes: 1) == 2)
        #expect(always.decodeWorkers(threads: 3, tiles: 2, rawBytes: 1) == 2)
        #expect(always.encodeWorkers(threads: 2, chunks: 5, rawBytes: 1) == 2)
        #expect(always.decodeWorkers(threads: 1, tiles: 9, rawBytes: 1) == 1)
    }

    /// Encodes and decodes `bytes` through `codec` and returns the workers each used, with whether the decoded
    /// frame equals the source byte for byte.
    static func roundTrip(
        _ codec: SurfaceCodecContext,
        _ bytes: [UInt8],
        _ format: PixelFormat,
        width: Int,
        height: Int
    ) throws -> (encodeWorkers: Int, decodeWorkers: Int, exact: Bool) {
        let source = try makeBuffer(bytes, width: width, height: height, format: format)
        let compressed = try SurfaceCodec.makeCompressedBuffer(width: width, height: height, format: format)
        try codec.compress(source, into: compressed)
        let encodeWorkers = codec.workspace.withLock { $0.lastEncodeWorkers }
        let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
        try codec.decompress(compressed, into: output)
        let decodeWorkers = codec.workspace.withLock { $0.lastDecodeWorkers }
        return (encodeWorkers, decodeWorkers, try packed(output) == bytes)
    }

    /// A 2-thread context with the default policy: a Kodak-sized 420v frame (576 KiB raw) is encoded and decoded
    /// by one worker; a 1280 × 720 BGRA frame (3.5 MiB raw, 12 bands) by two. Both bit-exact.
    @Test func theDefaultPolicyKeepsASmallFrameOnOneWorkerAndSplitsALargeOne() throws {
        let codec = SurfaceCodecContext(threadCount: 2)
        let small = try Self.roundTrip(
            codec,
            syntheticBytes(.yuv420BiPlanarVideoRange8, width: 768, height: 512, seed: 3),
            .yuv420BiPlanarVideoRange8,
            width: 768,
            height: 512
        )
        #expect(small.decodeWorkers == 1)
        #expect(small.exact)
        let large = try Self.roundTrip(
            codec,
            syntheticBytes(.bgra8, width: 1280, height: 720, seed: 4),
            .bgra8,
            width: 1280,
            height: 720
        )
        #expect(large.encodeWorkers == 2)
        #expect(large.decodeWorkers == 2)
        #expect(large.exact)
        // A frame of two bands is too small to encode on two workers.
        let tiny = try Self.roundTrip(
            codec,
            syntheticBytes(.yuv420BiPlanarVideoRange8, width: 256, height: 128, seed: 5),
            .yuv420BiPlanarVideoRange8,
            width: 256,
            height: 128
        )
        #expect(tiny.encodeWorkers == 1 && tiny.decodeWorkers == 1)
        #expect(tiny.exact)
    }

    /// With the split forced, a small frame of nine bands (two chains) is encoded and decoded by as many workers as
    /// the context has threads (up to its units of work), bit-exact: the path the tile-order, chain and failure
    /// tests run on their small images.
    @Test(arguments: [2, 3])
    func aForcedSplitUsesEveryThreadOnASmallFrame(threads: Int) throws {
        let codec = SurfaceCodecContext(threadCount: threads, policy: .alwaysSplit)
        for format in [PixelFormat.yuv420BiPlanarVideoRange8, .bgra8] {
            let trip = try Self.roundTrip(
                codec,
                syntheticBytes(format, width: 128, height: 64 * 9, seed: 6),
                format,
                width: 128,
                height: 64 * 9
            )
            #expect(trip.decodeWorkers == threads, "\(format)")
            // Encode chunks are whole chains when the grid uses Up modes (two chains here), else runs of bands.
            #expect(trip.encodeWorkers == 2, "\(format)")
            #expect(trip.exact, "\(format)")
        }
    }

    /// More 2-thread contexts than cores, each on a thread of its own, each encoding and decoding frames split
    /// between its workers at the same time as the others: every one finishes (time limit) and every frame is exact.
    @Test func moreContextsThanCoresAllFinishExact() async throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let width = 128
        let height = 64 * 9
        let bytes = syntheticBytes(format, width: width, height: height, seed: 7)
        let contexts = 2 * System.processorCount + 2
        let results = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for _ in 0..<contexts {
                group.addTask {
                    try await onDedicatedThread { () throws -> (Int, Int) in
                        let codec = SurfaceCodecContext(threadCount: 2, policy: .alwaysSplit)
                        var exact = 0
                        var split = 0
                        for _ in 0..<20 {
                            let trip = try Self.roundTrip(codec, bytes, format, width: width, height: height)
                            exact += trip.exact ? 1 : 0
                            split += trip.decodeWorkers == 2 ? 1 : 0
                        }
                        return (exact, split)
                    }
                }
            }
            var all: [(Int, Int)] = []
            for try await result in group { all.append(result) }
            return all
        }
        #expect(results.count == contexts)
        for (exact, split) in results {
            #expect(exact == 20)
            #expect(split == 20)
        }
    }
}
