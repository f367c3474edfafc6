import FrameBus

/// Why a recorder is busy, as Apple's storage reports it: what is slowing it or about to.
public enum RecorderBusyReason: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// A write to the disk has been in flight for more than 100 ms.
    case writeStall
    /// A checkpoint's `fdatasync` is in flight.
    case syncing
    /// Space is being reserved ahead (`fallocate`).
    case reserving
    /// The backlog is more than half full: the disk is not keeping up.
    case backlogFilling
    /// `O_DIRECT` was refused, so writes go through the page cache (pushed out and dropped at each checkpoint).
    case bufferedWrites

    public var description: String { rawValue }
}

/// A snapshot of a recorder: what reached the disk, what did not and why, the backlog, and the space left.
public struct RecorderStatus: Sendable {
    /// The recording's track, once the first frame has arrived.
    public var track: RecordingTrack?
    /// Frames taken into the backlog.
    public var framesAccepted: UInt64 = 0
    /// Frames written to the file (every byte of them).
    public var framesWritten: UInt64 = 0
    /// Bytes written to the file.
    public var bytesWritten: Int64 = 0
    /// Bytes made durable by the last checkpoint (`fdatasync`).
    public var bytesDurable: Int64 = 0
    /// Frames that did not reach the disk, by reason.
    public var drops: [RecordingDropReason: UInt64] = [:]
    /// Bytes waiting in the backlog now.
    public var backlogBytes: Int = 0
    /// The backlog's size.
    public var backlogCapacity: Int = 0
    /// The most the backlog held at once.
    public var backlogPeakBytes: Int = 0
    /// Bytes the file can still grow by: space reserved and not written, plus the file system's free space.
    public var remainingBytes: Int64 = 0
    /// ``remainingBytes`` at the rate of the last seconds; nil before the rate is known.
    public var remainingSeconds: Double?
    /// Bytes per second written over the last seconds.
    public var bytesPerSecond: Double = 0
    /// Why the recorder is busy now.
    public var busyReasons: Set<RecorderBusyReason> = []
    /// Whether writes bypass the page cache.
    public var usesDirectIO = false
    /// Why writes are buffered although `O_DIRECT` was asked for.
    public var directIORefusal: String?
    /// Write latency percentiles (each `pwrite` of the I/O thread), in microseconds.
    public var writeLatencyP50Microseconds: UInt64 = 0
    /// The 99th percentile.
    public var writeLatencyP99Microseconds: UInt64 = 0
    /// Why the recording stopped writing (disk full, I/O error), if it did.
    public var failure: RecordingError?
    /// How the bus stream ended, if it did (``FrameBusError/Code-swift.struct/endOfStream`` when the publisher
    /// stopped).
    public var streamEnd: FrameBusError?
    /// Whether the recording has been closed.
    public var isClosed = false

    /// Every drop of the recording so far, in order (the drop log; neighbouring ranges of one reason merged).
    public var dropLog: [RecordingDrop] = []

    /// An empty status (nothing recorded yet): the baseline for differences.
    public init() {}

    /// The total of ``drops``.
    public var droppedFrames: UInt64 { drops.values.reduce(0, &+) }
}
