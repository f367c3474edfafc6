import Foundation
import ImageSources
import PixelBuffers
@testable import SurfaceCompression
import Testing
import TestSupport

/// The reusable codec: bit-exact with every thread count and tile geometry, reused across sizes and formats;
/// decodeTileRows decodes several tile rows at once and lets its body throw.
@Suite(.heavyWork, .timeLimit(.minutes(20))) struct SurfaceCodecContextTests {
    static let geometries: [SurfaceCodec.TileSize] = [
        .default, .init(width: 64, height: 64), .init(width: 32, height: 6), .init(width: nil, height: 16),
    ]

    /// Two corpus photographs and a screen image, every format, threads 1, 2 and 3, every tile geometry; one
    /// context per thread count and geometry, reused for every image and format.
    @Test(arguments: [1, 2, 3])
    func aContextRoundTripsEveryFormatAndGeometryBitExact(threads: Int) async throws {
        let names = ["kodak/kodim23.png", "skimage/astronaut.png", "synthetic/terminal_1920x1080.png"]
        let images = try names.compactMap { name -> RGBImage? in
            let path = corpusURL.appendingPathComponent(name).path
            guard FileManager.default.fileExists(atPath: path) else { return nil }
            return try RGBImage(contentsOfPNGFile: path).croppedToEven()
        }
        #expect(images.count >= 2)
        // Minutes of debug-build codec work: on a thread of its own, so the cooperative pool stays free for the
        // tests that wait on other processes; the mismatches come back to be checked here.
        let (roundTrips, failures) = try await heavyWork { () throws -> (Int, [String]) in
            var roundTrips = 0
            var failures: [String] = []
            for geometry in Self.geometries {
                let codec = SurfaceCodecContext(threadCount: threads, tileSize: geometry, policy: .alwaysSplit)
                for image in images {
                    for format in PixelFormat.baseFormats {
                        let what = "\(format) \(image.width)x\(image.height) \(geometry)"
                        let bytes = image.convertedBytes(to: format)
                        let source = try makeBuffer(bytes, width: image.width, height: image.height, format: format)
                        let compressed = try SurfaceCodec.makeCompressedBuffer(
                            width: image.width,
                            height: image.height,
                            format: format,
                            tileSize: geometry
                        )
                        let statistics = try codec.compress(source, into: compressed)
                        if statistics.compressedByteCount != (try SurfaceCodec.bytesUsed(of: compressed)) {
                            failures.append("\(what): compressedByteCount differs from bytesUsed")
                        }
                        let output = try PixelBuffer(width: image.width, height: image.height, pixelFormat: format)
                        try codec.decompress(compressed, into: output)
                        if try packed(output) != bytes { failures.append("\(what): not bit-exact") }
                        // The split is forced: every image here has at least 3 tiles, so every thread decodes.
                        let workers = codec.workspace.withLock { $0.lastDecodeWorkers }
                        if workers != threads { failures.append("\(what): decoded by \(workers) workers") }
                        roundTrips += 1
                    }
                }
            }
            return (roundTrips, failures)
        }
        #expect(roundTrips == Self.geometries.count * images.count * PixelFormat.baseFormats.count)
        #expect(failures.isEmpty, "\(failures)")
    }

    /// A scratch three tile rows high: batches of up to three tile rows, decoded with two threads, handed over
    /// in order; the assembled rows are the image.
    @Test(arguments: PixelFormat.baseFormats)
    func decodeTileRowsHandsOverBatchesOfSeveralTileRows(format: PixelFormat) throws {
        let width = 200
        let height = 134
        let bytes = syntheticBytes(format, width: width, height: height, seed: 21)
        let source = try makeBuffer(bytes, width: width, height: height, format: format)
        let tiles = SurfaceCodec.TileSize(width: 64, height: 16)
        let codec = SurfaceCodecContext(threadCount: 2, tileSize: tiles, policy: .alwaysSplit)
        let compressed = try SurfaceCodec.makeCompressedBuffer(
            width: width,
            height: height,
            format: format,
            tileSize: tiles
        )
        try codec.compress(source, into: compressed)
        let rowHeight = try SurfaceCodec.tileRowHeight(of: compressed)
        let scratch = try PixelBuffer(width: width, height: rowHeight * 3, pixelFormat: format)
        var assembled = [[UInt8]](repeating: [], count: format.planes.count)
        var batches: [Range<Int>] = []
        try codec.decodeTileRows(of: compressed, into: scratch) { rows in
            batches.append(rows)
            for (index, plane) in format.planes.enumerated() {
                let rowBytes = width / plane.horizontalSubsampling * plane.bytesPerElement
                let bytesPerRow = scratch.bytesPerRow(ofPlane: index)
                try scratch.withUnsafeBytes(ofPlane: index) { planeBytes in
                    for row in 0..<rows.count / plane.verticalSubsampling {
                        assembled[index] += planeBytes[row * bytesPerRow..<row * bytesPerRow + rowBytes]
                    }
                }
            }
        }
        // 134 rows in tile rows of 16: 9 tile rows, in batches of 3 (the last one short).
        #expect(batches == [0..<48, 48..<96, 96..<134])
        // The last batch's 12 tiles were split between both workers (the split is forced).
        #expect(codec.workspace.withLock { $0.lastDecodeWorkers } == 2)
        #expect(assembled.flatMap { $0 } == bytes)
    }

    /// Contexts with several threads, made and released again and again, encode and decode exactly.
    @Test func contextsWithThreadsCanBeMadeAndReleasedRepeatedly() throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let bytes = syntheticBytes(format, width: 128, height: 128, seed: 9)
        let source = try makeBuffer(bytes, width: 128, height: 128, format: format)
        let tiles = SurfaceCodec.TileSize(width: nil, height: 16)
        let compressed = try SurfaceCodec.makeCompressedBuffer(width: 128, height: 128, format: format, tileSize: tiles)
        let output = try PixelBuffer(width: 128, height: 128, pixelFormat: format)
        for round in 0..<40 {
            let codec = SurfaceCodecContext(threadCount: 2 + round % 3, tileSize: tiles, policy: .alwaysSplit)
            try codec.compress(source, into: compressed)
            try codec.decompress(compressed, into: output)
        }
        #expect(try packed(output) == bytes)
    }

    struct Stop: Error, Equatable {}

    /// An error thrown by the body stops decoding at once and comes back to the caller unchanged.
    @Test func anErrorThrownByTheBodyStopsDecodingAndIsRethrown() throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let bytes = syntheticBytes(format, width: 64, height: 96, seed: 2)
        let source = try makeBuffer(bytes, width: 64, height: 96, format: format)
        let tiles = SurfaceCodec.TileSize(width: nil, height: 16)
        let compressed = try SurfaceCodec.makeCompressedBuffer(width: 64, height: 96, format: format, tileSize: tiles)
        try SurfaceCodec.compress(source, into: compressed, options: .init(tileSize: tiles))
        let scratch = try PixelBuffer(width: 64, height: 16, pixelFormat: format)
        var calls = 0
        #expect(throws: Stop()) {
            try SurfaceCodec.decodeTileRows(of: compressed, into: scratch) { _ in
                calls += 1
                if calls == 2 { throw Stop() }
            }
        }
        #expect(calls == 2)
        // The scratch is unlocked again afterwards.
        #expect(!scratch.surface.isLocked)
    }

    /// A body that calls its own context (decompress, compress, decodeTileRows) gets reentrantCall at once
    /// instead of a deadlock; another context works there; and the context works again after the body.
    @Test(.timeLimit(.minutes(5))) func aBodyCallingItsOwnContextGetsReentrantCallNotADeadlock() throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let bytes = syntheticBytes(format, width: 64, height: 64, seed: 5)
        let source = try makeBuffer(bytes, width: 64, height: 64, format: format)
        let tiles = SurfaceCodec.TileSize(width: nil, height: 16)
        let compressed = try SurfaceCodec.makeCompressedBuffer(width: 64, height: 64, format: format, tileSize: tiles)
        let other = try SurfaceCodec.makeCompressedBuffer(width: 64, height: 64, format: format, tileSize: tiles)
        let codec = SurfaceCodecContext(threadCount: 2, tileSize: tiles, policy: .alwaysSplit)
        let second = SurfaceCodecContext(threadCount: 1, tileSize: tiles)
        try codec.compress(source, into: compressed)
        let scratch = try PixelBuffer(width: 64, height: 16, pixelFormat: format)
        let output = try PixelBuffer(width: 64, height: 64, pixelFormat: format)
        let inner = try PixelBuffer(width: 64, height: 16, pixelFormat: format)
        var codes: [CompressionError.Code] = []
        var batches = 0
        try codec.decodeTileRows(of: compressed, into: scratch) { _ in
            batches += 1
            do {
                try codec.decompress(compressed, into: output)
            } catch let error as CompressionError { codes.append(error.code) }
            do {
                try codec.compress(source, into: other)
            } catch let error as CompressionError { codes.append(error.code) }
            do {
                try codec.decodeTileRows(of: compressed, into: inner) { _ in Issue.record("nested body ran") }
            } catch let error as CompressionError { codes.append(error.code) }
            // Another context is free to work here.
            try second.decompress(compressed, into: output)
        }
        #expect(batches == 4)
        #expect(codes == Array(repeating: [.reentrantCall, .reentrantCall, .reentrantCall], count: 4).flatMap { $0 })
        #expect(try packed(output) == bytes)
        // After the body, the same context decodes again (the mark is cleared).
        let again = try PixelBuffer(width: 64, height: 64, pixelFormat: format)
        try codec.decompress(compressed, into: again)
        #expect(try packed(again) == bytes)
    }
}
