/// The timing of one sample (`CMSampleTimingInfo`).
///
/// Capture timestamps are ``HostClock`` times unless the producer says otherwise. For video without frame
/// reordering the decode time stamp is ``MediaTime/invalid`` (it equals the presentation time).
public struct SampleTimingInfo: Hashable, Sendable, CustomStringConvertible {
    /// When the sample is to be presented (captured, for a camera).
    public var presentationTimeStamp: MediaTime
    /// When the sample is to be decoded; ``MediaTime/invalid`` when it is the presentation time.
    public var decodeTimeStamp: MediaTime
    /// How long the sample lasts; ``MediaTime/invalid`` when unknown.
    public var duration: MediaTime

    /// Creates timing information; the decode time stamp and the duration default to ``MediaTime/invalid``.
    public init(
        presentationTimeStamp: MediaTime,
        decodeTimeStamp: MediaTime = .invalid,
        duration: MediaTime = .invalid
    ) {
        self.presentationTimeStamp = presentationTimeStamp
        self.decodeTimeStamp = decodeTimeStamp
        self.duration = duration
    }

    /// All three times invalid (`kCMTimingInfoInvalid`).
    public static let invalid = SampleTimingInfo(presentationTimeStamp: .invalid)

    /// The presentation range, `presentationTimeStamp ..< presentationTimeStamp + duration`.
    public var presentationTimeRange: MediaTimeRange {
        MediaTimeRange(start: presentationTimeStamp, duration: duration)
    }

    public var description: String {
        "pts \(presentationTimeStamp), dts \(decodeTimeStamp), duration \(duration)"
    }
}
