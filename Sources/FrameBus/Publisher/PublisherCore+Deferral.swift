import Synchronization

// Deferred start's IO side: before a frame, whether deferred subscribers start with it, the producer told before and
// after (docs/ARCHITECTURE.md, "Capture lifecycle"). The decision is the machine's (PublisherStateMachine+Deferral).

extension PublisherCore {
    /// Before a frame is published (outside the publishing lock, so that the producer's handler may publish): runs
    /// deferred start if it is due, telling the producer first. Returns how many subscribers started (then the caller
    /// tells the producer ``Publisher/DeferredStart/didRun(subscriberCount:)`` once the frame is out).
    ///
    /// Costs one relaxed load per frame while no deferred subscriber waits: the loop thread raises
    /// `deferredStartPending` when it welcomes one, and this lowers it when none waits any more.
    func startDeferredSubscribersIfDue() -> Int {
        guard deferredStartPending.load(ordering: .acquiring) else { return 0 }
        let now = ProcessInfoShim.monotonicNanoseconds()
        let due = withState { state -> Int in
            let due = state.machine.deferredStartDue(now: now)
            if state.machine.awaitingDeferredStartCount == 0 { deferredStartPending.store(false, ordering: .releasing) }
            return due
        }
        guard due > 0 else { return 0 }
        configuration.deferredStartHandler?(.willRun(subscriberCount: due))
        return withState { state -> Int in
            let (started, actions) = state.machine.runDeferredStart(now: ProcessInfoShim.monotonicNanoseconds())
            perform(actions, &state)
            if state.machine.awaitingDeferredStartCount == 0 { deferredStartPending.store(false, ordering: .releasing) }
            return started
        }
    }

    /// The work of ``Publisher/runDeferredStartWhenNeeded()``.
    func requestDeferredStart() {
        withState { state in state.machine.requestDeferredStart() }
        deferredStartPending.store(true, ordering: .releasing)
    }

    /// After a HELLO was handled: a deferred subscriber may now wait, so `publish` must look before each frame.
    func noteDeferredSubscribers(_ state: inout State) {
        guard state.machine.deferral.welcomedDeferred else { return }
        state.machine.deferral.welcomedDeferred = false
        deferredStartPending.store(true, ordering: .releasing)
    }
}
