/// A span of time: a start and a duration (`CMTimeRange`).
///
/// The range is half-open, `start ..< start + duration`, as `CMTimeRangeContainsTime` treats it. A range is
/// valid when both times are valid, the duration is not negative and both have epoch 0 for the duration.
public struct MediaTimeRange: Hashable, Sendable, CustomStringConvertible {
    /// The first instant of the range.
    public var start: MediaTime
    /// How long the range lasts.
    public var duration: MediaTime

    /// Creates a range from a start and a duration (`CMTimeRangeMake`).
    public init(start: MediaTime, duration: MediaTime) {
        self.start = start
        self.duration = duration
    }

    /// Creates the range from `start` up to, not including, `end` (`CMTimeRangeFromTimeToTime`).
    public init(start: MediaTime, end: MediaTime) {
        self.init(start: start, duration: end - start)
    }

    /// The empty range at zero (`kCMTimeRangeZero`).
    public static let zero = MediaTimeRange(start: .zero, duration: .zero)
    /// The invalid range (`kCMTimeRangeInvalid`).
    public static let invalid = MediaTimeRange(start: .invalid, duration: .invalid)

    /// The first instant after the range (`CMTimeRangeGetEnd`).
    public var end: MediaTime { start + duration }

    /// Whether both times are valid and the duration is not negative (`CMTIMERANGE_IS_VALID`).
    public var isValid: Bool {
        start.isValid && duration.isValid && duration.epoch == 0 && duration >= .zero
    }

    /// Whether the range is valid and its duration is zero (`CMTIMERANGE_IS_EMPTY`).
    public var isEmpty: Bool { isValid && duration == .zero }

    /// Whether `time` lies in `start ..< end` (`CMTimeRangeContainsTime`); always `false` for an invalid range.
    public func contains(_ time: MediaTime) -> Bool {
        isValid && time.isValid && start <= time && time < end
    }

    /// Whether `other` lies entirely inside this range (`CMTimeRangeContainsTimeRange`).
    public func contains(_ other: MediaTimeRange) -> Bool {
        isValid && other.isValid && start <= other.start && other.end <= end
    }

    /// The overlap of two ranges (`CMTimeRangeGetIntersection`); an empty range at the later start if they do
    /// not overlap, ``invalid`` if either is invalid.
    public func intersection(_ other: MediaTimeRange) -> MediaTimeRange {
        guard isValid, other.isValid else { return .invalid }
        let lower = max(start, other.start)
        let upper = min(end, other.end)
        return upper <= lower ? MediaTimeRange(start: lower, duration: .zero) : MediaTimeRange(start: lower, end: upper)
    }

    /// `"[start, +duration)"`.
    public var description: String { "[\(start), +\(duration))" }
}
