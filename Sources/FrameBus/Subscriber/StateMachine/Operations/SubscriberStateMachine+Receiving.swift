import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces

// Messages in while subscribed, and the events that end a connection from our side (a malformed datagram, a surface
// or frame the IO layer could not use).

extension SubscriberStateMachine {
    /// A datagram that did not decode (or was truncated): the connection ends with a `malformedMessage` reply.
    package mutating func receivedMalformed(_ reason: String) -> Action {
        fail(.malformedMessage, reason)
    }

    /// The IO layer could not import an announced surface (unsealed, too small, unmappable).
    package mutating func surfaceImportFailed(surfaceID: UInt64, reason: String) -> Action {
        fail(.invalidSurface, "surface \(surfaceID) refused: \(reason)")
    }

    /// The IO layer could not turn a validated frame into a sample buffer.
    mutating func frameRefused(_ reason: String) -> Action {
        fail(.invalidSurface, reason)
    }

    /// One decoded message from the publisher; `heldFrames` is how many frames of this connection we hold now (not
    /// yet released), which a FRAME must not push past WELCOME's `maximumHeldFrames`.
    package mutating func received(_ message: WireMessage, heldFrames: Int = 0) -> Action {
        received(message, heldFrames: heldFrames, viaRing: false)
    }

    mutating func received(_ message: WireMessage, heldFrames: Int, viaRing: Bool) -> Action {
        if case .active(let active) = state, active.session.protocolVersion >= Int(WireProtocol.ringVersion),
            !viaRing
        {
            switch message {
            case .frame, .drop:
                return fail(.malformedMessage, "\(message.type.name) on the socket in a version-3 session")
            default: break
            }
        }
        switch state {
        case .idle, .closed:
            // Nothing is read outside a connection; a late datagram after close is ignored.
            return .none
        case .awaitingWelcome:
            return receivedDuringHandshake(message)
        case .active(var active):
            let action = receivedWhileActive(message, heldFrames: heldFrames, &active)
            if case .active = state { state = .active(active) }
            return action
        }
    }

    mutating func receivedWhileActive(
        _ message: WireMessage,
        heldFrames: Int,
        _ active: inout Active
    ) -> Action {
        switch message {
        case .surface(let surface):
            return announce(surface, &active)
        case .retireSurface(let surfaceID):
            guard active.surfaces.removeValue(forKey: surfaceID) != nil else {
                return fail(.malformedMessage, "RETIRE_SURFACE of unknown surface \(surfaceID)")
            }
            return .retireSurface(surfaceID: surfaceID)
        case .frame(let frame):
            // The publisher counts a frame as held until it reads our RELEASE, which we send as soon as the frame
            // is released, so we never count more than it does: an honest publisher never sends a frame that
            // would exceed the grant. One that does would make us hold (and later queue RELEASEs for) any number.
            guard heldFrames < active.session.maximumHeldFrames else {
                return fail(
                    .malformedMessage,
                    "FRAME \(frame.sequence) while \(heldFrames) frames are held (maximumHeldFrames "
                        + "\(active.session.maximumHeldFrames))"
                )
            }
            return accept(frame, &active)
        case .drop(let drop):
            return report(drop, &active)
        case .status(let status):
            guard receivesStatus else { return fail(.malformedMessage, "STATUS, which this subscriber did not ask for") }
            return .status(PublisherStatus(status))
        case .endOfStream:
            state = .closed
            return .close(FrameBusError(.endOfStream, "Subscriber", message: "the publisher stopped"), reply: nil)
        case .error(let error):
            state = .closed
            return .close(
                FrameBusError(
                    .protocolViolation,
                    "Subscriber",
                    message: "publisher error \(error.code): \(PeerText.escaped(error.reason))"
                ),
                reply: nil
            )
        case .hello, .welcome, .release, .goodbye, .surfaceV1, .monitorReport:
            return fail(.malformedMessage, "unexpected \(message.type.name) in a version-2 subscription")
        }
    }
}
