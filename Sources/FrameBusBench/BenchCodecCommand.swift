import ArgumentParser
import CLZ4
import CZstd
import Foundation
import FrameBus
import ImageSources

#if canImport(Glibc)
import Glibc
#endif

/// `framebus bench codec`: ratio and speed of the lossless compressed formats against plain LZ4, same run.
package struct BenchCodecCommand: ParsableCommand {
    package static let configuration = CommandConfiguration(
        commandName: "codec",
        abstract: "Measure the lossless surface codec (ratio, encode/decode GB/s, CPU time) against plain LZ4.",
        discussion: """
            Each folder argument is one set (its PNG files); PNG files given directly form the set "files". \
            Without arguments the corpus next to the working directory (Corpus/kodak, Corpus/skimage, \
            Corpus/synthetic) is used. GB/s count raw frame bytes (10^9). Speeds are medians of --repetitions \
            runs per image on warm buffers; the machine may be shared, so expect noise.
            """
    )

    @Argument(help: "PNG files or folders of PNG files.")
    var paths: [String] = []

    @Option(help: "Threads for the all-cores runs (default: every online processor).")
    var threads: Int?

    @Option(help: "Formats to measure, comma separated.")
    var formats: String = "420v,420f,x420,xf20,BGRA"

    @Option(help: "Timed repetitions per image (the median counts).")
    var repetitions: Int = 5

    @Option(
        help: """
            Timed decode repetitions per image (default: --repetitions). Decoding costs about 1 % of encoding on \
            screen content, so many decode repetitions steady its median at little cost.
            """
    )
    var decodeRepetitions: Int?

    @Option(help: "Tile height in pixels.")
    var tileHeight: Int = SurfaceCodec.TileSize.default.height

    @Option(help: "Tile width in pixels (0: full-width bands).")
    var tileWidth: Int = SurfaceCodec.TileSize.default.width ?? 0

    @Option(help: "Write the results as JSON to this file.")
    var json: String?

    @Option(help: "Reference codecs beside framebus, comma separated (any of lz4, lz4hc, zstd1; lz4 is always run).")
    var references: String = "lz4,lz4hc,zstd1"

    @Option(
        help: """
            Encoder effort: fast (the default, for live streams), best (offline), or both (one row each, same run: \
            framebus is fast, framebus-best is best).
            """
    )
    var effort: String = "fast"

    @Option(
        help: """
            Sets (folder names) that hold screen content, comma separated; the other sets count as photographs. The \
            summary reports the two kinds apart.
            """
    )
    var screenSets: String = "synthetic,screens"

    @Option(help: "Frames in the memory comparison (compressed pool vs raw pool of 1080p photographs); 0 skips it.")
    var memoryFrames: Int = 32

    package init() {}

    package func run() throws {
        let sets = try Self.collectSets(paths)
        guard !sets.isEmpty else { throw ValidationError("no PNG images found") }
        let formatList = try formats.split(separator: ",").map { try PixelFormat(String($0)) }
        let allCores = threads ?? ProcessInfo.processInfo.activeProcessorCount
        var referenceList: [ReferenceCodec] = [.lz4]
        for name in references.split(separator: ",") {
            guard let reference = ReferenceCodec(rawValue: String(name)) else {
                throw ValidationError("unknown reference codec \(name) (lz4, lz4hc, zstd1)")
            }
            if !referenceList.contains(reference) { referenceList.append(reference) }
        }
        let tileSize = SurfaceCodec.TileSize(width: tileWidth > 0 ? tileWidth : nil, height: tileHeight)
        let efforts: [SurfaceCodec.Effort]
        switch effort {
        case "both": efforts = [.fast, .best]
        default:
            guard let one = SurfaceCodec.Effort(rawValue: effort) else {
                throw ValidationError("unknown effort \(effort) (fast, best, both)")
            }
            efforts = [one]
        }
        let screens = Set(screenSets.split(separator: ",").map(String.init))
        // The codec's kernel tier: the best this processor runs, or the one FRAMEBUS_CODEC_KERNELS names
        // (docs/BENCHMARKS.md).
        let available = Kernels.availableTiers.map(\.rawValue).joined(separator: ", ")
        // Within the AVX2 tier, two kernels have AVX-512 variants, each chosen where the processor runs it.
        let avx2 = Kernels.selectedTier == .avx2
        let packed8 = avx2 && Kernels.decodesPacked8WithAVX512 ? "; packed8 decode: AVX-512" : ""
        let checksums = avx2 && Kernels.hashesWithAVX512 ? "; checksums: AVX-512" : ""
        print("Codec kernels: \(Kernels.selectedTier.rawValue) (available here: \(available))\(packed8)\(checksums)")
        var results: [Result] = []
        for (setName, files) in sets {
            let images = try files.map { try RGBImage(contentsOfPNGFile: $0) }
            for format in formatList {
                let frames = try images.map { try $0.makePixelBuffer(pixelFormat: format) }
                let threadCounts = allCores > 1 ? [1, allCores] : [1]
                for effort in efforts {
                    for threadCount in threadCounts {
                        var result = try Self.measureCodec(
                            frames,
                            set: setName,
                            format: format,
                            threads: threadCount,
                            tileSize: tileSize,
                            effort: effort,
                            repetitions: repetitions,
                            decodeRepetitions: decodeRepetitions ?? repetitions
                        )
                        if efforts.count > 1, effort == .best { result.codec = "framebus-best" }
                        results.append(result)
                    }
                }
                for reference in referenceList {
                    results.append(
                        try Self.measureReference(
                            reference,
                            frames,
                            set: setName,
                            format: format,
                            repetitions: repetitions,
                            decodeRepetitions: decodeRepetitions ?? repetitions
                        )
                    )
                }
            }
        }
        for index in results.indices {
            let name = results[index].set
            results[index].content = screens.contains(name) || name.contains("screen") ? "screen" : "photo"
        }
        Self.printTable(results)
        Self.printRelative(results)
        var memory: [MemoryResult] = []
        if memoryFrames > 0, let photos = sets.first(where: { $0.0 == "kodak" }) ?? sets.first {
            let images = try photos.1.map { try RGBImage(contentsOfPNGFile: $0) }
            for format in formatList {
                memory.append(try Self.measureMemory(images, set: photos.0, format: format, frames: memoryFrames))
            }
            Self.printMemory(memory)
        }
        if let json {
            let report = Report(
                machine: "\(ProcessInfo.processInfo.activeProcessorCount) cores, shared (timings are noisy)",
                tileWidth: tileSize.width ?? 0,
                tileHeight: tileSize.height,
                repetitions: repetitions,
                kernels: Kernels.selectedTier.rawValue,
                results: results,
                memory: memory
            )
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(report).write(to: URL(fileURLWithPath: json))
            print("wrote \(json)")
        }
    }

    // MARK: Results

    struct Report: Codable {
        var machine: String
        var tileWidth: Int
        var tileHeight: Int
        var repetitions: Int
        /// The codec's kernel tier in this run (avx2, sse41, neon or portable); absent in older reports.
        var kernels: String?
        var results: [Result]
        var memory: [MemoryResult]
    }

    /// Resident shared memory of a pool of compressed frames against a pool of raw frames.
    struct MemoryResult: Codable {
        var set: String
        var format: String
        var frames: Int
        var width: Int
        var height: Int
        /// Bytes of the raw pool's surfaces that are resident (they are populated when made).
        var rawResidentBytes: Int
        /// Bytes the compressed surfaces are allocated with (the worst case; all of it was resident before v2).
        var compressedAllocatedBytes: Int
        /// Bytes of the compressed surfaces that are resident after encoding one frame into each.
        var compressedResidentBytes: Int
        /// The sum of the frames' bytes used.
        var compressedBytesUsed: Int
        /// RssShmem of this process (/proc/self/status) grew by this much while the compressed pool was made.
        var compressedRssShmemDelta: Int
        var rawRssShmemDelta: Int
    }

    struct Result: Codable {
        var codec: String
        var set: String
        var format: String
        var images: Int
        var threads: Int
        var rawBytes: Int
        var compressedBytes: Int
        var ratio: Double
        var encodeGBps: Double
        var decodeGBps: Double
        /// CPU time (all threads) per frame, milliseconds.
        var encodeCPUMillisecondsPerFrame: Double
        var decodeCPUMillisecondsPerFrame: Double
        /// Per frame: what the producer writes and each consumer reads (raw vs compressed).
        var rawBytesPerFrame: Int
        var producerBytesWrittenPerFrame: Int
        var consumerBytesReadPerFrame: Int
        /// Median wall time of one encode per frame, milliseconds (one frame after another on `threads` threads).
        var encodeMillisecondsPerFrame: Double?
        /// The frame size when every image of the set has it (e.g. "1920x1080"), else "mixed".
        var frameSize: String?
        /// "screen" or "photo" (--screen-sets).
        var content: String?
    }

    // MARK: Measuring

    static func now() -> UInt64 { clockNanoseconds(CLOCK_MONOTONIC) }
    static func cpuNow() -> UInt64 { clockNanoseconds(CLOCK_PROCESS_CPUTIME_ID) }
    static func clockNanoseconds(_ clock: clockid_t) -> UInt64 {
        var spec = timespec()
        clock_gettime(clock, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// Median wall time and mean CPU time of `repetitions` runs of `body` (after one warm-up run).
    static func time(_ repetitions: Int, _ body: () throws -> Void) rethrows -> (wall: Double, cpu: Double) {
        try body()
        var walls: [UInt64] = []
        let cpuStart = cpuNow()
        for _ in 0..<max(1, repetitions) {
            let start = now()
            try body()
            walls.append(now() - start)
        }
        let cpu = Double(cpuNow() - cpuStart) / Double(max(1, repetitions))
        walls.sort()
        return (Double(walls[walls.count / 2]), cpu)
    }

    static func rawByteCount(_ frame: PixelBuffer) -> Int {
        frame.pixelFormat.planes.map {
            frame.width / $0.horizontalSubsampling * $0.bytesPerElement * (frame.height / $0.verticalSubsampling)
        }.reduce(0, +)
    }

    /// Bytes of a buffer's mapping that are resident (`mincore(2)`, whole pages).
    static func residentByteCount(_ buffer: PixelBuffer) throws -> Int {
        try buffer.lock([.readOnly])
        defer { try? buffer.unlock([.readOnly]) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        return buffer.surface.withUnsafeBytes { bytes in
            let pages = (bytes.count + page - 1) / page
            var vector = [UInt8](repeating: 0, count: pages)
            guard mincore(UnsafeMutableRawPointer(mutating: bytes.baseAddress!), bytes.count, &vector) == 0 else {
                return -1
            }
            return vector.reduce(0) { $0 + Int($1 & 1) } * page
        }
    }

    /// RssShmem of this process in bytes (/proc/self/status), or 0 if unreadable.
    static func rssShmem() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("RssShmem:") {
            let fields = line.split(separator: " ")
            if fields.count >= 2, let kilobytes = Int(fields[1]) { return kilobytes * 1024 }
        }
        return 0
    }

    /// A pool of `frames` compressed 1080p frames (each a different mosaic of the set's photographs, encoded
    /// once) against a pool of as many raw frames: resident bytes of each.
    static func measureMemory(
        _ images: [RGBImage],
        set: String,
        format: PixelFormat,
        frames: Int
    ) throws
        -> MemoryResult
    {
        let width = 1920
        let height = 1080
        let codec = SurfaceCodecContext(threadCount: 1)
        let pool = try SurfaceCodec.makeCompressedPool(width: width, height: height, format: format)
        var compressed: [PixelBuffer] = []
        var used = 0
        let before = rssShmem()
        for index in 0..<frames {
            let rotated = Array(images[(index % images.count)...] + images[..<(index % images.count)])
            let mosaic = try RGBImage.mosaic(of: rotated, width: width, height: height)
            let frame = try mosaic.makePixelBuffer(pixelFormat: format)
            let buffer = try pool.makePixelBuffer()
            used += try codec.compress(frame, into: buffer).compressedByteCount
            compressed.append(buffer)
        }
        let compressedDelta = rssShmem() - before
        let compressedResident = try compressed.map(residentByteCount).reduce(0, +)
        let allocated = compressed.map(\.surface.allocationSize).reduce(0, +)
        let rawPool = try PixelBufferPool(attributes: .init(width: width, height: height, pixelFormat: format))
        let rawBefore = rssShmem()
        var raw: [PixelBuffer] = []
        for _ in 0..<frames { raw.append(try rawPool.makePixelBuffer()) }
        let rawDelta = rssShmem() - rawBefore
        let rawResident = try raw.map(residentByteCount).reduce(0, +)
        return MemoryResult(
            set: set,
            format: format.name,
            frames: frames,
            width: width,
            height: height,
            rawResidentBytes: rawResident,
            compressedAllocatedBytes: allocated,
            compressedResidentBytes: compressedResident,
            compressedBytesUsed: used,
            compressedRssShmemDelta: compressedDelta,
            rawRssShmemDelta: rawDelta
        )
    }

    static func printMemory(_ results: [MemoryResult]) {
        func mb(_ bytes: Int) -> String { String(format: "%.1f", Double(bytes) / 1e6) }
        let header = [
            "set", "format", "frames", "size", "raw pool resident MB", "compressed allocated MB",
            "compressed resident MB", "bytes used MB", "resident / raw", "RssShmem Δ raw MB", "RssShmem Δ compr. MB",
        ]
        let rows = results.map { r in
            [
                r.set, r.format, String(r.frames), "\(r.width)x\(r.height)", mb(r.rawResidentBytes),
                mb(r.compressedAllocatedBytes), mb(r.compressedResidentBytes), mb(r.compressedBytesUsed),
                String(format: "%.3f", Double(r.compressedResidentBytes) / Double(max(r.rawResidentBytes, 1))),
                mb(r.rawRssShmemDelta), mb(r.compressedRssShmemDelta),
            ]
        }
        print("")
        print("Memory: a pool of compressed frames (1080p mosaics of the set's photographs) against a raw pool.")
        print(TextTable.render(header: header, rows: rows))
        print("Resident: pages of the surfaces' mappings in memory (mincore). Compressed surfaces are allocated for")
        print("the worst case; only the pages up to each frame's bytes used are committed.")
    }

    static func measureCodec(
        _ frames: [PixelBuffer],
        set: String,
        format: PixelFormat,
        threads: Int,
        tileSize: SurfaceCodec.TileSize,
        effort: SurfaceCodec.Effort = .fast,
        repetitions: Int,
        decodeRepetitions: Int
    ) throws -> Result {
        let codec = SurfaceCodecContext(threadCount: threads, tileSize: tileSize, effort: effort)
        var raw = 0
        var compressedTotal = 0
        var encodeWall = 0.0
        var decodeWall = 0.0
        var encodeCPU = 0.0
        var decodeCPU = 0.0
        for frame in frames {
            let compressed = try SurfaceCodec.makeCompressedBuffer(
                width: frame.width,
                height: frame.height,
                format: format,
                tileSize: tileSize
            )
            let output = try PixelBuffer(width: frame.width, height: frame.height, pixelFormat: format)
            var used = 0
            let encode = try time(repetitions) {
                used = try codec.compress(frame, into: compressed).compressedByteCount
            }
            let decode = try time(decodeRepetitions) {
                try codec.decompress(compressed, into: output)
            }
            try frame.lock([.readOnly])
            try output.lock([.readOnly])
            let exact = try frame.packedBytes() == output.packedBytes()
            try output.unlock([.readOnly])
            try frame.unlock([.readOnly])
            guard exact else { throw ValidationError("round trip of a \(format) frame in \(set) is not bit-exact") }
            raw += rawByteCount(frame)
            compressedTotal += used
            encodeWall += encode.wall
            decodeWall += decode.wall
            encodeCPU += encode.cpu
            decodeCPU += decode.cpu
        }
        return result(
            codec: "framebus",
            set: set,
            format: format,
            frames: frames,
            images: frames.count,
            threads: threads,
            raw: raw,
            compressed: compressedTotal,
            encodeWall: encodeWall,
            decodeWall: decodeWall,
            encodeCPU: encodeCPU,
            decodeCPU: decodeCPU
        )
    }

    /// The reference codecs, each run on every plane's packed bytes, single-threaded: plain LZ4 (default level),
    /// LZ4 HC at level 9 (decoded by the same LZ4 decoder), and zstd at level 1 (the executable links libzstd; the
    /// FrameBus library does not).
    enum ReferenceCodec: String, CaseIterable {
        case lz4
        case lz4hc
        case zstd1

        /// Compresses `source` into `destination` (at least `bound` bytes); returns the size, 0 on failure.
        func compress(_ source: [UInt8], into destination: inout [UInt8], context: OpaquePointer?) -> Int {
            source.withUnsafeBytes { input in
                destination.withUnsafeMutableBytes { output in
                    let src = input.baseAddress!
                    let dst = output.baseAddress!
                    switch self {
                    case .lz4:
                        return Int(
                            LZ4_compress_default(
                                src.assumingMemoryBound(to: CChar.self),
                                dst.assumingMemoryBound(to: CChar.self),
                                Int32(input.count),
                                Int32(output.count)
                            )
                        )
                    case .lz4hc:
                        return Int(
                            LZ4_compress_HC(
                                src.assumingMemoryBound(to: CChar.self),
                                dst.assumingMemoryBound(to: CChar.self),
                                Int32(input.count),
                                Int32(output.count),
                                9
                            )
                        )
                    case .zstd1:
                        let written = ZSTD_compressCCtx(context, dst, output.count, src, input.count, 1)
                        return ZSTD_isError(written) != 0 ? 0 : written
                    }
                }
            }
        }

        /// Decompresses the first `count` bytes of `source` into `destination`; returns the size, −1 on failure.
        func decompress(
            _ source: [UInt8],
            count: Int,
            into destination: inout [UInt8],
            context: OpaquePointer?
        ) -> Int {
            source.withUnsafeBytes { input in
                destination.withUnsafeMutableBytes { output in
                    let src = input.baseAddress!
                    let dst = output.baseAddress!
                    switch self {
                    case .lz4, .lz4hc:
                        return Int(
                            LZ4_decompress_safe(
                                src.assumingMemoryBound(to: CChar.self),
                                dst.assumingMemoryBound(to: CChar.self),
                                Int32(count),
                                Int32(output.count)
                            )
                        )
                    case .zstd1:
                        let read = ZSTD_decompressDCtx(context, dst, output.count, src, count)
                        return ZSTD_isError(read) != 0 ? -1 : read
                    }
                }
            }
        }

        func bound(_ count: Int) -> Int {
            self == .zstd1 ? ZSTD_compressBound(count) : Int(LZ4_compressBound(Int32(clamping: count)))
        }
    }

    /// A reference codec on each plane's packed bytes, single-threaded.
    static func measureReference(
        _ codec: ReferenceCodec,
        _ frames: [PixelBuffer],
        set: String,
        format: PixelFormat,
        repetitions: Int,
        decodeRepetitions: Int
    ) throws -> Result {
        let compressContext = codec == .zstd1 ? ZSTD_createCCtx() : nil
        let decompressContext = codec == .zstd1 ? ZSTD_createDCtx() : nil
        defer {
            if codec == .zstd1 {
                ZSTD_freeCCtx(compressContext)
                ZSTD_freeDCtx(decompressContext)
            }
        }
        var raw = 0
        var compressedTotal = 0
        var encodeWall = 0.0
        var decodeWall = 0.0
        var encodeCPU = 0.0
        var decodeCPU = 0.0
        for frame in frames {
            try frame.lock([.readOnly])
            let packed = try frame.packedBytes()
            try frame.unlock([.readOnly])
            var planes: [[UInt8]] = []
            var offset = 0
            for plane in format.planes {
                let count =
                    frame.width / plane.horizontalSubsampling * plane.bytesPerElement
                    * (frame.height / plane.verticalSubsampling)
                planes.append(Array(packed[offset..<offset + count]))
                offset += count
            }
            var compressed = planes.map { [UInt8](repeating: 0, count: codec.bound($0.count)) }
            var sizes = [Int](repeating: 0, count: planes.count)
            var outputs = planes.map { [UInt8](repeating: 0, count: $0.count) }
            let encode = try time(repetitions) {
                for index in planes.indices {
                    sizes[index] = codec.compress(planes[index], into: &compressed[index], context: compressContext)
                    guard sizes[index] > 0 else { throw ValidationError("\(codec.rawValue) compression failed") }
                }
            }
            let decode = try time(decodeRepetitions) {
                for index in planes.indices {
                    let read = codec.decompress(
                        compressed[index],
                        count: sizes[index],
                        into: &outputs[index],
                        context: decompressContext
                    )
                    guard read == planes[index].count else {
                        throw ValidationError("\(codec.rawValue) decompression failed")
                    }
                }
            }
            guard outputs == planes else { throw ValidationError("\(codec.rawValue) round trip failed") }
            raw += packed.count
            compressedTotal += sizes.reduce(0, +)
            encodeWall += encode.wall
            decodeWall += decode.wall
            encodeCPU += encode.cpu
            decodeCPU += decode.cpu
        }
        return result(
            codec: codec.rawValue,
            set: set,
            format: format,
            frames: frames,
            images: frames.count,
            threads: 1,
            raw: raw,
            compressed: compressedTotal,
            encodeWall: encodeWall,
            decodeWall: decodeWall,
            encodeCPU: encodeCPU,
            decodeCPU: decodeCPU
        )
    }

    static func result(
        codec: String,
        set: String,
        format: PixelFormat,
        frames: [PixelBuffer],
        images: Int,
        threads: Int,
        raw: Int,
        compressed: Int,
        encodeWall: Double,
        decodeWall: Double,
        encodeCPU: Double,
        decodeCPU: Double
    ) -> Result {
        let sizes = Set(frames.map { "\($0.width)x\($0.height)" })
        return Result(
            codec: codec,
            set: set,
            format: format.name,
            images: images,
            threads: threads,
            rawBytes: raw,
            compressedBytes: compressed,
            ratio: Double(raw) / Double(max(compressed, 1)),
            encodeGBps: Double(raw) / max(encodeWall, 1),
            decodeGBps: Double(raw) / max(decodeWall, 1),
            encodeCPUMillisecondsPerFrame: encodeCPU / 1e6 / Double(images),
            decodeCPUMillisecondsPerFrame: decodeCPU / 1e6 / Double(images),
            rawBytesPerFrame: raw / max(images, 1),
            producerBytesWrittenPerFrame: compressed / max(images, 1),
            consumerBytesReadPerFrame: compressed / max(images, 1),
            encodeMillisecondsPerFrame: encodeWall / 1e6 / Double(max(images, 1)),
            frameSize: sizes.count == 1 ? sizes.first : "mixed"
        )
    }

    // MARK: Input and output

    static func collectSets(_ paths: [String]) throws -> [(String, [String])] {
        let manager = FileManager.default
        var arguments = paths
        if arguments.isEmpty {
            arguments = ["kodak", "skimage", "synthetic"].map { "Corpus/\($0)" }.filter {
                manager.fileExists(atPath: $0)
            }
        }
        var sets: [(String, [String])] = []
        var loose: [String] = []
        for path in arguments {
            var isDirectory: ObjCBool = false
            guard manager.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw ValidationError("no such file or folder: \(path)")
            }
            if isDirectory.boolValue {
                let files = try manager.contentsOfDirectory(atPath: path).filter { $0.lowercased().hasSuffix(".png") }
                    .sorted().map { (path as NSString).appendingPathComponent($0) }
                if !files.isEmpty { sets.append(((path as NSString).lastPathComponent, files)) }
            } else {
                loose.append(path)
            }
        }
        if !loose.isEmpty { sets.append(("files", loose)) }
        return sets
    }

    static func printTable(_ results: [Result]) {
        func f(_ value: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", value) }
        let header = [
            "set", "format", "codec", "threads", "imgs", "ratio", "enc GB/s", "dec GB/s", "enc CPU ms/f",
            "dec CPU ms/f", "raw B/frame", "written B/frame", "read B/frame",
        ]
        let rows = results.map { r in
            [
                r.set, r.format, r.codec, String(r.threads), String(r.images), f(r.ratio, 3), f(r.encodeGBps),
                f(r.decodeGBps), f(r.encodeCPUMillisecondsPerFrame, 3), f(r.decodeCPUMillisecondsPerFrame, 3),
                String(r.rawBytesPerFrame), String(r.producerBytesWrittenPerFrame), String(r.consumerBytesReadPerFrame),
            ]
        }
        print(TextTable.render(header: header, rows: rows))
        print("Raw frames: the producer writes and every consumer reads raw B/frame; compressed: the bytes used.")
    }
}

extension BenchCodecCommand {
    /// Per set and format, one thread: each codec's ratio and its encode and decode speed as multiples of plain
    /// LZ4's in the same run (the figures to compare across runs on a shared machine).
    static func printRelative(_ results: [Result]) {
        func f(_ value: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", value) }
        var rows: [[String]] = []
        for kind in ["screen", "photo"] {
            for lz4 in results where lz4.codec == "lz4" && (lz4.content ?? "photo") == kind {
                for r in results where r.set == lz4.set && r.format == lz4.format {
                    let milliseconds = r.encodeMillisecondsPerFrame ?? 0
                    // All-cores rows only for the framebus codecs (the references run on one thread).
                    guard r.threads == 1 || r.codec.hasPrefix("framebus") else { continue }
                    rows.append([
                        kind, r.set, r.frameSize ?? "", r.format, r.codec, String(r.threads), f(r.ratio, 2),
                        f(milliseconds, 2), f(milliseconds > 0 ? 1000 / milliseconds : 0, 0),
                        f(r.encodeGBps / max(lz4.encodeGBps, 1e-12)), f(r.decodeGBps / max(lz4.decodeGBps, 1e-12)),
                    ])
                }
            }
        }
        print("")
        print("Relative to plain LZ4 (one thread) in the same run; screen sets first, then photographs:")
        print(
            TextTable.render(
                header: [
                    "content", "set", "frame", "format", "codec", "threads", "ratio", "enc ms/frame", "enc frames/s",
                    "enc × LZ4", "dec × LZ4",
                ],
                rows: rows
            )
        )
        print("enc ms/frame: median wall time of one frame's encode; frames/s: 1000 / that, what the threads sustain.")
    }
}
