import SystemPackage

/// Both rings of one version-3 session, as one side sees them (docs/PROTOCOL.md §9): our own ring file, which we
/// write and the peer reads, and the peer's, which we read. Made at the handshake; the socket stays for everything
/// else.
package final class RingChannel: Sendable {
    package let own: RingMapping
    package let peer: RingMapping
    /// Ours: we poll and drain its end A; the peer sends on its end B to wake us.
    let ownWake: WakeSocket
    /// The peer's end B: we send on it to wake the peer.
    package let peerWake: WakeSocket
    /// The session wakes the subscriber with a futex on the announce ring's wake count instead of a datagram
    /// (docs/PROTOCOL.md §9.8): both sides said so in their ring file headers at the handshake.
    package let usesFutexWake: Bool

    init(own: RingMapping, peer: RingMapping, ownWake: WakeSocket, peerWake: WakeSocket, usesFutexWake: Bool = false) {
        self.own = own
        self.peer = peer
        self.ownWake = ownWake
        self.peerWake = peerWake
        self.usesFutexWake = usesFutexWake
        // Only the announce ring's owner (the publisher) wakes by futex; the subscriber still wakes it by datagram.
        self.wakesPeerByFutex = usesFutexWake && peer.role == .release
    }

    /// We are the publisher of a futex-woken session: our wake-ups go through the announce ring's wake count.
    package let wakesPeerByFutex: Bool

    /// Wakes the peer (docs/PROTOCOL.md §9.5, §9.8): the publisher of a futex-woken session adds 1 to its
    /// announce ring's wake count and `FUTEX_WAKE`s it; everyone else sends one datagram on the peer's end B. False
    /// if the wake-up descriptor became unusable.
    package func wakePeer() -> Bool {
        guard wakesPeerByFutex else { return peerWake.signal() }
        return own.futexWake(RingLayout.wakeCountOffset)
    }

    /// The publisher of a futex-woken session sent a socket message: records it in the announce header (§9.8) and,
    /// if the subscriber sleeps, wakes it. False if the kernel refused the wake-up.
    func sentOnSocket(controlSent: UInt64) -> Bool {
        guard wakesPeerByFutex else { return true }
        own.store(controlSent, RingLayout.controlSentOffset)
        own.increment32(RingLayout.wakeCountOffset)
        if peer.load(RingLayout.sleepingOffset) != 0 { return wakePeer() }
        return true
    }

    /// Our half, made before the handshake: our ring file and our wake-up socket pair (the ring file and the pair's
    /// end B travel to the peer).
    package struct Half: Sendable {
        let ring: RingMapping
        let wake: WakeSocket
        /// Subscriber: offers futex wake-ups (written into the release ring's header); publisher: accepts them.
        let futexWake: Bool

        /// `futexWake`: a subscriber offers futex wake-ups (§9.8; only where the kernel has `futex_waitv`), a
        /// publisher accepts a subscriber's offer.
        package init(role: RingLayout.Role, futexWake: Bool = true) throws(FrameBusError) {
            ring = try RingMapping.create(role: role)
            wake = try WakeSocket.create()
            self.futexWake = futexWake && (role == .announce || Syscall.hasFutexWaitv)
            if role == .release && self.futexWake {
                ring.store32(RingLayout.futexWakeKind, RingLayout.wakeKindsOffset)
            }
        }

        /// The descriptors to send with HELLO or WELCOME: the ring file, then our wake-up pair's end B.
        package var descriptors: [Int32] { [ring.descriptor.rawValue, wake.handedOutEnd] }

        /// Completes the channel with the peer's two descriptors (ownership moves here; closed on failure).
        /// `peerProcessID`: the session socket's peer (`SO_PEERCRED`); the wake-up socket must be a socket pair's end
        /// that process made (§9.1).
        package func joining(
            peerRing: FileDescriptor,
            peerWake: FileDescriptor,
            peerRole: RingLayout.Role,
            peerProcessID: Int32? = nil
        ) throws(FrameBusError) -> RingChannel {
            let mapping: RingMapping
            do { mapping = try RingMapping.importing(peerRing, role: peerRole) } catch {
                Syscall.close(peerWake)
                throw error
            }
            let peerSocket = try WakeSocket.importing(peerWake, peerProcessID: peerProcessID)
            // §9.8: the subscriber's offer is read once here; the publisher's answer is written before WELCOME
            // carries its file, and read once by the subscriber here. Either side's later rewrites change nothing.
            let peerKinds = mapping.load32(RingLayout.wakeKindsOffset)
            let futex = futexWake && peerKinds & RingLayout.futexWakeKind != 0
            if futex && peerRole == .release { ring.store32(RingLayout.futexWakeKind, RingLayout.wakeKindsOffset) }
            return RingChannel(own: ring, peer: mapping, ownWake: wake, peerWake: peerSocket, usesFutexWake: futex)
        }
    }
}

