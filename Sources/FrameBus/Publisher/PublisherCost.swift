import PixelBuffers
import SampleBuffers

/// What each frame costs the publisher against the frame interval, and what it sheds when that is too much:
/// AVFoundation's `hardwareCost`, measured while running (docs/ARCHITECTURE.md, "Sustained performance").
///
/// Measured over windows of one second: the time `publish` spends fanning the published format out on the producer's
/// thread, plus the time the conversion worker spends making and fanning out every other format (the compressed
/// variant), per frame, divided by the frame interval. A ``value`` of 1.0 means all of the interval. The two parts
/// run on different threads, so a value above 1.0 does not slow the producer: the conversion worker falls behind,
/// and the subscribers of converted formats get DROPs for the frames it skips (``shedding``), while the producer and
/// the subscribers of the published format keep their rate.
///
/// ```swift
/// let cost = publisher.cost
/// if cost.isOverloaded { print("cost \(cost.value): shedding \(cost.shedding)") }
/// ```
public struct PublisherCost: Hashable, Sendable, CustomStringConvertible {
    /// Frames shed for the subscribers of one format in the last window.
    public struct Shedding: Hashable, Sendable {
        /// The format the conversion worker could not make in time (FourCC).
        public var format: UInt32
        /// The subscribers of that format that got DROPs (their ids, as ``SubscriberRecord/id``).
        public var subscriberIDs: [UInt64]
        /// Frames shed for them in the window.
        public var frames: UInt64
    }

    /// Work per frame against the frame interval (1.0 = all of it); 0 before a window with two frames has ended.
    public var value: Double = 0
    /// Mean time per frame on the producer's thread (fan-out of the published format).
    public var fanOut: Duration = .zero
    /// Mean time per converted frame on the conversion worker (encoding or decoding, and its fan-out).
    public var conversion: Duration = .zero
    /// The frame interval the cost is measured against: the frames' duration when the producer gives one, else the
    /// mean time between `publish` calls; nil before it is known.
    public var frameInterval: Duration?
    /// Whether the cost passed 1.0; it stays set until the cost is below ``PublisherCost/recoveryThreshold``, so a
    /// cost hovering around 1.0 does not flap.
    public var isOverloaded = false
    /// What was shed in the last window (empty when nothing was).
    public var shedding: [Shedding] = []
    /// Frames shed since the publisher started, all formats and subscribers together.
    public var framesShed: UInt64 = 0

    /// Below this, an overloaded publisher is no longer overloaded.
    public static let recoveryThreshold = 0.9

    public var description: String {
        let interval = frameInterval.map { "\(Self.milliseconds($0)) ms" } ?? "unknown"
        return
            "cost \(Self.rounded(value)) of the \(interval) frame interval (fan-out \(Self.milliseconds(fanOut)) ms, "
            + "conversion \(Self.milliseconds(conversion)) ms per frame)"
    }

    static func milliseconds(_ duration: Duration) -> String {
        let value = Double(duration.nanoseconds) / 1_000_000
        return String(Double((value * 100).rounded()) / 100)
    }

    static func rounded(_ value: Double) -> String {
        String(Double((value * 100).rounded()) / 100)
    }
}

/// Accumulates one window of frame costs for ``PublisherCost`` (under its own lock: `publish` and the conversion
/// worker each add to it without taking the publisher's state lock).
struct CostMeter {
    static let window: UInt64 = 1_000_000_000

    var current = PublisherCost()
    /// When the last window ended (0: none yet).
    private(set) var windowEndedAt: UInt64 = 0
    private var windowStart: UInt64?
    private var frames: UInt64 = 0
    private var firstPublish: UInt64 = 0
    private var lastPublish: UInt64 = 0
    private var fanOutNanoseconds: UInt64 = 0
    private var conversions: UInt64 = 0
    private var conversionNanoseconds: UInt64 = 0
    private var duration: UInt64?
    private var shedding: [UInt32: PublisherCost.Shedding] = [:]

