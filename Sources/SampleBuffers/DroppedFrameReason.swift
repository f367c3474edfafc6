/// Why a frame was dropped (`kCMSampleBufferAttachmentKey_DroppedFrameReason`): Apple's three reasons, and FrameBus's
/// fourth.
///
/// The raw values are part of the FrameBus wire protocol and never change:
///
/// | raw | case | CoreMedia | meaning on the bus |
/// |---|---|---|---|
/// | 0 | — | — | reserved: "no drop" in a wire field; `init(rawValue: 0)` is `nil` |
/// | 1 | ``frameWasLate`` | `kCMSampleBufferDroppedFrameReason_FrameWasLate` | a newer frame replaced one the consumer had not taken yet |
/// | 2 | ``outOfBuffers`` | `kCMSampleBufferDroppedFrameReason_OutOfBuffers` | the pool was exhausted because frames were held |
/// | 3 | ``discontinuity`` | `kCMSampleBufferDroppedFrameReason_Discontinuity` | the producer restarted, changed format or lost frames upstream |
/// | 4 | ``workFellBehind`` | — | the work done for this consumer alone (encoding its compressed format) fell behind the frames |
///
/// A receiver that gets a raw value it does not know (from a newer peer) gets `nil` from ``init(rawValue:)`` and
/// decides itself whether that is an error.
public enum DroppedFrameReason: UInt8, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// A newer frame replaced this one before the consumer took it.
    case frameWasLate = 1
    /// No buffer was free: the consumers held them all.
    case outOfBuffers = 2
    /// The stream was interrupted: producer restart, format change, or upstream loss.
    case discontinuity = 3
    /// The publisher's work for this consumer's format (encoding the compressed variant, on a thread of its own)
    /// could not keep up, and skipped this frame: the producer and consumers of other formats kept their rate.
    case workFellBehind = 4

    /// The CoreMedia spelling, e.g. `"FrameWasLate"`.
    public var description: String {
        switch self {
        case .frameWasLate: "FrameWasLate"
        case .outOfBuffers: "OutOfBuffers"
        case .discontinuity: "Discontinuity"
        case .workFellBehind: "WorkFellBehind"
        }
    }
}

/// More about why a frame was dropped (`kCMSampleBufferAttachmentKey_DroppedFrameReasonInfo`).
///
/// CoreMedia defines one value, `kCMSampleBufferDroppedFrameReasonInfo_CameraModeSwitch`; FrameBus adds the
/// causes of a ``DroppedFrameReason/discontinuity`` that docs/ARCHITECTURE.md names. Raw values are wire-stable:
///
/// | raw | case | meaning |
/// |---|---|---|
/// | 0 | — | reserved: "no information" in a wire field |
/// | 1 | ``cameraModeSwitch`` | the camera was reconfigured (`…_CameraModeSwitch`) |
/// | 2 | ``formatChange`` | the producer changed pixel format or dimensions |
/// | 3 | ``producerRestart`` | the producer process restarted |
/// | 4 | ``upstreamLoss`` | the producer reported frames lost before they reached it |
/// | 5 | ``surfaceNotAccepted`` | an ``DroppedFrameReason/outOfBuffers`` drop: the frame's memory is of a kind this consumer does not take (a DMA-BUF for one that does not import DMA-BUFs) |
public enum DroppedFrameReasonInfo: UInt8, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// The capture device switched mode (CoreMedia's `CameraModeSwitch`).
    case cameraModeSwitch = 1
    /// The stream's format (pixel format or dimensions) changed.
    case formatChange = 2
    /// The producer restarted.
    case producerRestart = 3
    /// Frames were lost upstream of the producer.
    case upstreamLoss = 4
    /// The frame's memory is of a kind this consumer does not take (a DMA-BUF surface for a consumer that does not
    /// import DMA-BUFs): its publisher drops such frames for it (docs/PROTOCOL.md §5.8, DROP reason 5).
    case surfaceNotAccepted = 5

    public var description: String {
        switch self {
        case .cameraModeSwitch: "CameraModeSwitch"
        case .formatChange: "FormatChange"
        case .producerRestart: "ProducerRestart"
        case .upstreamLoss: "UpstreamLoss"
        case .surfaceNotAccepted: "SurfaceNotAccepted"
        }
    }
}

/// What kind of discontinuity precedes a sample, as bit flags (CoreMediaIO's `CMIOSampleBufferDiscontinuityFlags`).
///
/// An empty set means the sample follows its predecessor without a break. Bit positions follow CoreMediaIO where
/// it has a matching flag and are wire-stable:
///
/// | bit | flag | CoreMediaIO |
/// |---|---|---|
/// | 0 | ``unknown`` | `kCMIOSampleBufferDiscontinuityFlag_UnknownDiscontinuity` |
/// | 1 | ``timeJump`` | `kCMIOSampleBufferDiscontinuityFlag_TimecodeDiscontinuity` |
/// | 2 | ``packetError`` | `kCMIOSampleBufferDiscontinuityFlag_PacketError` |
/// | 3 | ``streamDiscontinuity`` | `kCMIOSampleBufferDiscontinuityFlag_StreamDiscontinuity` (producer restart) |
/// | 6 | ``samplesDropped`` | `kCMIOSampleBufferDiscontinuityFlag_SampleDropped` |
/// | 16 | ``formatChange`` | — (FrameBus: pixel format or dimensions changed) |
public struct DiscontinuityFlags: OptionSet, Hashable, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// A discontinuity of unknown cause.
    public static let unknown = DiscontinuityFlags(rawValue: 1 << 0)
    /// The time stamps jump (forward or back).
    public static let timeJump = DiscontinuityFlags(rawValue: 1 << 1)
    /// Data was damaged on the way.
    public static let packetError = DiscontinuityFlags(rawValue: 1 << 2)
    /// The stream restarted (e.g. the producer process restarted).
    public static let streamDiscontinuity = DiscontinuityFlags(rawValue: 1 << 3)
    /// One or more samples before this one were dropped.
    public static let samplesDropped = DiscontinuityFlags(rawValue: 1 << 6)
    /// The format (pixel format or dimensions) changed.
    public static let formatChange = DiscontinuityFlags(rawValue: 1 << 16)
}