/// Writes our ring: one writer at a time (the caller's lock).
package struct RingWriter: ~Copyable {
    let channel: RingChannel
    /// Messages written (published as the tail by ``commit()``).
    private(set) var written: UInt64 = 0
    private var published: UInt64 = 0
    /// The peer's head as last checked.
    private var lastPeerHead: UInt64 = 0
    /// Unread messages at which ``commit()`` wakes the peer even though it did not say it sleeps (the release ring's
    /// batching rule, docs/PROTOCOL.md §9.5); nil: only a sleeping peer is woken.
    private let wakeThreshold: Int?
    /// The threshold wake-up was sent and the peer has not yet read below the threshold again.
    private var isThresholdWakeSent = false

    package init(channel: RingChannel, wakeThreshold: Int? = nil) {
        self.channel = channel
        self.wakeThreshold = wakeThreshold
    }

    /// Appends one message; `.success(false)` when the ring is full (the peer has not read enough yet).
    package mutating func append(_ message: [UInt8], controlCount: UInt64 = 0) -> Result<Bool, RingViolation> {
        let peerHead = channel.peer.load(RingLayout.peerHeadOffset)
        switch RingLayout.room(written: written, peerHead: peerHead, lastPeerHead: lastPeerHead) {
        case .failure(let violation): return .failure(violation)
        case .success(let room):
            lastPeerHead = peerHead
            guard room > 0 else { return .success(false) }
        }
        channel.own.writeSlot(written, controlCount: controlCount, message: message)
        written &+= 1
        return .success(true)
    }

    /// What ``commit()`` did (docs/PROTOCOL.md §9.5, §9.8).
    package enum Commit: Equatable, Sendable {
        /// Published (or nothing new to publish) without waking the peer: it is awake, or it reads lazily and is
        /// below its wake threshold.
        case published
        /// Published, and the peer woken: one `FUTEX_WAKE` (a futex-woken session's publisher) or one datagram.
        case wokePeer
        /// The wake-up descriptor became unusable (the peer broke it).
        case wakeFailed
    }

    /// Publishes what was appended and wakes the peer if it said it is going to sleep (or, for a lazy reader, once
    /// the wake threshold is reached).
    package mutating func commit() -> Commit {
        guard written != published else { return .published }
        published = written
        channel.own.store(written, RingLayout.tailOffset)
        // §9.8: the wake count changes with every tail a futex-woken subscriber may be sleeping on.
        if channel.wakesPeerByFutex { channel.own.increment32(RingLayout.wakeCountOffset) }
        if channel.peer.load(RingLayout.sleepingOffset) != 0 { return wake() }
        // A reader that reaps lazily (the publisher, §9.5) is woken once when this many messages wait unread, so the
        // ring never fills while it is busy elsewhere. `lastPeerHead` was checked by `append` (within `written`).
        if let wakeThreshold {
            let unread = written &- lastPeerHead
            if unread < UInt64(wakeThreshold) {
                isThresholdWakeSent = false
            } else if !isThresholdWakeSent {
                isThresholdWakeSent = true
                return wake()
            }
        }
        return .published
    }

    private func wake() -> Commit { channel.wakePeer() ? .wokePeer : .wakeFailed }

    /// Says we wait for room, then checks again: true if there is still no room (sleep; the peer wakes us when it
    /// reads), false if room appeared meanwhile (the flag is cleared again).
    mutating func waitForRoom() -> Result<Bool, RingViolation> {
        channel.own.store(1, RingLayout.wantsRoomOffset)
        let peerHead = channel.peer.load(RingLayout.peerHeadOffset)
        switch RingLayout.room(written: written, peerHead: peerHead, lastPeerHead: lastPeerHead) {
        case .failure(let violation): return .failure(violation)
        case .success(let room):
            lastPeerHead = peerHead
            if room > 0 { channel.own.store(0, RingLayout.wantsRoomOffset) }
            return .success(room == 0)
        }
    }

    /// Clears the wait-for-room flag.
    func roomWaitEnded() { channel.own.store(0, RingLayout.wantsRoomOffset) }
}

