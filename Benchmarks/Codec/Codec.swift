// Benchmarks of the lossless surface codec (SurfaceCompression): encode and decode, single thread, per format,
// on a photograph set and a screen-content frame, with plain LZ4 on the same planes as the baseline.
//
//   cd Benchmarks && swift package benchmark --target Codec
//
// Throughput is frames per second; the compression ratio is reported as the custom metric "ratio x1000".
// Malloc counts are deterministic and are what CI may gate on; time is noisy on a shared machine. Encode and
// decode run through a warm SurfaceCodecContext (one thread), so their malloc count per frame must be 0.
import Benchmark
import Foundation
import FrameBus
import ImageSources

private let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Corpus")

private struct Frame: @unchecked Sendable {
    // @unchecked: the buffers are only used by the benchmark closures, which package-benchmark runs one at a time.
    let name: String
    let source: PixelBuffer
    let compressed: PixelBuffer
    let output: PixelBuffer
    let planes: [[UInt8]]
}

private func loadFrame(_ path: String, _ name: String, format: PixelFormat) -> Frame? {
    guard let image = try? RGBImage(contentsOfPNGFile: corpus.appendingPathComponent(path).path),
        let source = try? image.makePixelBuffer(pixelFormat: format),
        let compressed = try? SurfaceCodec.makeCompressedBuffer(
            width: source.width,
            height: source.height,
            format: format
        ),
        let output = try? PixelBuffer(width: source.width, height: source.height, pixelFormat: format)
    else { return nil }
    guard (try? source.lock([.readOnly])) != nil, let packed = try? source.packedBytes() else { return nil }
    try? source.unlock([.readOnly])
    var planes: [[UInt8]] = []
    var offset = 0
    for plane in format.planes {
        let count =
            source.width / plane.horizontalSubsampling * plane.bytesPerElement
            * (source.height / plane.verticalSubsampling)
        planes.append(Array(packed[offset..<offset + count]))
        offset += count
    }
    return Frame(name: name, source: source, compressed: compressed, output: output, planes: planes)
}

