import Synchronization

/// Who runs a subscriber's connection loop (``SubscriberConnection``): its own thread, or a thread that waits for the
/// next event with a ``Subscriber/BlockingPoller`` (the C interface's `fb_subscriber_next_event`).
///
/// A poller whose thread only waited on a condition cost two wake-ups per frame: the publisher woke the connection
/// thread, which read the frame and woke the waiting thread. Leader/follower hands the loop to the waiting thread
/// instead, so the publisher's wake-up lands on the thread that consumes the frame: while a caller waits, it runs the
/// loop itself (``callerTurn(asks:deadline:ringDoorbell:shouldStop:)``), and the connection thread parks.
///
/// Handing over costs nothing per frame. A caller that finds the loop free takes it; one that finds the connection
/// thread running it asks it to yield (the doorbell, one wake-up) and waits for the turn. A caller that returns to
/// its own work keeps the connection thread parked for ``callerGrace``, so a caller looping over frames takes the
/// turn back without waking anyone; after that the connection thread takes the loop back (reading, replacing and
/// dropping frames as always, reconnecting), so a caller that stops calling costs what a slow consumer costs. The
/// parked connection thread looks every ``callerGrace`` (a timed wait, not a wake-up on the frame's path).
///
/// Everything the loop owns is touched only by the thread whose turn it is; the lock orders the hand-overs.
final class ConnectionLeadership: @unchecked Sendable {
    // @unchecked: every mutable property is read and written only with `condition` locked.

    enum Leader: Equatable {
        case nobody
        case connectionThread
        case caller
        /// The connection thread returned: nobody runs the loop again.
        case finished
    }

    /// How long the connection thread stays parked after a caller gave the loop back: longer than a caller looping
    /// over frames spends on one frame, short enough that a caller that went away leaves the stream unread (and its
    /// publisher unanswered) briefly. The futex liveness interval (docs/PROTOCOL.md §9.8).
    static let callerGrace: UInt64 = 20_000_000

    /// Timed waits on `CLOCK_MONOTONIC`, as every deadline here is (a wall-clock step must not stretch the park).
    private let condition = MonotonicCondition()
    private var leader = Leader.nobody
    /// A caller asked the connection thread to yield and waits for the turn.
    private var callerWaits = false
    /// When a caller last gave the loop back (monotonic nanoseconds; 0: never).
    private var callerLeftAt: UInt64 = 0
    private var connection: SubscriberConnection?
    /// Whether a session is established, so that a caller may run the loop (written by whoever runs it).
    let sessionIsLive = Atomic<Bool>(false)
    /// Turns a caller took, and frames read during them, for tests and benchmarks.
    let callerTurns = Atomic<UInt64>(0)
    let framesReadByCallers = Atomic<UInt64>(0)

    private var now: UInt64 { ProcessInfoShim.monotonicNanoseconds() }

    // MARK: The connection thread

    /// The connection thread starts with `connection`.
    func attach(_ connection: SubscriberConnection) {
        condition.lock()
        self.connection = connection
        condition.unlock()
    }

    /// Waits until the connection thread may run the loop: no caller runs it, asks for it, or gave it back less than
    /// ``callerGrace`` ago (unless `isCancelled`, which ends the grace: the thread must return soon).
    func connectionThreadTurn(isCancelled: () -> Bool) {
        condition.lock()
        defer { condition.unlock() }
        while true {
            precondition(leader != .finished && leader != .connectionThread, "connection thread turn taken twice")
            if leader == .caller || callerWaits {
                condition.wait(untilMonotonicNanoseconds: now &+ Self.callerGrace)
                continue
            }
            let since = now &- callerLeftAt
            if callerLeftAt != 0, since < Self.callerGrace, !isCancelled() {
                condition.wait(untilMonotonicNanoseconds: now &+ (Self.callerGrace - since))
                continue
            }
            leader = .connectionThread
            return
        }
    }

    /// The connection thread ends a turn (one pass of its loop); a caller waiting for the loop gets it.
    func endConnectionThreadTurn() {
        condition.lock()
        leader = .nobody
        if callerWaits { condition.broadcast() }
        condition.unlock()
    }

    /// The connection thread returns, during its turn: nobody runs the loop again.
    func finish() {
        condition.lock()
        leader = .finished
        connection = nil
        sessionIsLive.store(false, ordering: .relaxed)
        condition.broadcast()
        condition.unlock()
    }

    // MARK: A caller

    /// Takes the loop for the calling thread while a session is live; nil when it cannot (no session, the loop
    /// finished, `deadline` passed or `shouldStop` said so while the connection thread was asked to yield). `asks`:
    /// whether to ask a connection thread that runs the loop to yield (false: take the loop only if it is free).
    /// Give it back with ``endCallerTurn(wakeConnectionThread:)``.
    func callerTurn(
        asks: Bool,
        deadline: UInt64?,
        ringDoorbell: () -> Void,
        shouldStop: () -> Bool
    ) -> SubscriberConnection? {
        condition.lock()
        defer { condition.unlock() }
        guard leader != .finished, leader != .caller, sessionIsLive.load(ordering: .relaxed) else { return nil }
        if leader == .connectionThread {
            guard asks else { return nil }
            callerWaits = true
            defer {
                callerWaits = false
                // A connection thread that parked because we asked need not wait out its grace if we gave up.
                if leader != .caller { condition.broadcast() }
            }
            ringDoorbell()
            while leader == .connectionThread {
                if shouldStop() { return nil }
                if let deadline {
                    let time = now
                    guard time < deadline else { return nil }
                    condition.wait(untilMonotonicNanoseconds: deadline)
                } else {
                    condition.wait()
                }
            }
            guard leader == .nobody, sessionIsLive.load(ordering: .relaxed) else { return nil }
        }
        leader = .caller
        callerTurns.add(1, ordering: .relaxed)
        return connection
    }

    /// A caller gives the loop back; `wakeConnectionThread` when the connection thread must take it at once (the
    /// session ended: it reconnects or finishes; the subscriber was cancelled).
    func endCallerTurn(wakeConnectionThread: Bool) {
        condition.lock()
        precondition(leader == .caller, "a caller ended a turn it did not have")
        leader = .nobody
        callerLeftAt = wakeConnectionThread ? 0 : now
        // A parked connection thread is not woken otherwise: it looks again after the grace, so a caller looping
        // over frames costs it no wake-up per frame.
        if wakeConnectionThread { condition.broadcast() }
        condition.unlock()
    }

    /// Wakes whoever waits here, to look again (cancellation, an interrupted caller).
    func poke() {
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }
}
