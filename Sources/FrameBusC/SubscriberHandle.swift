import Foundation
import FrameBus

/// The Swift side of `fb_subscriber`: a ``Subscriber`` whose events a C thread waits for with a timeout.
///
/// C threads are not Swift tasks, so they cannot `await`. The handle takes the events with a `Subscriber.Poller`:
/// the C thread takes the next waiting event itself, and when there is none it blocks on `condition`, which the
/// subscriber's connection thread signals (the poller's `wake`) when an event arrives. So a frame costs one wake-up
/// of the C thread after the connection thread read it, with no task or queue in between. Events wait in the
/// subscriber's own queue until a call takes them (latest-only replacement applies there), so a call that times out
/// or is interrupted loses nothing. A C thread never blocks a library thread: `wake` only locks `condition` and
/// signals it.
final class SubscriberHandle: @unchecked Sendable {
    // @unchecked: every mutable property is read and written only with `condition` locked.

    let subscriber: Subscriber
    private let condition: NSCondition
    private let poller: Subscriber.Poller
    private var isBusy = false
    private var isInterrupted = false

    init(configuration: Subscriber.Configuration) throws(FrameBusError) {
        subscriber = try Subscriber(configuration: configuration)
        // `wake` holds the condition, not the handle: the subscriber keeps `wake`, and the handle the subscriber.
        let condition = NSCondition()
        self.condition = condition
        poller = try subscriber.makePoller {
            condition.lock()
            condition.broadcast()
            condition.unlock()
        }
    }

    /// Waits for the next event, for up to `timeoutNanoseconds` (negative: no limit; 0: only what is there).
    func nextEvent(timeoutNanoseconds: Int64) -> Result<SubscriberEvent, ABIError> {
        let deadline = MonotonicDeadline(timeoutNanoseconds: timeoutNanoseconds)
        condition.lock()
        defer { condition.unlock() }
        guard !isBusy else {
            return .failure(ABIError(.busy, "fb_subscriber_next_event: another thread waits on this subscriber"))
        }
        isBusy = true
        defer { isBusy = false }
        while true {
            if isInterrupted {
                return .failure(ABIError(.interrupted, "fb_subscriber_next_event: interrupted"))
            }
            // Taken under `condition`, which `wake` locks too: an event that arrives after this finds the thread
            // waiting below, so its signal is never missed.
            switch poller.next() {
            case .event(let event):
                return .success(event)
            case .finished:
                return .failure(ABIError(.closed, "fb_subscriber_next_event: no more events"))
            case .empty:
                break
            }
            if deadline.hasPassed {
                return .failure(ABIError(.timedOut, "fb_subscriber_next_event: no event within the timeout"))
            }
            deadline.wait(on: condition)
        }
    }

    /// Makes waiting calls return ``ABIStatus/interrupted`` until ``resume()``.
    func interrupt() {
        condition.lock()
        isInterrupted = true
        condition.broadcast()
        condition.unlock()
    }

    /// Ends an interruption.
    func resume() {
        condition.lock()
        isInterrupted = false
        condition.unlock()
    }

    /// Stops the subscription: says goodbye and ends the wait in progress.
    func cancel() {
        subscriber.cancel()
        interrupt()
    }
}
