import FrameBus

/// One FRAME message's encode and decode, for the wire codec's benchmark (Benchmarks/Bus, a package of its own, which
/// cannot reach the wire types: they are `package` to FrameBus).
public struct FrameMessageRoundTrip: Sendable {
    private let message: WireMessage

    /// A FRAME of a 1080p NV12 frame's size, with a valid presentation time (as the bus sends them).
    public init(sequence: UInt64 = 1, surfaceID: UInt64 = 2, bytesUsed: UInt64 = 3_110_400) {
        message = .frame(
            WireFrame(
                sequence: sequence,
                surfaceID: surfaceID,
                presentationTime: WireTime(value: 1, timescale: 90_000, flags: 1),
                duration: .invalid,
                publishTime: 3,
                bytesUsed: bytesUsed,
                flags: 0
            )
        )
    }

    /// Encodes the message and decodes the bytes again; whether they decoded.
    public func run() -> Bool { (try? WireMessage.decode(message.encoded(), descriptorCount: 0)) != nil }
}
