import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces

// The handshake: HELLO out, WELCOME or ERROR in (docs/PROTOCOL.md §4; version 3 and its fallback, §9.1).

extension SubscriberStateMachine {
    /// A connection is up: returns the HELLO to send.
    package mutating func connected(offeringRings: Bool = false) -> WireMessage {
        state = .awaitingWelcome
        offeredVersion = offeringRings && !retriesWithoutRings ? WireProtocol.ringVersion : WireProtocol.version
        retriesWithoutRings = false
        // Flags after bit 0 are refused as unknown by a publisher older than them (§5.1): offered unless that
        // publisher just refused them.
        offeredOptionalFlags = !retriesWithoutOptionalFlags
        offeredDeferral = isDeferred && offeredOptionalFlags
        retriesWithoutOptionalFlags = false
        var flags: UInt16 = acceptsDMABuf ? WireHello.acceptsDMABufFlag : 0
        if offeredDeferral { flags |= WireHello.deferredFlag }
        // §5.8: we understand DROP reason 5 (frames whose surface we cannot take).
        if offeredOptionalFlags { flags |= WireHello.knowsUnsupportedSurfaceFlag }
        // §5.13: STATUS, and DROP reason 4 for frames the publisher's conversion shed.
        if offeredOptionalFlags && receivesStatus { flags |= WireHello.wantsStatusFlag }
        return .hello(
            WireHello(
                version: offeredVersion,
                kind: .subscriber,
                deliveryMode: delivery.wireMode,
                queueDepth: delivery.wireDepth,
                flags: flags,
                formats: acceptedFormats.map(\.fourCC)
            )
        )
    }

    /// The connection closed (end of file, an error, or we closed it).
    package mutating func closed() {
        state = .closed
    }

    mutating func receivedDuringHandshake(_ message: WireMessage) -> Action {
        switch message {
        case .welcome(let welcome):
            // A publisher may answer a version-3 HELLO with version 2 (it could not make rings, §9.1).
            let acceptable = welcome.version == offeredVersion
                || (offeredVersion == WireProtocol.ringVersion && welcome.version == WireProtocol.version)
            guard acceptable, welcome.kind == .subscriber else {
                return fail(.malformedMessage, "WELCOME of version \(welcome.version), kind \(welcome.kind)")
            }
            guard let format = acceptedFormats.first(where: { $0.fourCC == welcome.format }) else {
                return fail(.malformedMessage, "WELCOME grants format 0x\(String(welcome.format, radix: 16))")
            }
            let session = Subscriber.Session(
                format: format,
                streamID: welcome.streamID,
                subscriberID: welcome.subscriberID,
                maximumHeldFrames: Int(welcome.maximumHeldFrames),
                protocolVersion: Int(welcome.version),
                grantedQueueDepth: Int(welcome.queueDepth)
            )
            var discontinuity: DiscontinuityFlags = []
            if let previous = previousStreamID {
                discontinuity.insert(previous == welcome.streamID ? .unknown : .streamDiscontinuity)
            }
            previousStreamID = welcome.streamID
            let isReconnect = hasConnectedBefore
            hasConnectedBefore = true
            let announced = Int(welcome.maximumAnnouncedSurfaces)
            state = .active(
                Active(
                    session: session,
                    maximumSurfaces: announced > 0 ? min(announced, limits.maximumSurfaces) : limits.maximumSurfaces,
                    pendingDiscontinuity: discontinuity
                )
            )
            return .established(session, isReconnect: isReconnect)
        case .error(let error):
            state = .closed
            if error.code == WireErrorCode.unsupportedVersion.rawValue && offeredVersion == WireProtocol.ringVersion {
                retriesWithoutRings = true
            }
            // A publisher older than the optional flags (deferred, wantsStatus, knowsUnsupportedSurface) refuses them as
            // unknown HELLO flags (§5.1, §5.1.1).
            if error.code == WireErrorCode.malformedMessage.rawValue && offeredOptionalFlags
                && error.reason.contains("flags 0x")
            {
                retriesWithoutOptionalFlags = true
            }
            let code: FrameBusError.Code =
                error.code == WireErrorCode.notPermitted.rawValue ? .permissionDenied : .refused
            return .close(
                FrameBusError(code, "Subscriber.connect", message: PeerText.escaped(error.reason)),
                reply: nil
            )
        default:
            return fail(.malformedMessage, "expected WELCOME, got \(message.type.name)")
        }
    }
}
