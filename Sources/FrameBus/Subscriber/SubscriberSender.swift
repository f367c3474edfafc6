import Synchronization

/// Returns one frame to the publisher, once: when the frame's image buffer goes away, or when the frame is
/// replaced before anyone saw it.
final class ReleaseToken: Sendable {
    let sequence: UInt64
    let surfaceID: UInt64
    let generation: UInt64
    private let claimed = Atomic<Bool>(false)
    private weak let sender: SubscriberSender?

    init(sequence: UInt64, surfaceID: UInt64, generation: UInt64, sender: SubscriberSender) {
        self.sequence = sequence
        self.surfaceID = surfaceID
        self.generation = generation
        self.sender = sender
        sender.heldCount.add(1, ordering: .relaxed)
        sender.frameHeld(generation: generation)
    }

    /// Releases now (idempotent).
    func release(notDelivered: Bool = false) {
        guard !claimed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        sender?.heldCount.subtract(1, ordering: .relaxed)
        sender?.sendRelease(self, notDelivered: notDelivered)
    }

    deinit { release() }
}

/// The sending half of a subscriber: RELEASE and GOODBYE, from any thread. Its lock is a leaf (nothing is called
/// while it is held but non-blocking sends), so a frame released anywhere, even under the core's lock, can send.
final class SubscriberSender: Sendable {
    private struct State {
        var socket: Socket?
        var generation: UInt64 = 0
        /// Frames of the current connection not yet released (held by the consumer or waiting for it): what the
        /// publisher counts against `maximumHeldFrames`, less the releases it has not read yet.
        var connectionHeld = 0
        var outbox = SubscriberOutbox()
        var overflowed = false
        /// Version 3: the release ring (docs/PROTOCOL.md §9), and why it broke, if it did.
        var releaseRing: ReleaseRing?
        var ringFailure: String?
    }
    private let state = Mutex(State())
    let heldCount = Atomic<Int>(0)
    let doorbell: Doorbell

    init(doorbell: Doorbell) { self.doorbell = doorbell }

    func attach(_ socket: Socket, generation: UInt64, rings: RingChannel? = nil) {
        state.withLock {
            $0.socket = socket
            $0.generation = generation
            $0.connectionHeld = 0
            $0.outbox.removeAll()
            $0.overflowed = false
            $0.releaseRing = rings.map(ReleaseRing.init(channel:))
            $0.ringFailure = nil
        }
    }

    /// Why the release ring broke (the publisher made its head or wake-up socket invalid), if it did.
    var ringFailure: String? { state.withLock { $0.ringFailure } }

    /// A frame of connection `generation` is now held.
    func frameHeld(generation: UInt64) {
        state.withLock { if $0.generation == generation { $0.connectionHeld += 1 } }
    }

    /// Frames of the current connection not yet released.
    var connectionHeld: Int { state.withLock { $0.connectionHeld } }

    func detach() {
        state.withLock {
            $0.socket = nil
            $0.outbox.removeAll()
            $0.releaseRing = nil
        }
    }

    func sendRelease(_ token: ReleaseToken, notDelivered: Bool) {
        let message = WireMessage.release(
            WireRelease(
                sequence: token.sequence,
                surfaceID: token.surfaceID,
                flags: notDelivered ? WireRelease.notDeliveredFlag : 0
            )
        )
        enum Route { case ring, ringFailed, socket }
        // One lock per release: the ring encodes it into a buffer of its own.
        let route = state.withLock { state -> Route in
            guard state.generation == token.generation else { return .socket }
            state.connectionHeld -= 1
            // Version 3: into the release ring (a full ring, which an honest publisher never lets happen, falls back
            // to the socket, where a RELEASE is as valid).
            guard let ring = state.releaseRing, state.outbox.isEmpty, state.ringFailure == nil else { return .socket }
            switch ring.send(message) {
            case .sent: return .ring
            case .full: return .socket
            case .violation(let reason):
                state.ringFailure = reason
                return .ringFailed
            }
        }
        switch route {
        case .ring: return
        case .ringFailed: doorbell.ring()
        case .socket: send(message.encoded(), generation: token.generation)
        }
    }

    /// Sends now, or queues behind earlier messages; a full outbox marks the connection for closing.
    func send(_ bytes: [UInt8], generation: UInt64? = nil) {
        let ring = state.withLock { state -> Bool in
            guard let socket = state.socket, generation == nil || generation == state.generation,
                !state.overflowed
            else { return false }
            if state.outbox.isEmpty, case .success(.sent) = socket.send(bytes) { return false }
            if !state.outbox.enqueue(bytes) {
                state.overflowed = true
                state.outbox.removeAll()
            }
            return true
        }
        if ring { doorbell.ring() }
    }

    var hasOutbound: Bool { state.withLock { !$0.outbox.isEmpty } }

    /// Whether the outbox overflowed (the publisher stopped reading) since the connection was attached.
    var hasOverflowed: Bool { state.withLock { $0.overflowed } }

    /// Sends what waited for room.
    func flush() {
        state.withLock { state in
            guard let socket = state.socket else { return }
            while let message = state.outbox.first {
                guard case .success(.sent) = socket.send(message) else { break }
                state.outbox.removeFirst()
            }
        }
    }
}
