import SampleBuffers

/// What a publisher says about itself to the subscribers that ask (``Subscriber/publisherStatus``; STATUS in
/// docs/PROTOCOL.md §5.13).
public struct PublisherStatus: Hashable, Sendable {
    /// The system pressure the publisher measures (``SystemPressureState``).
    public var systemPressure: SystemPressureState
    /// Its work per frame against the frame interval (``PublisherCost/value``); nil before it measured one.
    public var cost: Double?
    /// The duration of the frames it publishes now (a producer adapting to pressure changes it); invalid when it
    /// does not say.
    public var frameDuration: MediaTime
    /// Frames shed for this subscriber since it connected, because the publisher's work for its format fell behind
    /// (DROP ``DroppedFrameReason/workFellBehind``).
    public var framesShed: UInt64

    public init(systemPressure: SystemPressureState, cost: Double?, frameDuration: MediaTime, framesShed: UInt64) {
        self.systemPressure = systemPressure
        self.cost = cost
        self.frameDuration = frameDuration
        self.framesShed = framesShed
    }

    /// From a decoded STATUS (its fields already range-checked): unknown factor bits are ignored.
    init(_ wire: WireStatus) {
        self.init(
            systemPressure: SystemPressureState(
                level: SystemPressureState.Level(rawValue: UInt8(clamping: wire.level)) ?? .shutdown,
                factors: SystemPressureState.Factors(rawValue: wire.factors & WireStatus.knownFactors)
            ),
            cost: wire.cost == WireStatus.unknownCost ? nil : Double(wire.cost) / 1000,
            frameDuration: MediaTime(
                value: wire.frameDuration.value,
                timescale: wire.frameDuration.timescale,
                flags: MediaTime.Flags(rawValue: wire.frameDuration.flags)
            ),
            framesShed: wire.framesShed
        )
    }
}
