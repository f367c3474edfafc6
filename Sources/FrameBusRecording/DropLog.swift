import FrameBus

/// Why frames did not reach a recording's disk.
public enum RecordingDropReason: UInt8, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// The bus replaced a frame the recorder had not taken yet (`frameWasLate`).
    case busFrameWasLate = 1
    /// The publisher's pool was exhausted (`outOfBuffers`): the recorder held all it was granted.
    case busOutOfBuffers = 2
    /// The publisher lost frames upstream or restarted (`discontinuity`).
    case busDiscontinuity = 3
    /// The recorder's in-memory backlog was full: the disk did not keep up.
    case backlogFull = 4
    /// The file system ran out of space.
    case diskFull = 5
    /// A write or a sync failed.
    case ioError = 6
    /// The frame's format or size differs from the recording's track (the publisher reconfigured).
    case formatChange = 7
    /// The publisher's work for the recorder's format (its compressed encoder) fell behind (`workFellBehind`).
    case busWorkFellBehind = 8

    /// The name used in JSON and in the file's drop log.
    public var description: String {
        switch self {
        case .busFrameWasLate: "busFrameWasLate"
        case .busOutOfBuffers: "busOutOfBuffers"
        case .busDiscontinuity: "busDiscontinuity"
        case .backlogFull: "backlogFull"
        case .diskFull: "diskFull"
        case .ioError: "ioError"
        case .formatChange: "formatChange"
        case .busWorkFellBehind: "busWorkFellBehind"
        }
    }

    /// The bus's drop reason for a bus drop.
    public init(bus reason: DroppedFrameReason) {
        switch reason {
        case .frameWasLate: self = .busFrameWasLate
        case .outOfBuffers: self = .busOutOfBuffers
        case .discontinuity: self = .busDiscontinuity
        case .workFellBehind: self = .busWorkFellBehind
        }
    }

    /// The reason `framebus play` gives subscribers for these frames: bus reasons as they were; frames the
    /// recorder's backlog could not hold, and frames the publisher's encoder skipped, as `outOfBuffers` (a producer
    /// reports only the three reasons every subscriber knows); frames lost to the disk or to a format change as
    /// `discontinuity`.
    public var playbackReason: DroppedFrameReason {
        switch self {
        case .busFrameWasLate: .frameWasLate
        case .busOutOfBuffers, .backlogFull, .busWorkFellBehind: .outOfBuffers
        case .busDiscontinuity, .diskFull, .ioError, .formatChange: .discontinuity
        }
    }
}

/// Frames that did not reach the disk: a sequence range (bus sequence numbers) and why.
public struct RecordingDrop: Hashable, Sendable, CustomStringConvertible {
    /// Why.
    public var reason: RecordingDropReason
    /// The first and last bus sequence numbers of the frames.
    public var sequences: ClosedRange<UInt64>
    /// How many frames (at most the range's length; `UInt64.max` when it holds more).
    public var frameCount: UInt64

    /// Creates a drop record.
    public init(reason: RecordingDropReason, sequences: ClosedRange<UInt64>, frameCount: UInt64) {
        self.reason = reason
        self.sequences = sequences
        self.frameCount = frameCount
    }

    public var description: String {
        "\(reason) \(sequences.lowerBound)...\(sequences.upperBound) (\(frameCount) frames)"
    }
}