/// Reads the peer's ring: one reader at a time (the caller's thread or lock).
package struct RingReader: ~Copyable {
    let channel: RingChannel
    /// Messages of the peer's ring read (private; published to the peer by ``publishHead()``).
    private(set) var head: UInt64 = 0
    private var publishedHead: UInt64 = 0
    /// The entry at `head`, copied once and checked, not consumed yet.
    private var pending: RingEntry?
    /// Where each slot read is copied (private memory, reused: reading a slot allocates only its message).
    private var slot: [UInt8] = []

    package init(channel: RingChannel) { self.channel = channel }

    /// The next entry, copied once into private memory and checked; nil when the ring is empty.
    package mutating func peek() -> Result<RingEntry?, RingViolation> {
        if let pending { return .success(pending) }
        switch RingLayout.readable(head: head, tail: channel.peer.load(RingLayout.tailOffset)) {
        case .failure(let violation): return .failure(violation)
        case .success(0): return .success(nil)
        case .success: break
        }
        channel.peer.copySlot(head, into: &slot)
        switch RingLayout.entry(slot) {
        case .failure(let violation): return .failure(violation)
        case .success(let entry):
            pending = entry
            return .success(entry)
        }
    }

    /// Consumes the entry ``peek()`` returned.
    package mutating func advance() {
        precondition(pending != nil, "advance without peek")
        pending = nil
        head &+= 1
    }

    /// Tells the peer how far we read, and wakes it if it waits for room. False if its wake-up descriptor broke.
    package mutating func publishHead() -> Bool {
        guard head != publishedHead else { return true }
        publishedHead = head
        channel.own.store(head, RingLayout.peerHeadOffset)
        if channel.peer.load(RingLayout.wantsRoomOffset) != 0 {
            if channel.wakesPeerByFutex { channel.own.increment32(RingLayout.wakeCountOffset) }
            return channel.wakePeer()
        }
        return true
    }

    /// Says we are going to sleep, then checks the ring again: true if it is still empty (poll our wake-up socket now),
    /// false if an entry arrived meanwhile (the flag is cleared again; read it).
    package mutating func prepareToSleep() -> Result<Bool, RingViolation> {
        guard pending == nil else { return .success(false) }
        channel.own.store(1, RingLayout.sleepingOffset)
        switch RingLayout.readable(head: head, tail: channel.peer.load(RingLayout.tailOffset)) {
        case .failure(let violation):
            channel.own.store(0, RingLayout.sleepingOffset)
            return .failure(violation)
        case .success(let count):
            if count > 0 { channel.own.store(0, RingLayout.sleepingOffset) }
            return .success(count == 0)
        }
    }

    /// A futex-woken subscriber (§9.8) is going to sleep: stores `sleeping` = 1, loads the publisher's wake count,
    /// then looks at the ring's `tail` and `controlSent` again. Returns the wake count to sleep on, or nil (the flag
    /// cleared again) if a message is waiting in the ring, or `hasNews` says `controlSent` announces socket messages
    /// not looked for yet.
    package mutating func prepareToSleepOnFutex(hasNews: (UInt64) -> Bool) -> Result<UInt32?, RingViolation> {
        guard pending == nil else { return .success(nil) }
        channel.own.store(1, RingLayout.sleepingOffset)
        let seen = channel.peer.load32(RingLayout.wakeCountOffset)
        switch RingLayout.readable(head: head, tail: channel.peer.load(RingLayout.tailOffset)) {
        case .failure(let violation):
            channel.own.store(0, RingLayout.sleepingOffset)
            return .failure(violation)
        case .success(let count):
            if count > 0 || hasNews(channel.peer.load(RingLayout.controlSentOffset)) {
                channel.own.store(0, RingLayout.sleepingOffset)
                return .success(nil)
            }
            return .success(seen)
        }
    }

    /// The publisher's `controlSent` (§9.8): socket messages it says it sent after WELCOME. Any value is possible
    /// from a hostile publisher: it only decides whether we look at the socket before the next liveness check.
    func controlSent() -> UInt64 { channel.peer.load(RingLayout.controlSentOffset) }

    /// We are awake and our wake-up socket did not fire: clears the sleeping flag.
    package func clearSleeping() { channel.own.store(0, RingLayout.sleepingOffset) }

    /// We are awake: clears the sleeping flag and drains our wake-up socket (at most `drainLimit` wake-ups). False if
    /// it broke.
    func wokeUp(drainLimit: Int = WakeSocket.drainLimit) -> Bool {
        wokeUpCounting(drainLimit: drainLimit) != nil
    }

    /// Like ``wokeUp(drainLimit:)``: how many wake-ups it read, or nil if the socket broke.
    func wokeUpCounting(drainLimit: Int = WakeSocket.drainLimit) -> Int? {
        channel.own.store(0, RingLayout.sleepingOffset)
        return channel.ownWake.drainCounting(limit: drainLimit)
    }
}

