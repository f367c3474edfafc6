import Foundation
import FrameBus

/// The Swift side of `fb_subscriber`: a ``Subscriber`` whose asynchronous ``Subscriber/events`` a C thread waits
/// for with a timeout.
///
/// C threads are not Swift tasks, so they cannot `await`. One *fetch* at a time, a task running on the concurrency
/// pool, awaits the next event and hands it over under `condition`; the C thread blocks on `condition` until the
/// fetch has a result, its deadline passes, or ``interrupt()``. A C thread never blocks a pool thread and never waits
/// for the pool to run anything, so it cannot deadlock with it, and it returns at its deadline whatever the pool or
/// the publisher do.
///
/// A fetch that is still waiting when a call times out is kept, not cancelled, so a caller that polls (timeout 0)
/// gets the event on a later call and nothing is lost. ``interrupt()`` cancels the fetch: the subscriber keeps the
/// event in its own queue (where latest-only replacement applies), or, if the event was already taken in that
/// instant, the fetch keeps it for the next call.
final class SubscriberHandle: @unchecked Sendable {
    // @unchecked: every mutable property is read and written only with `condition` locked (`iterator`: by the one
    // fetch in flight, which reads it and writes it back under the lock; a new fetch starts only after the previous
    // one recorded its outcome).

    /// The result of one fetch.
    enum Outcome {
        case event(SubscriberEvent)
        /// The event sequence ended (or the fetch was cancelled before it had an event).
        case finished
        case failed(ABIError)
    }

    /// One await of the next event.
    private final class Fetch: @unchecked Sendable {
        // @unchecked: guarded by the handle's `condition`.
        var task: Task<Void, Never>?
        var outcome: Outcome?
        var isCancelled = false
    }

    let subscriber: Subscriber
    private let condition = NSCondition()
    private var iterator: Subscriber.Events.Iterator
    private var fetch: Fetch?
    private var isBusy = false
    private var isInterrupted = false
    private var isFinished = false

    init(configuration: Subscriber.Configuration) throws(FrameBusError) {
        subscriber = try Subscriber(configuration: configuration)
        iterator = subscriber.events.makeAsyncIterator()
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
            if let current = fetch, let outcome = current.outcome {
                // Hand the event over completely: a frame kept here would stay held after C releases it.
                fetch = nil
                current.outcome = nil
                current.task = nil
                switch outcome {
                case .event(let event):
                    return .success(event)
                case .finished where current.isCancelled:
                    continue
                case .finished:
                    isFinished = true
                case .failed(let error):
                    return .failure(error)
                }
            }
            if isInterrupted {
                cancelFetchLocked()
                return .failure(ABIError(.interrupted, "fb_subscriber_next_event: interrupted"))
            }
            if isFinished {
                return .failure(ABIError(.closed, "fb_subscriber_next_event: no more events"))
            }
            if fetch == nil { startFetchLocked() }
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
        cancelFetchLocked()
        condition.broadcast()
        condition.unlock()
    }

    /// Ends an interruption.
    func resume() {
        condition.lock()
        isInterrupted = false
        condition.unlock()
    }

    /// Stops the subscription: says goodbye and ends the fetch in flight.
    func cancel() {
        subscriber.cancel()
        interrupt()
    }

    /// Hands a fetch's outcome over. `consuming`: the fetch task keeps no reference to the event, so a frame C
    /// releases is released at once, not when the task finishes.
    private func record(_ outcome: consuming Outcome, of fetch: Fetch, iterator: Subscriber.Events.Iterator) {
        condition.lock()
        self.iterator = iterator
        fetch.outcome = consume outcome
        condition.broadcast()
        condition.unlock()
    }

    private func cancelFetchLocked() {
        guard let fetch, fetch.outcome == nil, !fetch.isCancelled else { return }
        fetch.isCancelled = true
        fetch.task?.cancel()
    }

    private func startFetchLocked() {
        let started = Fetch()
        fetch = started
        var iterator = self.iterator
        started.task = Task { [self] in
            let outcome: Outcome
            do {
                if let event = try await iterator.next() { outcome = .event(event) } else { outcome = .finished }
            } catch {
                outcome = .failed(ABIError(any: error))
            }
            record(consume outcome, of: started, iterator: iterator)
        }
    }
}
