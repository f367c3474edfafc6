import PixelBuffers
import Synchronization

/// A reusable codec: the same work as ``SurfaceCodec``'s functions, with a fixed thread count and memory kept
/// from one frame to the next, so that once warm (after the first frame of the largest size) it allocates
/// nothing per frame.
///
/// Make one per stream and keep it: a publisher encodes every frame through its context; a subscriber decodes
/// through its own. Calls on one context are serialised (a lock); use one context per thread that encodes or
/// decodes concurrently. ``decodeTileRows(of:into:verifiesChecksums:_:)`` holds the context while its `body`
/// runs: a call on the same context from that body throws ``CompressionError/Code-swift.struct/reentrantCall``
/// instead of deadlocking (use another context there; a body that waits for another thread using this context
/// would still wait for itself). A context with several threads keeps `threadCount - 1` threads of its own (the caller
/// is the last worker), started when it is made and ended when it is released.
///
/// ```swift
/// let codec = SurfaceCodecContext(threadCount: 2)
/// let statistics = try codec.compress(frame, into: compressed)
/// try codec.decompress(compressed, into: output)
/// ```
public final class SurfaceCodecContext: Sendable {
    /// Worker threads per call at most (a frame too small to pay for the hand-off runs on fewer); 1 runs on the
    /// calling thread.
    public let threadCount: Int
    /// The tile size the encoder uses.
    public let tileSize: SurfaceCodec.TileSize
    /// How hard the encoder searches.
    public let effort: SurfaceCodec.Effort
    let workspace: Mutex<CodecWorkspace>
    /// The thread running a ``decodeTileRows(of:into:verifiesChecksums:_:)`` body of this context, or 0.
    let bodyThread = Atomic<UInt>(0)

    /// Makes a context.
    ///
    /// - Parameters:
    ///   - threadCount: worker threads per call; 0 uses every online processor, 1 (the default) runs on the
    ///     calling thread.
    ///   - tileSize: the tile size the encoder uses (the decoder reads it from each surface).
    ///   - effort: how hard the encoder searches: ``SurfaceCodec/Effort/fast`` (the default) for live streams,
    ///     ``SurfaceCodec/Effort/best`` for offline encoding.
    public init(
        threadCount: Int = 1,
        tileSize: SurfaceCodec.TileSize = .default,
        effort: SurfaceCodec.Effort = .fast
    ) {
        self.threadCount = threadCount > 0 ? threadCount : System.processorCount
        self.tileSize = tileSize
        self.effort = effort
        self.workspace = Mutex(CodecWorkspace(threads: self.threadCount))
    }

    /// Makes a context whose calls split their work as `policy` says (tests: ``ParallelPolicy/alwaysSplit``).
    init(
        threadCount: Int,
        tileSize: SurfaceCodec.TileSize = .default,
        effort: SurfaceCodec.Effort = .fast,
        policy: ParallelPolicy
    ) {
        self.threadCount = threadCount > 0 ? threadCount : System.processorCount
        self.tileSize = tileSize
        self.effort = effort
        self.workspace = Mutex(CodecWorkspace(threads: self.threadCount, policy: policy))
    }

    /// Compresses a base-format buffer into a buffer of its compressed variant, losslessly; as
    /// ``SurfaceCodec/compress(_:into:options:)``.
    @discardableResult
    public func compress(
        _ source: PixelBuffer,
        into destination: PixelBuffer
    ) throws(CompressionError) -> SurfaceCodec.Statistics {
        let op = "SurfaceCodecContext.compress"
        guard !source.pixelFormat.isCompressed, destination.pixelFormat == source.pixelFormat.compressedVariant,
            destination.width == source.width, destination.height == source.height
        else {
            throw CompressionError(.formatMismatch, op + ": \(source.pixelFormat) into \(destination.pixelFormat)")
        }
        let grid = try SurfaceCodec.grid(
            width: source.width,
            height: source.height,
            format: source.pixelFormat,
            tileSize: tileSize,
            effort: effort,
            op
        )
        try refuseReentry(op)
        let threads = threadCount
        let used = try workspace.withLock { (workspace) throws(CompressionError) -> Int in
            try CodecDriver.compress(source, into: destination, grid: grid, threads: threads, workspace: workspace)
        }
        return SurfaceCodec.Statistics(rawByteCount: grid.rawImageByteCount, compressedByteCount: used)
    }

    /// Decompresses a compressed buffer into a buffer of its base format, bit-exact; as
    /// ``SurfaceCodec/decompress(_:into:options:)``.
    public func decompress(
        _ compressed: PixelBuffer,
        into destination: PixelBuffer,
        verifiesChecksums: Bool = true
    ) throws(CompressionError) {
        try refuseReentry("SurfaceCodecContext.decompress")
        let threads = threadCount
        try workspace.withLock { (workspace) throws(CompressionError) in
            try CodecDriver.decompress(
                compressed,
                into: destination,
                threads: threads,
                verifyChecksums: verifiesChecksums,
                workspace: workspace
            )
        }
    }

    /// Decodes a few tile rows at a time into `scratch`; as
    /// ``SurfaceCodec/decodeTileRows(of:into:options:_:)``.
    ///
    /// The context is held while `body` runs (its workspace keeps the parsed table between batches): a call on
    /// this context from `body` throws ``CompressionError/Code-swift.struct/reentrantCall``, having done nothing.
    public func decodeTileRows(
        of compressed: PixelBuffer,
        into scratch: PixelBuffer,
        verifiesChecksums: Bool = true,
        _ body: (_ rows: Range<Int>) throws -> Void
    ) throws {
        try refuseReentry("SurfaceCodecContext.decodeTileRows")
        let threads = threadCount
        let thread = System.currentThread
        try workspace.withLock { workspace in
            try CodecDriver.decodeTileRows(
                of: compressed,
                into: scratch,
                threads: threads,
                verifyChecksums: verifiesChecksums,
                workspace: workspace
            ) { rows in
                // Marked only while the body runs, on the caller's thread (which holds the lock): a call from the
                // body finds it and throws; any other thread sees another identity and waits for the lock.
                bodyThread.store(thread, ordering: .releasing)
                defer { bodyThread.store(0, ordering: .releasing) }
                try body(rows)
            }
        }
    }

    /// Throws ``CompressionError/Code-swift.struct/reentrantCall`` when the calling thread is running a
    /// ``decodeTileRows(of:into:verifiesChecksums:_:)`` body of this context (its lock is held: waiting for it
    /// would never end).
    func refuseReentry(_ op: String) throws(CompressionError) {
        if bodyThread.load(ordering: .acquiring) == System.currentThread {
            throw CompressionError(
                .reentrantCall,
                op + ": called from the body of this context's decodeTileRows (use another context there)"
            )
        }
    }
}
