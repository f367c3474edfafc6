import PixelBuffers
import SampleBuffers

/// One subscriber in ``PublisherStatistics``.
public struct SubscriberRecord: Hashable, Sendable {
    /// The publisher's number for this connection.
    public var id: UInt64
    /// The subscriber's process id (`SO_PEERCRED`).
    public var processID: Int32
    /// The subscriber's user id (`SO_PEERCRED`).
    public var userID: UInt32
    /// The format it receives (nil before its handshake).
    public var format: PixelFormat?
    /// Its queue depth (1 for latest-only).
    public var queueDepth: Int
    /// Whether it asked for latest-only delivery.
    public var isLatestOnly: Bool
    /// Most frames it may hold at once (its share of the pool, docs/PROTOCOL.md §7.3).
    public var maximumHeldFrames: Int = 0
    /// Its frames: delivered, dropped by reason, held now, bytes; `latency` is how long it holds frames.
    public var statistics: FrameStatistics
}

/// A publisher's counters.
public struct PublisherStatistics: Hashable, Sendable {
    /// Frames published (sequence numbers used), including dropped ones.
    public var published: Int = 0
    /// Frames dropped before fan-out, for every subscriber (reported upstream loss).
    public var droppedAtSource: [DroppedFrameReason: Int] = [:]
    /// Totals over every subscriber, past and present.
    public var total = FrameStatistics()
    /// The subscribers connected now.
    public var subscribers: [SubscriberRecord] = []
    /// Frames encoded or decoded for fan-out (each representation once per frame).
    public var conversions: Int = 0
}
