import Foundation
import PixelBuffers
import SampleBuffers

/// Publishes frames to subscribers in other processes, zero-copy: AVCaptureVideoDataOutput's producer side.
///
/// A publisher listens on a Unix `SOCK_SEQPACKET` socket at a path. Each subscriber receives a surface's
/// descriptors once, then a small fixed-size descriptor per frame (docs/PROTOCOL.md). The publisher keeps a
/// reference to every buffer a subscriber holds, so a pool buffer returns to its pool only when no subscriber
/// holds it; when a subscriber goes away (even by `kill -9`), everything it held is released at once. A
/// subscriber that never releases (a hoarder) holds at most what the ``HoldingPolicy`` granted it, so everyone else
/// keeps the full frame rate (docs/PROTOCOL.md §7.3).
///
/// ```swift
/// let pool = try PixelBufferPool(attributes: .init(width: 1920, height: 1080,
///                                                  pixelFormat: .yuv420BiPlanarVideoRange8, allocationThreshold: 34))
/// let path = try SocketPath.default()                 // $XDG_RUNTIME_DIR/framebus.sock
/// let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
/// let buffer = try await publisher.nextPixelBuffer(from: pool)   // waits while subscribers hold every buffer
/// // ... fill buffer ...
/// try publisher.publish(buffer, timing: SampleTimingInfo(presentationTimeStamp: HostClock.now))
/// ```
///
/// The protocol logic is ``PublisherStateMachine``; its IO layer is `PublisherCore`: `publish` fans out the published
/// format on the caller's thread, a conversion thread makes and fans out the other formats (``cost`` says when it
/// falls behind), and one thread accepts connections, reads releases and keeps time. That thread holds only the
/// core, never this object, so dropping the last reference to a publisher ends its stream at once: `deinit`
/// stops the core (END_OF_STREAM to every subscriber, the socket file removed) and rings the loop thread's
/// doorbell, and a new publisher can listen at the same path right away.
public final class Publisher: Sendable {
    /// The configuration it was made with.
    public let configuration: Configuration
    /// Random per publisher instance; subscribers see a new one after a restart.
    public let streamID: UInt64
    /// Everything the loop thread needs. The thread holds it strongly, and this object only through `core`, so the
    /// user's last reference decides when the stream ends.
    let core: PublisherCore

    /// Starts listening at `configuration.path`, replacing a stale socket file.
    ///
    /// - Throws: ``FrameBusError/Code-swift.struct/invalidArgument`` for a configuration out of range (see
    ///   ``Configuration/validate()``) or a path too long, ``FrameBusError/Code-swift.struct/addressInUse`` if a
    ///   live publisher listens there, ``FrameBusError/Code-swift.struct/systemCall``.
    public init(configuration: Configuration) throws(FrameBusError) {
        try configuration.validate()
        self.configuration = configuration
        self.streamID = UInt64.random(in: 1...UInt64.max)
        let core = try PublisherCore(configuration: configuration, streamID: streamID)
        self.core = core
        do throws(FrameBusError) {
            try core.startPressureMonitor()
        } catch {
            core.stop()
            throw error
        }
        let thread = Thread {
            while core.runOnce() {}
        }
        thread.name = "framebus.publisher"
        thread.start()
    }

    deinit {
        // Ends the stream now: stop() rings the doorbell, so the loop thread wakes from its poll and ends, releasing
        // the core; the socket file is already gone when deinit returns.
        core.stop()
        core.unfollowPools()  // also the pools followed after stop()
    }

    // MARK: Buffers

    /// Takes a free buffer from `pool` for the next frame, without waiting.
    ///
    /// A failed request uses no sequence number and tells no subscriber anything: if the producer gives up on the
    /// frame, it says so with ``reportDroppedFrames(reason:count:)``. The publisher learns the pool's capacity
    /// (its held-frame budget, docs/PROTOCOL.md §7.3) and retires the pool's surfaces in every subscriber when the
    /// pool frees them.
    ///
    /// - Throws: ``FrameBusError/Code-swift.struct/outOfBuffers`` when every buffer is in use (wait with
    ///   ``nextPixelBuffer(from:)`` instead); ``FrameBusError/Code-swift.struct/resourceFailure`` if the pool
    ///   cannot make a surface.
    public func makePixelBuffer(from pool: PixelBufferPool) throws(FrameBusError) -> PixelBuffer {
        try core.makePixelBuffer(from: pool)
    }

    /// Waits for a free buffer from `pool` (CoreVideo's free-buffer notification, as a suspension).
    ///
    /// Subscribers together hold at most the held-frame budget (``HoldingPolicy``), so a buffer becomes free as soon
    /// as the producer's previous frames are released or superseded. Cancelling the task ends the wait.
    ///
    /// - Throws: ``FrameBusError/Code-swift.struct/closed`` after ``stop()`` or when the task is cancelled (message
    ///   "cancelled"), ``FrameBusError/Code-swift.struct/resourceFailure`` if the pool cannot make a surface.
    public func nextPixelBuffer(from pool: PixelBufferPool) async throws(FrameBusError) -> PixelBuffer {
        try await core.nextPixelBuffer(from: pool)
    }

    // MARK: Publishing

    /// Records that `count` frames were lost before they could be published (upstream loss), and tells every
    /// subscriber with one coalesced DROP.
    ///
    /// Uses `count` sequence numbers. For `.discontinuity` the next published frame also carries the
    /// discontinuity flag.
    ///
    /// - Returns: the sequence numbers used, or nil after ``stop()``.
    @discardableResult
    public func reportDroppedFrames(reason: DroppedFrameReason, count: Int = 1) -> ClosedRange<UInt64>? {
        core.reportDroppedFrames(reason: reason, count: count)
    }

    /// Publishes a frame to every subscriber.
    ///
    /// Subscribers that hold all they were granted get a DROP with `outOfBuffers` instead. The buffer stays referenced
    /// until every subscriber that received it has released it; do not write into it after publishing (take a
    /// new one from the pool for the next frame).
    ///
    /// - Parameters:
    ///   - buffer: the frame, in one of the configured formats or a format whose compressed variant (or base) is
    ///     configured.
    ///   - timing: presentation time and duration (capture time on `CLOCK_MONOTONIC`, ``HostClock``).
    ///   - discontinuity: the producer lost frames or was reconfigured before this one.
    /// - Returns: the frame's sequence number.
    /// - Throws: ``FrameBusError/Code-swift.struct/closed`` after ``stop()``;
    ///   ``FrameBusError/Code-swift.struct/invalidArgument`` for a format that cannot serve the configured ones.
    @discardableResult
    public func publish(
        _ buffer: PixelBuffer,
        timing: SampleTimingInfo = .invalid,
        discontinuity: Bool = false
    ) throws(FrameBusError) -> UInt64 {
        try core.publish(buffer, timing: timing, discontinuity: discontinuity)
    }

    // MARK: Statistics and lifetime

    /// A snapshot of the counters.
    public var statistics: PublisherStatistics {
        core.statistics
    }

    /// How many subscribers have completed their handshake.
    public var subscriberCount: Int { core.subscriberCount }

    /// Connections accepted and waiting for their HELLO.
    public var pendingHandshakeCount: Int { core.pendingHandshakeCount }

    /// Frames held by subscribers now.
    public var heldFrameCount: Int { core.heldFrameCount }

    /// Sends END_OF_STREAM to every subscriber, closes every connection, stops listening and removes the socket
    /// file. Idempotent, and never waits: the loop thread ends on its own at its next wake-up, which this rings for.
    /// Dropping the last reference to the publisher does the same.
    public func stop() {
        core.stop()
    }
}
