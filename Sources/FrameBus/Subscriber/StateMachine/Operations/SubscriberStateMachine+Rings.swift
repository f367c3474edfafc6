import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces

// Protocol version 3 (docs/PROTOCOL.md §9): messages from the announce ring, and ring violations.

extension SubscriberStateMachine {
    /// One message read from the publisher's announce ring (copied once into private memory; the IO layer already
    /// merged it in order with the socket's messages by its control count): it must be a FRAME or a DROP, and is
    /// then handled exactly as if it had come on the socket.
    package mutating func receivedFromRing(_ message: [UInt8], heldFrames: Int = 0) -> Action {
        guard case .active(let active) = state else { return .none }
        guard active.session.protocolVersion >= Int(WireProtocol.ringVersion) else {
            return fail(.malformedMessage, "ring message in a version-\(active.session.protocolVersion) session")
        }
        let decoded: WireMessage
        do {
            decoded = try WireMessage.decode(message, descriptorCount: 0)
        } catch {
            return fail(error.errorCode, "announce ring: \(error.description)")
        }
        switch decoded {
        case .frame, .drop: return received(decoded, heldFrames: heldFrames, viaRing: true)
        default: return fail(.malformedMessage, "\(decoded.type.name) in the announce ring")
        }
    }

    /// The publisher's ring or wake-up socket broke docs/PROTOCOL.md §9: the connection ends with `malformedMessage`.
    mutating func ringViolation(_ reason: String) -> Action {
        fail(.malformedMessage, reason)
    }
}
