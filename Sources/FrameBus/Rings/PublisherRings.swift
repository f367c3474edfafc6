/// The publisher's end of one version-3 subscriber's rings (docs/PROTOCOL.md §9), used under the publisher's state
/// lock: FRAME and DROP messages go into the announce ring instead of the socket; RELEASE messages come back through
/// the subscriber's release ring and are fed to the state machine exactly as if they had come on the socket.
package final class PublisherRings {
    let channel: RingChannel
    private var writer: RingWriter
    private var reader: RingReader
    /// Socket messages sent after WELCOME (each announce slot records how many came before it, §9.4).
    private(set) var controlSent: UInt64 = 0
    /// WELCOME (with our half's descriptors) was sent: from now on FRAME and DROP go into the ring.
    private(set) var isWelcomed = false
    /// The last flush stopped at a full ring: the loop waits for the subscriber's wake-up, not for socket room.
    private(set) var isBlockedOnRing = false
    /// The loop thread said it sleeps (`sleeping` set, release ring found empty) and its wake-up socket has not fired
    /// since: nothing can be waiting in the release ring unseen.
    var isArmed = false
    /// Where ``append(_:)`` encodes each message (reused: announcing a frame allocates nothing for its bytes).
    private var encoding: [UInt8] = []

    package init(channel: RingChannel) {
        self.channel = channel
        self.writer = RingWriter(channel: channel)
        self.reader = RingReader(channel: channel)
    }

    /// The descriptors that travel with WELCOME: our ring file and our wake-up pair's end B.
    var welcomeDescriptors: [Int32] { [channel.own.descriptor.rawValue, channel.ownWake.handedOutEnd] }

    /// Whether the ring carries this message (after WELCOME: FRAME and DROP).
    func carries(_ message: WireMessage) -> Bool {
        guard isWelcomed else { return false }
        switch message {
        case .frame, .drop: return true
        default: return false
        }
    }

    @discardableResult
    /// A socket message was sent; false if a futex-woken subscriber's wake-up failed (§9.8).
    func sentOnSocket(_ message: WireMessage) -> Bool {
        if case .welcome = message {
            isWelcomed = true
        } else if isWelcomed {
            controlSent &+= 1
            return channel.sentOnSocket(controlSent: controlSent)
        }
        return true
    }

    /// The session is being closed by us: a futex-woken subscriber is woken so it reads the end of file at once
    /// (a datagram-woken one polls its socket and sees it by itself).
    func closing() {
        guard channel.wakesPeerByFutex else { return }
        channel.own.increment32(RingLayout.wakeCountOffset)
        _ = channel.wakePeer()
    }

    package enum AppendOutcome {
        case appended
        /// Full: the subscriber has not read enough; it wakes us when it does.
        case full
        case violation(String)
    }

    /// Writes one FRAME or DROP into the announce ring (published by ``commit()``).
    package func append(_ message: WireMessage) -> AppendOutcome {
        message.encode(into: &encoding)
        for attempt in 0..<2 {
            switch writer.append(encoding, controlCount: controlSent) {
            case .failure(let violation): return .violation(violation.description)
            case .success(true):
                if isBlockedOnRing {
                    isBlockedOnRing = false
                    writer.roomWaitEnded()
                }
                return .appended
            case .success(false):
                guard attempt == 0 else { break }
                // Say we wait for room, then look again (the subscriber may have read meanwhile).
                switch writer.waitForRoom() {
                case .failure(let violation): return .violation(violation.description)
                case .success(true):
                    isBlockedOnRing = true
                    return .full
                case .success(false): continue
                }
            }
        }
        isBlockedOnRing = true
        return .full
    }

    /// Publishes what was appended and wakes the subscriber if it sleeps; a reason if its wake-up socket broke.
    func commit() -> String? {
        writer.commit() != .wakeFailed ? nil : "the subscriber's wake-up socket is no longer usable"
    }

    /// Before the loop sleeps: true if it may (nothing waits in the release ring).
    func prepareToSleep() -> Result<Bool, RingViolation> { reader.prepareToSleep() }

    /// Stops saying we sleep (§9.5: while frames are being published, releases are reaped by the next publish, and
    /// the subscriber wakes us only past its threshold). True if the ring had been armed.
    package func disarm() -> Bool {
        guard isArmed else { return false }
        isArmed = false
        reader.clearSleeping()
        return true
    }

    /// After our wake-up socket fired: clears the flag and drains the socket; a reason if it broke.
    func wokeUp() -> String? {
        guard let count = reader.wokeUpCounting() else { return "our wake-up socket for this subscriber was made unusable" }
        wakeUpsRead &+= UInt64(count)
        return nil
    }

    // MARK: The wake-up budget (docs/PROTOCOL.md §9.5)

    /// Wake-up datagrams read from this subscriber's socket, ever.
    private(set) var wakeUpsRead: UInt64 = 0
    /// RELEASE slots read from its ring, ever.
    private(set) var releasesRead: UInt64 = 0
    /// Wake-ups any subscriber may send beyond what its releases and our announcements explain: what a wake-up a
    /// drain reads at once can hold (the drain limit), so spurious wake-ups of an honest subscriber (one left over
    /// from a sleep that ended by itself, §9.5's example) never come near it.
    package static let wakeUpAllowance: UInt64 = UInt64(WakeSocket.drainLimit)

    /// An honest subscriber wakes us at most once per batch of releases it writes (the publisher sleeps, or 64
    /// releases wait) and once per batch of announcements it reads while we wait for room (§9.5): so never more than
    /// one per release plus one per message we wrote into its announce ring. A reason when it sent more than that
    /// plus ``wakeUpAllowance``: the subscriber floods, and is ended (ERROR `tooManyWakeUps`). Checked after the
    /// ring was read, so every release it wrote before its wake-ups is counted.
    func wakeUpFlood() -> String? {
        let explained = Self.wakeUpAllowance.addingReportingOverflow(releasesRead).partialValue
        let budget = explained.addingReportingOverflow(writer.written).partialValue
        guard wakeUpsRead > budget else { return nil }
        return "\(wakeUpsRead) wake-ups for \(releasesRead) releases and \(writer.written) announcements"
    }

    /// Reads up to `limit` release slots (each copied once), calling `body` with each; then publishes our head.
    /// Stops at the first violation and returns it.
    package func drainReleases(limit: Int, _ body: (RingEntry) -> Bool) -> String? {
        for _ in 0..<limit {
            switch reader.peek() {
            case .failure(let violation): return violation.description
            case .success(nil):
                return reader.publishHead() ? nil : "the subscriber's wake-up socket is no longer usable"
            case .success(let entry?):
                reader.advance()
                releasesRead &+= 1
                guard body(entry) else { return nil }
            }
        }
        return reader.publishHead() ? nil : "the subscriber's wake-up socket is no longer usable"
    }
}
