import SystemPackage

// The wait of one turn, one function per mechanism (`poll`, `futex_waitv`): it sleeps, then says what woke it
// (``Wake``); it reads nothing from the socket or the ring (``dispatch(_:on:)`` does).

extension SubscriberConnection {
    /// What woke a turn, for ``dispatch(_:on:)``.
    struct Wake {
        var doorbellRang = false
        var socketReadable = false
        var socketWritable = false
        /// The turn slept on the futex (§9.8; `.changed` when it did not need to sleep): the socket is then read when
        /// the sleep timed out or the publisher's `controlSent` has news.
        var futex: FutexWaitOutcome?
    }

    /// How a wait ended.
    enum WaitOutcome {
        case woke(Wake)
        /// The wait itself ended the turn (a failed system call, a ring violation): whether the session is live.
        case turnEnded(isLive: Bool)
    }

    /// `poll` on the doorbell, the socket and, in a datagram-woken version-3 session, our wake-up socket, after saying
    /// we sleep (§9.5). `ringCapMilliseconds`: ``WakePolicy/Wait/poll(ringCapMilliseconds:)``.
    func waitOnPoll(_ socket: Socket, hasOutbound: Bool, ringCapMilliseconds: Int32?) -> WaitOutcome {
        var timeout = WakePolicy.pollTimeoutMilliseconds
        if isAwaitingWelcome {
            let left = handshakeDeadline > now ? handshakeDeadline - now : 0
            timeout = Int32(clamping: min(UInt64(timeout), left / 1_000_000 + 1))
        }
        if let ringCapMilliseconds { timeout = min(timeout, ringCapMilliseconds) }
        if callerDeadline != nil {
            // Rounded up to a millisecond: during a caller's turn this path serves version-2 sessions, a slot that
            // waits for a socket message, and a full outbox.
            let left = cappedByCallerDeadline(nanoseconds: Int64(timeout) * 1_000_000)
            timeout = Int32(clamping: (left + 999_999) / 1_000_000)
        }
        let writable = hasOutbound ? PollEvents.writable : 0
        pollSet.removeAll()
        pollSet.add(core.doorbell.descriptor, events: PollEvents.readable)
        pollSet.add(socket.descriptor, events: PollEvents.readable | writable)
        var sleptOnRing = false
        let ringWake = rings.flatMap { $0.channel.usesFutexWake ? nil : $0 }
        if let rings = ringWake {
            pollSet.add(rings.channel.ownWake.descriptor, events: PollEvents.readable)
            // Say we sleep, then look at the ring again (§9.5); a slot waiting for a socket message sleeps on
            // the socket alone.
            if !rings.isBlockedOnControl {
                switch rings.reader.prepareToSleep() {
                case .failure(let violation):
                    return .turnEnded(isLive: perform(machine.ringViolation(violation.description), descriptors: []))
                case .success(true):
                    sleptOnRing = true
                    core.wakeUpCounts.update { $0.socketSleeps &+= 1 }
                case .success(false): timeout = 0
                }
            }
        }
        if case .failure(let errno) = Syscall.poll(&pollSet, timeout: timeout) {
            let error = FrameBusError(.systemCall, "poll", errno: errno)
            return .turnEnded(isLive: perform(.close(error, reply: nil), descriptors: []))
        }
        let socketEvents = pollSet.events(at: 1)
        if let rings = ringWake {
            if pollSet.events(at: 2) != 0 {
                core.wakeUpCounts.update { $0.socketWakeUps &+= 1 }
                // One `recv` per wake-up: the publisher signals once per sleep, and a second signal left unread only
                // makes the next poll return at once.
                guard rings.reader.wokeUp(drainLimit: 1) else {
                    let violation = machine.ringViolation("our wake-up socket was made unusable")
                    return .turnEnded(isLive: perform(violation, descriptors: []))
                }
            } else if sleptOnRing {
                rings.reader.clearSleeping()
            }
        }
        return .woke(
            Wake(
                doorbellRang: pollSet.events(at: 0) != 0,
                socketReadable: socketEvents & ~PollEvents.writable != 0,
                socketWritable: socketEvents & PollEvents.writable != 0
            )
        )
    }

    /// Version 3 with futex wake-ups (docs/PROTOCOL.md §9.8): says it sleeps, then sleeps on the publisher's wake
    /// count and the doorbell's ring count (`futex_waitv`) for at most the liveness interval (``WakePolicy``).
    func waitOnFutex(_ rings: SubscriberRings) -> WaitOutcome {
        let doorbell = core.doorbell
        doorbell.armFutex()
        let rang = doorbell.ringCount
        var outcome = FutexWaitOutcome.changed
        // A caller's deadline shortens the sleep (and then leaves the liveness interval as it was).
        let sleep = cappedByCallerDeadline(nanoseconds: wakePolicy.livenessInterval)
        if rang == lastDoorbellRing, sleep > 0 {
            switch rings.reader.prepareToSleepOnFutex(hasNews: rings.hasNews) {
            case .failure(let violation):
                doorbell.disarmFutex()
                return .turnEnded(isLive: perform(machine.ringViolation(violation.description), descriptors: []))
            case .success(let seen?):
                outcome = rings.channel.peer.futexWait(
                    RingLayout.wakeCountOffset,
                    seen: seen,
                    doorbell: doorbell,
                    rang: rang,
                    timeoutNanoseconds: sleep
                )
                rings.reader.clearSleeping()
                // A timeout at a caller's deadline reads the socket too (one `recv`), so a caller that waits in short
                // steps still notices a publisher that died without a word; it leaves the back-off alone.
                wakePolicy.slept(outcome, requested: sleep)
                core.wakeUpCounts.update {
                    $0.futexSleeps &+= 1
                    if outcome == .woken { $0.futexWakeUps &+= 1 }
                    if outcome == .timedOut { $0.futexTimeouts &+= 1 }
                    $0.lastLivenessInterval = sleep
                }
            case .success(nil):
                break
            }
        }
        doorbell.disarmFutex()
        if case .failed(let errno) = outcome {
            let error = FrameBusError(.systemCall, "futex_waitv", errno: errno)
            return .turnEnded(isLive: perform(.close(error, reply: nil), descriptors: []))
        }
        var wake = Wake(futex: outcome)
        let ringCount = doorbell.ringCount
        if ringCount != lastDoorbellRing {
            lastDoorbellRing = ringCount
            wake.doorbellRang = true
        }
        return .woke(wake)
    }
}