    /// A frame was published at `time` and its fan-out took `fanOutNanoseconds`.
    ///
    /// - Returns: whether a window ended, and a log line when the publisher became (or stayed) overloaded or recovered.
    mutating func published(
        fanOutNanoseconds: UInt64,
        duration: MediaTime,
        at time: UInt64
    ) -> (windowEnded: Bool, line: String?) {
        if windowStart == nil {
            windowStart = time
            firstPublish = time
        }
        frames &+= 1
        lastPublish = time
        self.fanOutNanoseconds &+= fanOutNanoseconds
        if let seconds = duration.duration, seconds > .zero { self.duration = seconds.nanoseconds }
        guard let start = windowStart, time &- start >= Self.window else { return (false, nil) }
        return (true, endWindow(at: time))
    }

    /// The conversion worker spent `nanoseconds` on one frame.
    mutating func converted(nanoseconds: UInt64) {
        conversions &+= 1
        conversionNanoseconds &+= nanoseconds
    }

    /// The conversion worker shed `frames` in `format` for `subscribers`.
    mutating func shed(format: UInt32, frames: UInt64, subscribers: [UInt64]) {
        current.framesShed =
            current.framesShed.addingReportingOverflow(frames).overflow ? .max : current.framesShed + frames
        var entry = shedding[format] ?? PublisherCost.Shedding(format: format, subscriberIDs: [], frames: 0)
        entry.frames = entry.frames.addingReportingOverflow(frames).overflow ? .max : entry.frames + frames
        for id in subscribers where !entry.subscriberIDs.contains(id) && entry.subscriberIDs.count < 64 {
            entry.subscriberIDs.append(id)
        }
        shedding[format] = entry
    }

    private mutating func endWindow(at time: UInt64) -> String? {
        let interval: UInt64? =
            duration ?? (frames >= 2 ? (lastPublish &- firstPublish) / (frames - 1) : nil)
        let fanOut = frames > 0 ? fanOutNanoseconds / frames : 0
        let conversion = conversions > 0 ? conversionNanoseconds / conversions : 0
        let wasOverloaded = current.isOverloaded
        current.fanOut = .nanoseconds(Int64(clamping: fanOut))
        current.conversion = .nanoseconds(Int64(clamping: conversion))
        if let interval, interval > 0 {
            current.frameInterval = .nanoseconds(Int64(clamping: interval))
            current.value = Double(fanOut &+ conversion) / Double(interval)
        }
        current.shedding = shedding.values.sorted { $0.format < $1.format }
        current.isOverloaded =
            current.value > 1.0 || (wasOverloaded && current.value >= PublisherCost.recoveryThreshold)
            || !current.shedding.isEmpty
        windowEndedAt = time
        windowStart = time
        firstPublish = time
        lastPublish = time
        frames = 0
        fanOutNanoseconds = 0
        conversions = 0
        conversionNanoseconds = 0
        duration = nil
        shedding.removeAll(keepingCapacity: true)
        if current.isOverloaded {
            // Said every window while it lasts (the caller rate-limits it): what is shed changes with subscribers.
            return "overloaded: \(current)" + Self.describe(current.shedding)
        }
        if wasOverloaded { return "no longer overloaded: \(current)" }
        return nil
    }

    /// The bus factor's measurement (``SystemPressurePolicy``): the cost, at least 1.0 while frames are shed; nil
    /// when no window ended in the last three (nothing is being published).
    func busMeasurement(now: UInt64) -> Double? {
        guard windowEndedAt > 0, now &- windowEndedAt <= 3 * Self.window else { return nil }
        return current.shedding.isEmpty ? current.value : max(1.0, current.value)
    }

    static func describe(_ shedding: [PublisherCost.Shedding]) -> String {
        guard !shedding.isEmpty else { return "; nothing shed" }
        let parts = shedding.map { entry in
            "subscribers \(entry.subscriberIDs.map(String.init).joined(separator: ", ")) (\(FourCC.name(entry.format))) "
                + "got DROP \(WireDropReason.shedName) for \(entry.frames) frames"
        }
        return "; shed: " + parts.joined(separator: "; ")
    }
}
