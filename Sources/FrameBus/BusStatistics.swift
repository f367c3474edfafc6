import Histogram
import SampleBuffers

/// Percentiles of a latency distribution, in nanoseconds (recorded with HdrHistogram, 3 significant digits).
public struct LatencySummary: Hashable, Sendable, CustomStringConvertible {
    /// How many samples were recorded.
    public var count: Int
    /// Median.
    public var p50: UInt64
    /// 99th percentile.
    public var p99: UInt64
    /// 99.9th percentile.
    public var p999: UInt64
    /// Largest sample.
    public var maximum: UInt64

    /// Creates a summary.
    public init(count: Int = 0, p50: UInt64 = 0, p99: UInt64 = 0, p999: UInt64 = 0, maximum: UInt64 = 0) {
        self.count = count
        self.p50 = p50
        self.p99 = p99
        self.p999 = p999
        self.maximum = maximum
    }

    public var description: String {
        func us(_ ns: UInt64) -> String { "\(ns / 1000).\(ns % 1000 / 100)" }
        return "n=\(count) p50=\(us(p50))µs p99=\(us(p99))µs p99.9=\(us(p999))µs max=\(us(maximum))µs"
    }
}

/// What happened to the frames of one stream, one subscriber, or a whole publisher.
public struct FrameStatistics: Hashable, Sendable {
    /// Frames handed to the consumer (subscriber side) or sent to subscribers (publisher side).
    public var delivered: Int = 0
    /// Frames dropped, by reason.
    public var dropped: [DroppedFrameReason: Int] = [:]
    /// Frames held now (sent and not yet released).
    public var heldNow: Int = 0
    /// Frames waiting for the consumer now (subscriber side).
    public var queueDepth: Int = 0
    /// Bytes of frame data delivered (the `bytesUsed` of every delivered frame).
    public var bytesDelivered: Int = 0
    /// Subscriber side: from `publish` to the consumer getting the frame. Publisher side: from sending a frame
    /// to its release (how long subscribers hold frames).
    public var latency = LatencySummary()

    /// Creates empty statistics.
    public init() {}

    /// Every drop, whatever the reason.
    public var droppedTotal: Int { dropped.values.reduce(0, +) }
}

/// Collects latency samples; not thread-safe (callers hold their own lock).
struct LatencyRecorder {
    private var histogram = Histogram<UInt64>(
        highestTrackableValue: 60_000_000_000,
        numberOfSignificantValueDigits: .three
    )

    mutating func record(nanoseconds: UInt64) {
        _ = histogram.record(min(max(nanoseconds, 1), 60_000_000_000))
    }

    var summary: LatencySummary {
        guard histogram.totalCount > 0 else { return LatencySummary() }
        return LatencySummary(
            count: Int(histogram.totalCount),
            p50: histogram.valueAtPercentile(50),
            p99: histogram.valueAtPercentile(99),
            p999: histogram.valueAtPercentile(99.9),
            maximum: histogram.max
        )
    }
}
