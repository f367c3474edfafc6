/// How a subscriber's connection thread waits for its publisher (docs/PROTOCOL.md §9.5, §9.8): the wake policy, one
/// value per connection, as ``HoldingPolicy`` is the publisher's admission policy.
///
/// - **Datagram** (version 2, and version-3 sessions without futex wake-ups): `poll` on the doorbell, the socket and,
///   in version 3, our wake-up socket, after saying we sleep in the release ring's header (§9.5).
/// - **Futex** (a version-3 session where both sides offered it, §9.8): `futex_waitv` on the announce ring's wake
///   count and the doorbell, for at most the liveness interval: ``futexLivenessInterval``, doubled after each sleep
///   that only timed out up to ``futexLivenessCeiling``, back to the start after anything else.
/// - A futex-woken session that needs its socket's readiness for one turn (a ring slot waits for a socket message,
///   §9.4; our outbox waits for room) polls instead; a ring frame then wakes only the futex, which `poll` does not
///   see, so that poll is capped at ``futexLivenessInterval`` whenever the ring may bring one (the ring is not
///   waiting for a socket message): a frame waits at most that long, not the poll's usual second.
struct WakePolicy {
    /// How to wait this turn.
    enum Wait {
        /// Sleep on the futex (§9.8).
        case futex(SubscriberRings)
        /// Poll; `ringCapMilliseconds`: the longest the poll may last because the announce ring can bring a frame
        /// that only a futex wake-up announces (nil: no cap beyond the usual intervals).
        case poll(ringCapMilliseconds: Int32?)
    }

    /// How long a futex-woken subscriber sleeps at most before it looks at its socket anyway (§9.8): the bound on
    /// noticing a publisher that died without a word.
    static let futexLivenessInterval: Int64 = 20_000_000

    /// The longest an idle futex-woken subscriber sleeps before it looks at its socket (§9.8): the liveness interval
    /// doubles after each sleep that only timed out, up to this, so an idle subscriber costs 5 timer wake-ups a
    /// second rather than 50, and a publisher that died without a word is noticed at most this long after.
    static let futexLivenessCeiling: Int64 = 200_000_000

    /// The longest poll of a turn with nothing else bounding it (a version-2 session, or one that waits for room).
    static let pollTimeoutMilliseconds: Int32 = 1000

    /// Most datagrams read per wake-up before the doorbell (cancellation, releases) is looked at again.
    static let readBatch = 64

    /// The timeout of the next futex sleep: ``futexLivenessInterval``, backed off while nothing comes.
    private(set) var livenessInterval = WakePolicy.futexLivenessInterval

    /// How to wait in a turn of a session with `rings` (nil: version 2, or before WELCOME).
    func wait(rings: SubscriberRings?, isAwaitingWelcome: Bool, hasOutbound: Bool) -> Wait {
        guard let rings, rings.channel.usesFutexWake, !isAwaitingWelcome else { return .poll(ringCapMilliseconds: nil) }
        if rings.isBlockedOnControl {
            // The ring waits for a socket message: the socket's readiness is what ends the wait.
            return .poll(ringCapMilliseconds: nil)
        }
        if hasOutbound { return .poll(ringCapMilliseconds: Int32(Self.futexLivenessInterval / 1_000_000)) }
        return .futex(rings)
    }

    /// A futex sleep that asked for `requested` nanoseconds ended with `outcome`: a sleep of the whole liveness
    /// interval moves the back-off (a shorter one, cut by a caller's deadline, leaves it as it was).
    mutating func slept(_ outcome: FutexWaitOutcome, requested: Int64) {
        guard requested == livenessInterval else { return }
        livenessInterval = Self.livenessInterval(after: outcome, current: livenessInterval)
    }

    /// The liveness interval of the next futex sleep, after one that ended with `outcome` and lasted at most
    /// `current`: doubled (up to ``futexLivenessCeiling``) after a timeout, back to ``futexLivenessInterval`` after
    /// anything else (a wake-up, a changed word, a signal, the doorbell).
    static func livenessInterval(after outcome: FutexWaitOutcome, current: Int64) -> Int64 {
        guard outcome == .timedOut else { return futexLivenessInterval }
        return current >= futexLivenessCeiling / 2 ? futexLivenessCeiling : max(current, futexLivenessInterval) * 2
    }
}
