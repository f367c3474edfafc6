/// Memory the codec reuses from one frame to the next: per-worker scratch, the parallel encoder's staging area,
/// the private copy of a parsed table and the small bookkeeping arrays.
///
/// Every buffer grows to the largest frame seen and is then reused, so a warm workspace allocates nothing per
/// frame. A workspace is used by one call at a time (``SurfaceCodecContext`` holds it under a lock); the
/// workers of that call each use their own scratch.
///
/// @unchecked Sendable: a context keeps its workspace in a `Mutex` and uses it only inside `withLock`, one call
/// at a time; the one-shot API makes a fresh one per call.
@safe final class CodecWorkspace: @unchecked Sendable {
    /// One scratch area per worker, `scratchByteCount` bytes each, 64-byte aligned.
    private var scratchAreas: [UnsafeMutableRawPointer] = unsafe []
    private var scratchByteCount = 0
    /// The parallel encoder's private output, before its chunks are packed into the surface.
    private var stagingArea: UnsafeMutableRawPointer? = nil
    private var stagingByteCount = 0
    /// One worker's libzstd contexts each, made when a worker first needs them (layout version 8).
    private var zstdContexts: [ZstdContexts] = []

    var parseStorage = TileCodec.ParseStorage()
    var regionStart: [Int] = []
    var chunkFirstTile: [Int] = []
    var chunkUsed: [Int] = []
    var failures: [CompressionError?] = []
    /// Per worker of the last decode: the paths it took (``TileCodec/DecodeTally``); tests sum them.
    var decodeTallies: [TileCodec.DecodeTally] = []

    /// The sum of ``decodeTallies``.
    var decodeTally: TileCodec.DecodeTally { decodeTallies.reduce(TileCodec.DecodeTally(), +) }
    /// The parallel parts of encode and decode, filled per call (no closure to allocate).
    let encodeJob = EncodeChunksJob()
    let decodeJob = DecodeTilesJob()
    /// A context's threads; nil for the one-shot API, which uses libdispatch.
    let pool: WorkerPool?
    /// When a call splits its work between workers (``ParallelPolicy``).
    let policy: ParallelPolicy
    /// The workers the last encode and the last decode used (tests check that a split happened, or not).
    var lastEncodeWorkers = 0
    var lastDecodeWorkers = 0

    /// A workspace; with `threads` > 1 it keeps `threads - 1` threads of its own for parallel calls.
    init(threads: Int = 1, policy: ParallelPolicy = .default) {
        pool = threads > 1 ? WorkerPool(threadCount: threads - 1) : nil
        self.policy = policy
    }

    /// Runs `job` for `workers` workers: on this workspace's threads if it has them (no allocation), else
    /// on libdispatch's.
    func parallel(workers: Int, _ job: any ParallelWork) {
        if let pool, workers <= pool.availableWorkers {
            pool.run(workers: workers, job)
        } else {
            System.parallel(workers: workers) { worker in job.work(worker: worker) }
        }
    }

    deinit {
        while let area = unsafe scratchAreas.popLast() { unsafe area.deallocate() }
        unsafe stagingArea?.deallocate()
    }

    /// Scratch for `workers` workers of at least `byteCount` bytes each.
    func scratch(workers: Int, byteCount: Int) -> ScratchAreas {
        if byteCount > scratchByteCount {
            while let area = unsafe scratchAreas.popLast() { unsafe area.deallocate() }
            unsafe scratchAreas.removeAll(keepingCapacity: true)
            scratchByteCount = byteCount
        }
        while unsafe scratchAreas.count < workers {
            unsafe scratchAreas.append(.allocate(byteCount: scratchByteCount, alignment: 64))
        }
        while zstdContexts.count < workers { zstdContexts.append(ZstdContexts()) }
        return unsafe ScratchAreas(areas: scratchAreas, zstdContexts: zstdContexts)
    }

    /// A private area of at least `byteCount` bytes.
    func staging(byteCount: Int) -> UnsafeMutableRawPointer {
        if let area = unsafe stagingArea, stagingByteCount >= byteCount { return unsafe area }
        unsafe stagingArea?.deallocate()
        let area = UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: 64)
        unsafe stagingArea = area
        stagingByteCount = byteCount
        return unsafe area
    }

    /// Sets `array` to `count` copies of `value`, keeping its capacity.
    static func reset<T>(_ array: inout [T], count: Int, to value: T) {
        array.removeAll(keepingCapacity: true)
        array.append(contentsOf: repeatElement(value, count: count))
    }
}

/// The scratch areas of one call, handed to its workers (each uses only its own).
@unsafe struct ScratchAreas: @unchecked Sendable {
    // @unchecked: worker i touches only area i, and the call returns after every worker has finished.
    let areas: [UnsafeMutableRawPointer]
    let zstdContexts: [ZstdContexts]

    subscript(worker: Int) -> UnsafeMutableRawPointer { unsafe areas[worker] }

    /// Worker `worker`'s libzstd contexts.
    func zstd(_ worker: Int) -> ZstdContexts { unsafe zstdContexts[worker] }
}

/// How many workers an encode or a decode uses: the one place the codec decides whether a frame is worth
/// splitting between threads.
///
/// Handing work to a second thread and learning that it has finished costs a wake-up each way (a futex wake, then
/// the hypervisor waking a halted vCPU: about 20–25 µs each way on an idle 2-vCPU VM), and the second worker of a
/// decode with Up modes first decodes again the inner payload of the tile above its first tile. A one-thread decode
/// of a 768 × 512 420v frame (576 KiB raw) takes about 75 µs and was slower on two threads (0.68–0.92×), so a second
/// worker is added only when each worker gets at least ``minimumDecodeBytesPerWorker`` raw bytes
/// (``minimumEncodeBytesPerWorker`` for an encode, which costs about 15 times more per byte). Measured in
/// docs/BENCHMARKS.md ("The codec on two threads").
struct ParallelPolicy: Hashable, Sendable {
    /// Raw bytes (of the tiles decoded) each decoding worker must get; 0 splits whenever there are threads.
    var minimumDecodeBytesPerWorker: Int
    /// Raw bytes (of the image) each encoding worker must get; 0 splits whenever there are threads.
    var minimumEncodeBytesPerWorker: Int

    /// The measured thresholds.
    static let `default` = ParallelPolicy(
        minimumDecodeBytesPerWorker: 768 * 1024,
        minimumEncodeBytesPerWorker: 128 * 1024
    )
    /// Splits every call between as many workers as there are threads and units of work (tests: the
    /// multi-worker path on small images).
    static let alwaysSplit = ParallelPolicy(minimumDecodeBytesPerWorker: 0, minimumEncodeBytesPerWorker: 0)

    /// The workers of a decode of `tiles` tiles holding `rawBytes` raw bytes, on at most `threads` threads.
    func decodeWorkers(threads: Int, tiles: Int, rawBytes: Int) -> Int {
        Self.workers(threads: threads, units: tiles, rawBytes: rawBytes, perWorker: minimumDecodeBytesPerWorker)
    }

    /// The workers of an encode in `chunks` chunks of an image of `rawBytes` raw bytes, on at most `threads`
    /// threads.
    func encodeWorkers(threads: Int, chunks: Int, rawBytes: Int) -> Int {
        Self.workers(threads: threads, units: chunks, rawBytes: rawBytes, perWorker: minimumEncodeBytesPerWorker)
    }

    private static func workers(threads: Int, units: Int, rawBytes: Int, perWorker: Int) -> Int {
        let byWork = perWorker > 0 ? max(1, rawBytes / perWorker) : Int.max
        return max(1, min(threads, units, byWork))
    }
}