/// The subscriber's release ring, written under its sender's lock from whichever thread releases a frame.
package final class ReleaseRing {
    let channel: RingChannel
    private var writer: RingWriter

    /// Unread releases at which the publisher is woken although it reaps lazily (a quarter of the ring, §9.5).
    package static let wakeThreshold = RingLayout.slotCount / 4

    init(channel: RingChannel) {
        self.channel = channel
        self.writer = RingWriter(channel: channel, wakeThreshold: Self.wakeThreshold)
    }

    enum Outcome: Equatable {
        case sent
        /// Full (an honest publisher never lets this happen, §9.3): send it on the socket instead.
        case full
        case violation(String)
    }

    /// Where ``send(_:)-(WireMessage)`` encodes each RELEASE (reused: a release allocates nothing).
    private var encoding: [UInt8] = []

    /// Encodes one RELEASE and sends it like ``send(_:)-([UInt8])``.
    func send(_ message: WireMessage) -> Outcome {
        message.encode(into: &encoding)
        return send(encoding)
    }

    /// Writes one RELEASE, publishes it and wakes the publisher if it sleeps (or if a quarter of the ring waits).
    func send(_ message: [UInt8]) -> Outcome {
        switch writer.append(message) {
        case .failure(let violation): return .violation(violation.description)
        case .success(false): return .full
        case .success(true):
            return writer.commit() != .wakeFailed ? .sent : .violation("the publisher's wake-up socket is no longer usable")
        }
    }
}

/// The subscriber's end of the publisher's announce ring, used on the connection thread only.
final class SubscriberRings {
    let channel: RingChannel
    var reader: RingReader
    /// Socket messages read after WELCOME: an announce slot is handled only once this reaches its control count.
    var controlReceived: UInt64 = 0
    /// The next slot waits for a socket message: sleep on the session socket, not on the wake-up socket.
    var isBlockedOnControl = false
    /// Futex-woken sessions (§9.8): the publisher's `controlSent` when we last read the socket because of it. A value
    /// that differs from `controlReceived` but not from this one was looked at already (the socket had nothing
    /// more): it does not keep us awake, so a publisher that writes a wrong count cannot make us spin.
    var controlSentLooked: UInt64 = 0

    /// Whether `controlSent` (just loaded) says the socket has messages we have not looked for.
    func hasNews(_ controlSent: UInt64) -> Bool {
        controlSent != controlReceived && controlSent != controlSentLooked
    }

    init(channel: RingChannel) {
        self.channel = channel
        self.reader = RingReader(channel: channel)
    }
}
