import Logging

// Deferred start (docs/PROTOCOL.md §5.1.1, docs/ARCHITECTURE.md "Capture lifecycle"): a subscriber whose HELLO says
// `deferred` is welcomed at once, but nothing is made or sent for it (no surface, no conversion, no compressed
// encoding, no frame, no drop) until its deferred start runs. The machine decides when; the IO layer asks before
// each frame (``deferredStartDue(now:)``), tells the producer, runs it (``runDeferredStart(now:)``) and tells the
// producer again.

extension PublisherStateMachine {
    /// What the machine knows about deferred start, beside the sessions.
    struct DeferralState {
        /// The producer called `runDeferredStartWhenNeeded()`: from then on a deferred subscriber starts with the
        /// next frame, whatever else is connected.
        var isRequested = false
        /// Some subscriber that is not deferred has had a frame: the preview runs. From then on, a deferred subscriber
        /// waits only while a subscriber that is not deferred waits for its first frame.
        var previewHasRun = false
        /// Deferred subscribers started so far (for statistics and logs).
        var started: UInt64 = 0
        /// A deferred subscriber was welcomed since the IO layer last looked (it then checks before each frame).
        var welcomedDeferred = false
    }

    /// A sequence number no frame reaches: a session that waits for its deferred start has it as its first sequence,
    /// so that planning, delivering and admitting frames pass it over without a case of their own.
    static var awaitingDeferredStart: UInt64 { .max }

    /// The producer asked to run deferred start (`Publisher.runDeferredStartWhenNeeded()`): deferred subscribers
    /// waiting now, and those that come later, start with the next frame.
    package mutating func requestDeferredStart() {
        deferral.isRequested = true
    }

    /// Deferred subscribers that wait for their start.
    package var awaitingDeferredStartCount: Int {
        var count = 0
        for case .subscriber(let session) in connections.values where session.isAwaitingDeferredStart { count += 1 }
        return count
    }

    /// Whether deferred start should run before the next frame; returns how many subscribers it would start (0: not
    /// now).
    ///
    /// Manual (`automaticallyRunsDeferredStart` false): once the producer asked. Automatic: while no subscriber that
    /// is not deferred waits for its first frame, once the preview has run (some subscriber that is not deferred had
    /// a frame), or once a deferred subscriber has waited `deferredStartTimeout` (a producer whose consumers are
    /// all deferred, a recorder alone, must still serve them).
    package func deferredStartDue(now: UInt64) -> Int {
        var waiting = 0
        var oldestWait: UInt64 = .max
        var previewStarting = false
        for case .subscriber(let session) in connections.values {
            if session.isAwaitingDeferredStart {
                waiting += 1
                oldestWait = min(oldestWait, session.welcomedAt)
            } else if !session.isDeferred && !session.hasHadFrame {
                previewStarting = true
            }
        }
        guard waiting > 0 else { return 0 }
        if deferral.isRequested { return waiting }
        guard limits.automaticallyRunsDeferredStart, !previewStarting else { return 0 }
        if deferral.previewHasRun || now &- oldestWait >= limits.deferredStartTimeout { return waiting }
        return 0
    }

    /// Runs deferred start: every waiting deferred subscriber receives frames from the next one on (its surfaces,
    /// and its format's conversion or encoding, start with that frame). Returns how many started.
    @discardableResult
    package mutating func runDeferredStart(now: UInt64) -> (started: Int, actions: [Action]) {
        var started = 0
        for case .subscriber(let session) in connections.values where session.isAwaitingDeferredStart {
            session.firstSequence = nextSequence
            started += 1
        }
        guard started > 0 else { return (0, []) }
        deferral.started.saturatingAdd(UInt64(started))
        var actions: [Action] = []
        log(
            .debug,
            "deferred-start",
            "deferred start: \(started) subscriber\(started == 1 ? "" : "s") receive frames from \(nextSequence) on",
            now: now,
            &actions
        )
        return (started, actions)
    }

    /// Frame `sequence` reached `session` (as a FRAME, or as a DROP when it could not be sent): a subscriber that
    /// is not deferred has then had its first frame, and the preview runs.
    mutating func noteFirstFrame(of session: SubscriberSession) {
        guard !session.hasHadFrame else { return }
        session.hasHadFrame = true
        if !session.isDeferred { deferral.previewHasRun = true }
    }
}
