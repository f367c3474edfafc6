/// STATUS (`0x0060`, versions 2 and 3): the publisher's system pressure, frame cost and frame duration, sent only to a
/// subscriber or monitor whose HELLO set ``WireHello/wantsStatusFlag`` (docs/PROTOCOL.md §5.13), 48 bytes.
package struct WireStatus: Hashable, Sendable {
    /// Highest `level` a receiver accepts (``SystemPressureState/Level-swift.enum/shutdown``).
    public static let maximumLevel: UInt16 = 4
    /// The `factors` bits defined so far (cpu, memory, io, thermal, bus); a receiver ignores the others.
    public static let knownFactors: UInt16 = 0x1F
    /// `cost` when the publisher has not measured one yet.
    public static let unknownCost = UInt32.max

    /// 0 nominal, 1 fair, 2 serious, 3 critical, 4 shutdown.
    public var level: UInt16
    /// Bit 0 cpu, 1 memory, 2 io, 3 thermal, 4 bus.
    public var factors: UInt16
    /// The publisher's frame cost in thousandths of the frame interval (1000 = all of it), saturating below
    /// ``unknownCost``; ``unknownCost`` before the first measurement.
    public var cost: UInt32
    /// The duration of the frames published now (what an adapting producer changes); invalid when unknown.
    public var frameDuration: WireTime
    /// The publisher's `CLOCK_MONOTONIC` time of the status, nanoseconds.
    public var time: UInt64
    /// Frames shed for this receiver since it connected (DROP `workFellBehind` or, to a peer that does not ask for
    /// STATUS, `outOfBuffers`); for a monitor, for every subscriber together since the publisher started.
    public var framesShed: UInt64

    public init(level: UInt16, factors: UInt16, cost: UInt32, frameDuration: WireTime, time: UInt64, framesShed: UInt64)
    {
        self.level = level
        self.factors = factors
        self.cost = cost
        self.frameDuration = frameDuration
        self.time = time
        self.framesShed = framesShed
    }
}
