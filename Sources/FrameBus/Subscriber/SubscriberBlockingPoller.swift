import Foundation
import Synchronization

extension Subscriber {
    /// Makes a ``BlockingPoller``: the events go to threads that wait for them with
    /// ``BlockingPoller/next(timeoutNanoseconds:)``. Fails as ``makePoller(wake:)`` does when another consumer has the
    /// events.
    ///
    /// - Parameters:
    ///   - leadsOnCallerThread: whether a waiting thread runs the connection loop itself (``ConnectionLeadership``),
    ///     so that the publisher's wake-up lands on it: one wake-up per frame instead of two.
    ///   - callerThreadSlice: a scheduler slice to ask for, for each thread that runs the loop while it waits
    ///     (``Configuration/connectionThreadSlice`` explains why; it stays set after the call returns, so it is the
    ///     caller's choice). Nil: threads keep their slice.
    package func makeBlockingPoller(
        leadsOnCallerThread: Bool = true,
        callerThreadSlice: Duration? = nil
    ) throws(FrameBusError) -> BlockingPoller {
        try BlockingPoller(core: core, leadsOnCallerThread: leadsOnCallerThread, callerThreadSlice: callerThreadSlice)
    }

    /// Events for threads that are not Swift tasks (the C interface's `fb_subscriber_next_event`, a capture thread):
    /// ``next(timeoutNanoseconds:)`` takes the next waiting event, and when none waits it either runs the
    /// subscriber's connection loop on the calling thread until one comes (leader/follower,
    /// ``ConnectionLeadership``), or waits on a condition the connection thread signals. Events wait in the
    /// subscriber's own queue until a call takes them (latest-only replacement applies there), so a call that times
    /// out or is interrupted loses nothing. One thread waits at a time.
    package final class BlockingPoller: @unchecked Sendable {
        // @unchecked: `condition` is a lock; the rest is immutable or atomic.

        /// What ``next(timeoutNanoseconds:)`` found.
        package enum Result {
            case event(SubscriberEvent)
            /// No event will come: the stream ended for good (after its final `.ended` event) or the subscriber was
            /// cancelled.
            case finished
            case timedOut
            /// ``interrupt()`` was called.
            case interrupted
            /// Another thread is waiting on this poller.
            case busy
        }

        private let core: SubscriberCore
        private let poller: Poller
        /// Timed waits on `CLOCK_MONOTONIC` (`fb_subscriber_next_event`'s timeout must not follow the wall clock).
        private let condition: MonotonicCondition
        private let leadsOnCallerThread: Bool
        private let callerThreadSlice: UInt64?
        private let isInterrupted = Atomic<Bool>(false)
        private let isBusy = Atomic<Bool>(false)
        /// The last thread given ``callerThreadSlice`` (`pthread_self`, which costs no system call), so that a caller
        /// looping on one thread asks once.
        private let slicedThread = Atomic<UInt>(0)

        fileprivate init(core: SubscriberCore, leadsOnCallerThread: Bool, callerThreadSlice: Duration?) throws(FrameBusError) {
            self.core = core
            self.leadsOnCallerThread = leadsOnCallerThread
            self.callerThreadSlice = callerThreadSlice.map { UInt64(clamping: max($0.nanoseconds, 1)) }
            // `wake` holds the condition, not the poller: the subscriber keeps `wake`, and the poller the subscriber.
            let condition = MonotonicCondition()
            self.condition = condition
            poller = Poller(
                core: core,
                claim: try core.claimPoller {
                    condition.lock()
                    condition.broadcast()
                    condition.unlock()
                }
            )
        }

        /// Turns taken by waiting threads so far (``ConnectionLeadership``), for tests and benchmarks.
        package var callerTurns: UInt64 { core.leadership.callerTurns.load(ordering: .relaxed) }
        /// Frames that waiting threads read themselves during their turns, for tests and benchmarks.
        package var framesReadByCallers: UInt64 { core.leadership.framesReadByCallers.load(ordering: .relaxed) }

        /// Waits for the next event, for up to `timeoutNanoseconds` (negative: no limit; 0: only what is there, after
        /// reading what the publisher already sent when the loop is free).
        package func next(timeoutNanoseconds: Int64) -> Result {
            let deadline: UInt64? =
                timeoutNanoseconds < 0
                ? nil : Saturating.add(ProcessInfoShim.monotonicNanoseconds(), UInt64(timeoutNanoseconds))
            guard isBusy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else {
                return .busy
            }
            defer { isBusy.store(false, ordering: .releasing) }
            while true {
                if isInterrupted.load(ordering: .acquiring) { return .interrupted }
                switch poller.next() {
                case .event(let event): return .event(event)
                case .finished: return .finished
                case .empty: break
                }
                let time = ProcessInfoShim.monotonicNanoseconds()
                let hasTime = deadline.map { time < $0 } ?? true
                if leadsOnCallerThread, lead(deadline: deadline, asks: hasTime) {
                    if hasTime { continue }
                    // No time left: one pass that did not sleep, then what it read, or the timeout (looping would
                    // spin on a free loop until the connection thread's grace ends).
                    switch poller.next() {
                    case .event(let event): return .event(event)
                    case .finished: return .finished
                    case .empty: return .timedOut
                    }
                }
                if !hasTime { return .timedOut }
                switch waitForWake(deadline: deadline) {
                case .event(let event): return .event(event)
                case .finished: return .finished
                case .empty: continue  // woken, or the deadline passed: looked at again above
                }
            }
        }

        /// Runs the connection loop once on this thread, if it can have the loop; returns whether it ran.
        private func lead(deadline: UInt64?, asks: Bool) -> Bool {
            let leadership = core.leadership
            guard
                let connection = leadership.callerTurn(
                    asks: asks,
                    deadline: deadline,
                    ringDoorbell: { core.doorbell.ring() },
                    shouldStop: { isInterrupted.load(ordering: .relaxed) || core.isCancelled }
                )
            else { return false }
            if let slice = callerThreadSlice {
                let thread = UInt(pthread_self())
                if slicedThread.exchange(thread, ordering: .relaxed) != thread {
                    _ = Syscall.setSchedulerSlice(nanoseconds: slice)
                }
            }
            // With no time left, one pass that does not sleep.
            let live = connection.serviceAsCaller(deadline: asks ? deadline : ProcessInfoShim.monotonicNanoseconds())
            leadership.endCallerTurn(wakeConnectionThread: !live || core.isCancelled)
            return true
        }

        /// Takes the next event under the condition the connection thread signals, and waits on it (until `deadline`)
        /// when there is none.
        private func waitForWake(deadline: UInt64?) -> Poller.Result {
            condition.lock()
            defer { condition.unlock() }
            // Taken under `condition`, which `wake` locks too: an event that arrives after this finds the thread
            // waiting below, so its signal is never missed.
            let result = poller.next()
            guard case .empty = result, !isInterrupted.load(ordering: .acquiring) else { return result }
            if let deadline {
                let time = ProcessInfoShim.monotonicNanoseconds()
                if time < deadline {
                    condition.wait(untilMonotonicNanoseconds: deadline)
                }
            } else {
                condition.wait()
            }
            return .empty
        }

        /// Makes waiting calls return ``Result/interrupted`` until ``resume()``.
        package func interrupt() {
            isInterrupted.store(true, ordering: .releasing)
            condition.lock()
            condition.broadcast()
            condition.unlock()
            // A caller running the loop sleeps on the doorbell; one asking for the loop waits on the leadership.
            core.doorbell.ring()
            core.leadership.poke()
        }

        /// Ends an interruption.
        package func resume() {
            isInterrupted.store(false, ordering: .releasing)
        }
    }
}
