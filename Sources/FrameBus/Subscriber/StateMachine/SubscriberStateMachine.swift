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
        /// The publisher's STATUS (docs/PROTOCOL.md §5.13): keep it, and tell the consumer if the pressure changed.
        case status(PublisherStatus)
        /// Close the connection, first sending `reply` (an ERROR) if there is one, and end the stream with `error`.
        case close(FrameBusError, reply: WireErrorMessage?)
    }

    package internal(set) var state: State = .idle
    let acceptedFormats: [PixelFormat]
    /// Whether the HELLO offers to import DMA-BUF surfaces; without it, a DMA-BUF SURFACE is refused.
    var acceptsDMABuf = true
    /// The largest frame accepted (§8.2); a larger SURFACE is refused with `frameTooLarge`.
    var largestFrame: FrameSizeLimit? = .default
    /// A DROP reason 5 (`unsupportedSurface`, §5.8) came since the IO layer last asked: it says why once.
    var unsupportedSurfaceNoticePending = false
    /// Whether the HELLO asks for STATUS and DROP reason `workFellBehind` (`wantsStatus`); without it, either is
    /// malformed.
    var receivesStatus = true
    let delivery: Subscriber.Delivery
    let limits: Limits
    /// The stream id of the last connection that got a WELCOME, to tell a restarted publisher from the same one.
    var previousStreamID: UInt64?
    var hasConnectedBefore = false
    /// The version the last HELLO offered.
    var offeredVersion: UInt16 = WireProtocol.version
    /// A publisher refused our version-3 HELLO with `unsupportedVersion`: the next connection offers version 2 at
    /// once (the IO layer reconnects without waiting, whatever its reconnect policy).
    var retriesWithoutRings = false
    /// Whether the HELLO says `deferred` (docs/PROTOCOL.md §5.1.1).
    var isDeferred = false
    /// A publisher refused our HELLO's optional flags, `deferred` and `knowsUnsupportedSurface` (one older than them:
    /// `malformedMessage`): the next connection leaves them out, at once (then this subscriber is served from its first
    /// frame, and gets DROP reason 2 for surfaces it cannot take, as before the flags).
    var retriesWithoutOptionalFlags = false
    /// Whether the last HELLO carried the optional flags.
    var offeredOptionalFlags = false
    /// Whether the last HELLO said `deferred`.
    var offeredDeferral = false

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

    /// Ends the connection because the publisher broke the protocol: reply with ERROR `code`, then close.
    mutating func fail(_ code: WireErrorCode, _ reason: String) -> Action {
        // Outside a connection there is nobody to reply to and nothing to end (the fuzzer found a closed machine
        // ending the stream again for every late datagram).
        switch state {
        case .idle, .closed: return .none
        case .awaitingWelcome, .active: break
        }
        state = .closed
        return .close(
            FrameBusError(
                code == .invalidSurface || code == .frameTooLarge ? .surfaceRejected : .protocolViolation,
                "Subscriber.receive",
                message: reason
            ),
            reply: WireErrorMessage(code: code.rawValue, reason: reason)
        )
    }
}
