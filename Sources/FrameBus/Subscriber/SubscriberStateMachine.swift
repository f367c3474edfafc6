import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces

/// The subscriber's side of the wire protocol, without IO: events in (connected, a decoded message, a surface
/// import that failed, closed), actions out (what the IO layer must do).
///
/// Every value a publisher sends is checked here before it bounds anything, and no arithmetic on one can trap:
/// DROP counts saturate, sizes are compared in `UInt64`, and conversions are range-checked first. One instance
/// lives for the whole life of a ``Subscriber``; ``connected()`` starts each connection afresh, while what must
/// survive a reconnect (the previous stream's id, for the discontinuity flag) stays.
package struct SubscriberStateMachine {
    /// Bounds on what one publisher can make a subscriber keep.
    package struct Limits: Hashable, Sendable {
        /// Surfaces mapped at once for one connection (docs/PROTOCOL.md §8).
        var maximumSurfaces = 256

        package init(maximumSurfaces: Int = 256) {
            self.maximumSurfaces = maximumSurfaces
        }
    }

    /// What the machine remembers of an announced surface.
    package struct SurfaceRecord: Hashable, Sendable {
        /// Bytes of all its descriptors together (saturating), the most a FRAME's `bytesUsed` may say.
        var byteCount: UInt64
        var pixelFormat: UInt32
        var width: UInt32
        var height: UInt32
    }

    /// What the IO layer must do after an event.
    package enum Action: Equatable {
        /// Nothing (the message only changed the state).
        case none
        /// The handshake succeeded: the subscription is live.
        case established(Subscriber.Session, isReconnect: Bool)
        /// Import the surface whose descriptor came with the message; report failure with
        /// ``surfaceImportFailed(surfaceID:reason:)``.
        case importSurface(WireSurface)
        /// Forget a mapped surface (frames still held keep their mapping).
        case retireSurface(surfaceID: UInt64)
        /// Hand a frame to the consumer, with these discontinuity flags.
        case deliverFrame(WireFrame, discontinuity: DiscontinuityFlags)
        /// Tell the consumer that these frames were dropped.
        case reportDrop(SubscriberDrop)
        /// Close the connection, first sending `reply` (an ERROR) if there is one, and end the stream with `error`.
        case close(FrameBusError, reply: WireErrorMessage?)
    }

    package enum State {
        /// Not connected.
        case idle
        /// HELLO sent, waiting for WELCOME or ERROR.
        case awaitingWelcome
        /// Subscribed.
        case active(Active)
        /// The connection ended; ``connected()`` starts the next one.
        case closed
    }

    package struct Active {
        var session: Subscriber.Session
        /// Most surfaces announced at once: WELCOME's `maximumAnnouncedSurfaces`, never more than our own limit.
        var maximumSurfaces: Int
        var surfaces: [UInt64: SurfaceRecord] = [:]
        var lastSequence: UInt64?
        var lastGeometry: SurfaceRecord?
        var pendingDiscontinuity: DiscontinuityFlags
    }

    package private(set) var state: State = .idle
    let acceptedFormats: [PixelFormat]
    /// Whether the HELLO offers to import DMA-BUF surfaces; without it, a DMA-BUF SURFACE is refused.
    var acceptsDMABuf = true
    let delivery: Subscriber.Delivery
    let limits: Limits
    /// The stream id of the last connection that got a WELCOME, to tell a restarted publisher from the same one.
    private var previousStreamID: UInt64?
    private var hasConnectedBefore = false
    /// The version the last HELLO offered.
    private(set) var offeredVersion: UInt16 = WireProtocol.version
    /// A publisher refused our version-3 HELLO with `unsupportedVersion`: the next connection offers version 2 at
    /// once (the IO layer reconnects without waiting, whatever its reconnect policy).
    private(set) var retriesWithoutRings = false

    package init(acceptedFormats: [PixelFormat], delivery: Subscriber.Delivery, limits: Limits = Limits()) {
        self.acceptedFormats = acceptedFormats
        self.delivery = delivery
        self.limits = limits
    }

    /// The session of the current connection, once WELCOME arrived.
    package var session: Subscriber.Session? {
        if case .active(let active) = state { return active.session }
        return nil
    }

    // MARK: Events in

    /// A connection is up: returns the HELLO to send.
    package mutating func connected(offeringRings: Bool = false) -> WireMessage {
        state = .awaitingWelcome
        offeredVersion = offeringRings && !retriesWithoutRings ? WireProtocol.ringVersion : WireProtocol.version
        retriesWithoutRings = false
        return .hello(
            WireHello(
                version: offeredVersion,
                kind: .subscriber,
                deliveryMode: delivery.wireMode,
                queueDepth: delivery.wireDepth,
                flags: acceptsDMABuf ? WireHello.acceptsDMABufFlag : 0,
                formats: acceptedFormats.map(\.fourCC)
            )
        )
    }

    /// The connection closed (end of file, an error, or we closed it).
    package mutating func closed() {
        state = .closed
    }

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

    private mutating func received(_ message: WireMessage, heldFrames: Int, viaRing: Bool) -> Action {
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

    private mutating func receivedDuringHandshake(_ message: WireMessage) -> Action {
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

    private mutating func receivedWhileActive(
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
        case .hello, .welcome, .release, .goodbye, .surfaceV1, .monitorReport, .status:
            return fail(.malformedMessage, "unexpected \(message.type.name) in a version-2 subscription")
        }
    }

    private mutating func announce(_ surface: WireSurface, _ active: inout Active) -> Action {
        guard surface.surfaceID != 0, active.surfaces[surface.surfaceID] == nil else {
            return fail(.malformedMessage, "SURFACE \(surface.surfaceID) announced while it is live")
        }
        guard active.surfaces.count < active.maximumSurfaces else {
            return fail(.invalidSurface, "more than \(active.maximumSurfaces) surfaces announced")
        }
        guard surface.pixelFormat == active.session.format.fourCC else {
            return fail(.invalidSurface, "SURFACE format differs from the granted \(active.session.format)")
        }
        // The decoder bounded each descriptor to 1…2³² bytes and each plane inside its descriptor.
        guard !surface.descriptorByteCounts.isEmpty,
            surface.descriptorByteCounts.allSatisfy({ $0 > 0 && $0 <= UInt64(SurfaceLayout.maximumAllocationSize) })
        else {
            return fail(.invalidSurface, "SURFACE descriptor sizes \(surface.descriptorByteCounts)")
        }
        if surface.backing == .dmaBuf && !acceptsDMABuf {
            return fail(.invalidSurface, "a DMA-BUF SURFACE, which this subscriber did not accept in its HELLO")
        }
        if surface.backing == .dmaBuf && surface.modifier != WireSurface.linearModifier {
            // We read frames with the CPU, which needs a linear layout.
            return fail(.invalidSurface, "DMA-BUF modifier 0x\(String(surface.modifier, radix: 16)) is not linear")
        }
        if active.session.format.isCompressed {
            // A compressed surface is one memfd allocated for the worst case (every tile raw), so its size
            // bounds what a decoder must allocate for it. A tiny surface that claims a huge image is refused here,
            // before anyone sizes a decode buffer from its width and height. The bound is the smallest worst case
            // of every tile size the codec accepts, so no honest publisher is refused whatever its tiles.
            guard surface.planes.isEmpty, surface.backing == .memfd, surface.descriptorByteCounts.count == 1,
                let needed = try? SurfaceCodec.minimumCompressedByteCount(
                    width: Int(surface.width),
                    height: Int(surface.height),
                    format: active.session.format
                ),
                UInt64(needed) <= surface.descriptorByteCounts[0]
            else {
                return fail(
                    .invalidSurface,
                    "compressed SURFACE of \(surface.width)x\(surface.height) in \(surface.descriptorByteCounts) bytes"
                )
            }
        } else if surface.planes.isEmpty {
            return fail(.invalidSurface, "SURFACE of \(active.session.format) without planes")
        }
        active.surfaces[surface.surfaceID] = SurfaceRecord(
            byteCount: surface.descriptorByteCounts.reduce(0) { Saturating.add($0, $1) },
            pixelFormat: surface.pixelFormat,
            width: surface.width,
            height: surface.height
        )
        return .importSurface(surface)
    }

    private mutating func accept(_ frame: WireFrame, _ active: inout Active) -> Action {
        guard let surface = active.surfaces[frame.surfaceID] else {
            return fail(.malformedMessage, "FRAME \(frame.sequence) on unknown surface \(frame.surfaceID)")
        }
        if let last = active.lastSequence, frame.sequence <= last {
            return fail(.malformedMessage, "FRAME sequence \(frame.sequence) after \(last)")
        }
        guard frame.bytesUsed <= surface.byteCount else {
            return fail(.malformedMessage, "FRAME bytesUsed \(frame.bytesUsed) > \(surface.byteCount)")
        }
        var discontinuity = active.pendingDiscontinuity
        if let last = active.lastGeometry,
            last.pixelFormat != surface.pixelFormat || last.width != surface.width || last.height != surface.height
        {
            discontinuity.insert(.formatChange)
        }
        if frame.flags & WireFrame.discontinuityFlag != 0 && discontinuity.isEmpty { discontinuity.insert(.unknown) }
        active.pendingDiscontinuity = []
        active.lastSequence = frame.sequence
        active.lastGeometry = surface
        return .deliverFrame(frame, discontinuity: discontinuity)
    }

    private mutating func report(_ drop: WireDrop, _ active: inout Active) -> Action {
        let reason: DroppedFrameReason
        switch WireDropReason(rawValue: drop.reason) {
        case .frameWasLate: reason = .frameWasLate
        case .outOfBuffers: reason = .outOfBuffers
        case .discontinuity: reason = .discontinuity
        case .workFellBehind, nil: return fail(.malformedMessage, "DROP reason \(drop.reason)")
        }
        guard drop.firstSequence <= drop.lastSequence else {
            return fail(.malformedMessage, "DROP range \(drop.firstSequence) > \(drop.lastSequence)")
        }
        if reason == .discontinuity { active.pendingDiscontinuity.insert(.samplesDropped) }
        return .reportDrop(SubscriberDrop(reason: reason, sequences: drop.firstSequence...drop.lastSequence))
    }

    // MARK: Protocol version 3 (docs/PROTOCOL.md §9)

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

    /// Ends the connection because the publisher broke the protocol: reply with ERROR `code`, then close.
    private mutating func fail(_ code: WireErrorCode, _ reason: String) -> Action {
        // Outside a connection there is nobody to reply to and nothing to end (the fuzzer found a closed machine
        // ending the stream again for every late datagram).
        switch state {
        case .idle, .closed: return .none
        case .awaitingWelcome, .active: break
        }
        state = .closed
        return .close(
            FrameBusError(
                code == .invalidSurface ? .surfaceRejected : .protocolViolation,
                "Subscriber.receive",
                message: reason
            ),
            reply: WireErrorMessage(code: code.rawValue, reason: reason)
        )
    }
}

/// RELEASEs (and the GOODBYE) that wait for room in the socket because the publisher is not reading.
///
/// Bounded: a publisher that sends frames and never reads our releases would otherwise make this grow without
/// limit. When it is full the connection must close (``enqueue(_:)`` returns `false`).
package struct SubscriberOutbox {
    /// Most messages that may wait. An honest publisher holds at most `maximumHeldFrames` (≤ 65535, usually tens)
    /// of our frames, so it has read our earlier releases long before this many pile up.
    package static let defaultCapacity = 1024

    package let capacity: Int
    private(set) var messages: [[UInt8]] = []
    private var head = 0

    package init(capacity: Int = SubscriberOutbox.defaultCapacity) {
        self.capacity = capacity
    }

    package var count: Int { messages.count - head }
    package var isEmpty: Bool { count == 0 }

    /// Queues a message; `false` if the outbox is full (the publisher stopped reading).
    package mutating func enqueue(_ message: [UInt8]) -> Bool {
        guard count < capacity else { return false }
        messages.append(message)
        return true
    }

    /// The oldest waiting message.
    var first: [UInt8]? { head < messages.count ? messages[head] : nil }

    /// Removes the oldest waiting message.
    mutating func removeFirst() {
        guard head < messages.count else { return }
        head += 1
        if head == messages.count || head >= 64 {
            messages.removeFirst(head)
            head = 0
        }
    }

    package mutating func removeAll() {
        messages.removeAll()
        head = 0
    }
}
