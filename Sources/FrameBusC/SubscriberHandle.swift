import Foundation
import FrameBus

/// The Swift side of `fb_subscriber`: a ``Subscriber`` whose events a C thread waits for with a timeout.
///
/// C threads are not Swift tasks, so they cannot `await`. The handle takes the events with a
/// `Subscriber.BlockingPoller`: the C thread takes the next waiting event itself, and when there is none it runs the
/// subscriber's connection loop on its own thread until one comes (leader/follower), so the publisher's wake-up lands
/// on the thread that consumes the frame: one wake-up per frame, with no task, queue or second thread in between.
/// Between calls the subscriber's connection thread takes the loop back after a short grace. Events wait in the
/// subscriber's own queue until a call takes them (latest-only replacement applies there), so a call that times out
/// or is interrupted loses nothing.
final class SubscriberHandle: Sendable {
    let subscriber: Subscriber
    private let poller: Subscriber.BlockingPoller

    init(configuration: Subscriber.Configuration, callerThreadSlice: Duration?) throws(FrameBusError) {
        subscriber = try Subscriber(configuration: configuration)
        poller = try subscriber.makeBlockingPoller(callerThreadSlice: callerThreadSlice)
    }

    /// Waits for the next event, for up to `timeoutNanoseconds` (negative: no limit; 0: only what is there).
    func nextEvent(timeoutNanoseconds: Int64) -> Result<SubscriberEvent, ABIError> {
        switch poller.next(timeoutNanoseconds: timeoutNanoseconds) {
        case .event(let event):
            .success(event)
        case .finished:
            .failure(ABIError(.closed, "fb_subscriber_next_event: no more events"))
        case .timedOut:
            .failure(ABIError(.timedOut, "fb_subscriber_next_event: no event within the timeout"))
        case .interrupted:
            .failure(ABIError(.interrupted, "fb_subscriber_next_event: interrupted"))
        case .busy:
            .failure(ABIError(.busy, "fb_subscriber_next_event: another thread waits on this subscriber"))
        }
    }

    /// Makes waiting calls return ``ABIStatus/interrupted`` until ``resume()``.
    func interrupt() { poller.interrupt() }

    /// Ends an interruption.
    func resume() { poller.resume() }

    /// Stops the subscription: says goodbye and ends the wait in progress.
    func cancel() {
        subscriber.cancel()
        interrupt()
    }
}