private let ratio = BenchmarkMetric.custom("ratio x1000", polarity: .prefersLarger, useScalingFactor: false)

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal, .cpuTotal],
        maxDuration: .seconds(2),
        maxIterations: 200
    )
    let single = SurfaceCodecContext(threadCount: 1)
    // The malloc count of a sample that does nothing: package-benchmark's own per-sample overhead, to subtract
    // from the codec's counts (which must equal it: zero allocations per frame).
    Benchmark("empty (malloc overhead)") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(0) }
    }
    // The same frame decoded 1000 times per sample: a per-frame allocation would show as ≥ 1000 here.
    if let frame = loadFrame("kodak/kodim23.png", "kodim23", format: .yuv420BiPlanarVideoRange8) {
        Benchmark("decode 420v kodim23 x1000", configuration: .init(maxIterations: 20)) { benchmark in
            for _ in 0..<1000 { try single.decompress(frame.compressed, into: frame.output) }
        } setup: {
            try single.compress(frame.source, into: frame.compressed)
            try single.decompress(frame.compressed, into: frame.output)
        }
        Benchmark("encode 420v kodim23 x1000", configuration: .init(maxIterations: 20)) { benchmark in
            for _ in 0..<1000 { try single.compress(frame.source, into: frame.compressed) }
        } setup: {
            try single.compress(frame.source, into: frame.compressed)
        }
        // Two threads: the context's own worker thread, so no allocation per frame either.
        let two = SurfaceCodecContext(threadCount: 2)
        Benchmark("encode 420v kodim23 x1000 2 threads", configuration: .init(maxIterations: 20)) { benchmark in
            for _ in 0..<1000 { try two.compress(frame.source, into: frame.compressed) }
        } setup: {
            try two.compress(frame.source, into: frame.compressed)
        }
        Benchmark("decode 420v kodim23 x1000 2 threads", configuration: .init(maxIterations: 20)) { benchmark in
            for _ in 0..<1000 { try two.decompress(frame.compressed, into: frame.output) }
        } setup: {
            try two.compress(frame.source, into: frame.compressed)
            try two.decompress(frame.compressed, into: frame.output)
        }
    }
    // Screen content takes other modes (LZ4, packed8LZ4): their paths must allocate nothing per frame either.
    if let frame = loadFrame("synthetic/ui_windows_1920x1080.png", "ui_windows", format: .yuv420BiPlanarVideoRange8) {
        Benchmark("decode 420v ui_windows x1000", configuration: .init(maxIterations: 5)) { benchmark in
            for _ in 0..<1000 { try single.decompress(frame.compressed, into: frame.output) }
        } setup: {
            try single.compress(frame.source, into: frame.compressed)
            try single.decompress(frame.compressed, into: frame.output)
        }
        Benchmark("encode 420v ui_windows x1000", configuration: .init(maxIterations: 5)) { benchmark in
            for _ in 0..<1000 { try single.compress(frame.source, into: frame.compressed) }
        } setup: {
            try single.compress(frame.source, into: frame.compressed)
        }
    }
    let sources = [("kodak/kodim23.png", "kodim23"), ("synthetic/ui_windows_1920x1080.png", "ui_windows")]
    for format in PixelFormat.baseFormats {
        for (path, name) in sources {
            guard let frame = loadFrame(path, name, format: format) else { continue }
            Benchmark(
                "encode \(format) \(name)",
                configuration: .init(metrics: [.wallClock, .throughput, .mallocCountTotal, .cpuTotal, ratio])
            ) { benchmark in
                // Warm-up outside the measurement: the context sizes its memory on the first frame.
                var statistics = try single.compress(frame.source, into: frame.compressed)
                benchmark.startMeasurement()
                for _ in benchmark.scaledIterations {
                    statistics = try single.compress(frame.source, into: frame.compressed)
                }
                benchmark.stopMeasurement()
                benchmark.measurement(ratio, Int(statistics.ratio * 1000))
            }
            Benchmark("decode \(format) \(name)") { benchmark in
                for _ in benchmark.scaledIterations {
                    try single.decompress(frame.compressed, into: frame.output)
                }
            } setup: {
                try single.compress(frame.source, into: frame.compressed)
                try single.decompress(frame.compressed, into: frame.output)
            }
            Benchmark(
                "lz4 encode \(format) \(name)",
                configuration: .init(metrics: [.wallClock, .throughput, .cpuTotal, ratio])
            ) { benchmark in
                var outputs = frame.planes.map { [UInt8](repeating: 0, count: PlainLZ4.bound($0.count)) }
                var total = 0
                for _ in benchmark.scaledIterations {
                    total = 0
                    for index in frame.planes.indices {
                        total += try PlainLZ4.compress(frame.planes[index], into: &outputs[index])
                    }
                }
                benchmark.measurement(ratio, frame.planes.map(\.count).reduce(0, +) * 1000 / max(total, 1))
            }
            Benchmark(
                "lz4 decode \(format) \(name)",
                configuration: .init(metrics: [.wallClock, .throughput, .cpuTotal])
            ) { benchmark in
                var compressed = frame.planes.map { [UInt8](repeating: 0, count: PlainLZ4.bound($0.count)) }
                var sizes: [Int] = []
                for index in frame.planes.indices {
                    sizes.append(try PlainLZ4.compress(frame.planes[index], into: &compressed[index]))
                }
                var outputs = frame.planes.map { [UInt8](repeating: 0, count: $0.count) }
                benchmark.startMeasurement()
                for _ in benchmark.scaledIterations {
                    for index in frame.planes.indices {
                        try PlainLZ4.decompress(compressed[index], count: sizes[index], into: &outputs[index])
                    }
                }
                benchmark.stopMeasurement()
            }
        }
    }
}
