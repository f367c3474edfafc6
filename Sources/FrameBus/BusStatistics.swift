import Histogram
import SampleBuffers

/// Percentiles of a latency distribution, in nanoseconds (recorded with HdrHistogram, 2 significant digits: 1 % resolution).
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
///
/// One per subscriber session on each side, so it is kept small: 2 significant digits (1 % resolution, plenty for
/// monitor and statistics percentiles) up to 60 s takes about 30 KB of counts where 3 digits took about 220 KB, and
/// the histogram is only made at the first sample (a session that never gets a frame costs nothing).
struct LatencyRecorder {
    private static let highest: UInt64 = 60_000_000_000
    private var histogram: Histogram<UInt64>?

    mutating func record(nanoseconds: UInt64) {
        let value = min(max(nanoseconds, 1), Self.highest)
        // Taken out and put back, so it is recorded in place (once per frame: no copy of its counts, no retain).
        var recorder =
            histogram.take()
            ?? Histogram<UInt64>(highestTrackableValue: Self.highest, numberOfSignificantValueDigits: .two)
        _ = recorder.record(value)
        histogram = consume recorder
    }

    var summary: LatencySummary {
        guard let histogram, histogram.totalCount > 0 else { return LatencySummary() }
        return LatencySummary(
            count: Int(histogram.totalCount),
            p50: histogram.valueAtPercentile(50),
            p99: histogram.valueAtPercentile(99),
            p999: histogram.valueAtPercentile(99.9),
            maximum: histogram.max
        )
    }
}
