import Foundation
import Synchronization
import Testing
import TestSupport

@testable import FrameBus

/// A delegate called on the subscriber's connection thread (`setDelegate(_:)`, the default): every event, in
/// order, on that thread, one callback at a time; handed over from and to a queue delegate without overlap; and
/// safe to cancel from.
@Suite(.timeLimit(.minutes(5))) struct ConnectionThreadDelegateTests {
    typealias Bus = SubscriberDelegateTests.Bus
    typealias CallbackLog = SubscriberDelegateTests.CallbackLog

    /// Records each callback, with `isOnItsQueue` meaning "on the connection thread"; can block in its first frame,
    /// cancel the subscription, or hand the following events to another delegate on a queue.
    final class ThreadDelegate: SubscriberDelegate, @unchecked Sendable {
        // @unchecked: constants, semaphores and the Mutex-guarded state only.
        let log: CallbackLog
        let name: String
        let entered = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        private let blocksInFirstFrame: Bool
        private let cancelsAtFirstFrame: Bool
        /// After the frame with this sequence number, the next events go to `successor` on its queue.
        private let handsOverAfter: UInt64?
        private let successor: SubscriberDelegateTests.RecordingDelegate?
        private let isFirst = Mutex(true)
        let endedOnThread = Mutex<String?>(nil)

        init(
            _ name: String,
            log: CallbackLog,
            blocksInFirstFrame: Bool = false,
            cancelsAtFirstFrame: Bool = false,
            handsOverAfter: UInt64? = nil,
            to successor: SubscriberDelegateTests.RecordingDelegate? = nil
        ) {
            self.name = name
            self.log = log
            self.blocksInFirstFrame = blocksInFirstFrame
            self.cancelsAtFirstFrame = cancelsAtFirstFrame
            self.handsOverAfter = handsOverAfter
            self.successor = successor
        }

        func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {
            let sequence = sampleBuffer.busSequenceNumber ?? .max
            log.enter(
                .init(
                    delegate: name,
                    sequence: sequence,
                    isOnItsQueue: subscriber.isOnConnectionThread
                )
            )
            defer { log.leave() }
            let isFirstFrame = isFirst.withLock { first in
                defer { first = false }
                return first
            }
            if cancelsAtFirstFrame, isFirstFrame { subscriber.cancel() }
            if blocksInFirstFrame, isFirstFrame {
                entered.signal()
                proceed.wait()
            }
            if let successor, sequence == handsOverAfter { subscriber.setDelegate(successor, queue: successor.queue) }
        }

        func subscriber(_ subscriber: Subscriber, didEndWith error: FrameBusError) {
            let thread = subscriber.isOnConnectionThread ? "connection" : Thread.isMainThread ? "main" : "other"
            endedOnThread.withLock { $0 = thread }
            log.ended(error)
        }
    }

    /// `setDelegate(_:)`, the default delegate.
    @Test func everyFrameOfTheDefaultDelegateArrivesInOrderOnTheConnectionThread() async throws {
        let bus = try Bus("thread-all", delivery: .queue(depth: 32))
        defer { bus.stop() }
        let log = CallbackLog()
        let delegate = ThreadDelegate("thread", log: log)
        bus.subscriber.setDelegate(delegate)
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        for index in 0..<20 {
            try bus.publish(index)
            // Within the subscriber's share of the pool: wait for it to hand frames back.
            #expect(await eventually { bus.publisher.heldFrameCount <= 2 })
        }
        #expect(await eventually { log.sequences(of: "thread").count == 20 }, "\(log.snapshot)")
        #expect(log.sequences(of: "thread") == Array(0..<20))
        #expect(log.snapshot.allSatisfy { $0.isOnItsQueue }, "\(log.snapshot)")
        #expect(log.concurrency == 1)
        #expect(await eventually { bus.publisher.heldFrameCount == 0 })
    }

    /// Events that wait when the delegate is set from another thread are handed to the connection thread (its
    /// doorbell), not delivered on the caller's thread.
    @Test func eventsWaitingWhenTheDelegateIsSetAreDeliveredOnTheConnectionThread() async throws {
        let bus = try Bus("thread-waiting", delivery: .queue(depth: 8))
        defer { bus.stop() }
        // No consumer yet: the frames wait.
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        for index in 0..<3 { try bus.publish(index) }
        #expect(await eventually { bus.subscriber.statistics.queueDepth == 3 })
        let log = CallbackLog()
        let delegate = ThreadDelegate("thread", log: log)
        bus.subscriber.setDelegate(delegate)
        #expect(await eventually { log.sequences(of: "thread").count == 3 }, "\(log.snapshot)")
        #expect(log.sequences(of: "thread") == [0, 1, 2])
        #expect(log.snapshot.allSatisfy { $0.isOnItsQueue }, "\(log.snapshot)")
    }

    /// From a queue delegate blocked in a callback to the connection thread, and from a connection-thread callback
    /// back to a queue: each event exactly once, in order, in its delegate's context, never two callbacks at once.
    @Test func handingOverBetweenAQueueAndTheConnectionThreadKeepsOrderAndNeverOverlaps() async throws {
        let bus = try Bus("thread-handover", delivery: .queue(depth: 8))
        defer { bus.stop() }
        let log = CallbackLog()
        let first = SubscriberDelegateTests.RecordingDelegate("queue1", log: log, blocksInFirstFrame: true)
        let last = SubscriberDelegateTests.RecordingDelegate("queue2", log: log)
        let middle = ThreadDelegate("thread", log: log, handsOverAfter: 3, to: last)
        bus.subscriber.setDelegate(first, queue: first.queue)
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        try bus.publish(0)
        #expect(await signalled(first.entered, within: 20))
        for index in 1...3 { try bus.publish(index) }
        #expect(await eventually { bus.subscriber.statistics.queueDepth == 3 })
        bus.subscriber.setDelegate(middle)
        // Setting the delegate started no second pass: the only one is the first delegate's, blocked in its
        // callback (not handed to the connection thread), and it has taken nothing since (no wait stands in for it).
        let (pass, waiting) = bus.subscriber.core.state.withLock { ($0.consumers.pass, $0.consumers.queue.frameCount) }
        #expect(pass == .running, "a second delivery pass was started or handed over")
        #expect(waiting == 3)
        #expect(log.sequences(of: "thread").isEmpty, "a callback ran while another was still running")
        first.proceed.signal()
        #expect(await eventually { log.sequences(of: "thread").count == 3 }, "\(log.snapshot)")
        for index in 4...5 { try bus.publish(index) }
        #expect(await eventually { log.sequences(of: "queue2").count == 2 }, "\(log.snapshot)")
        #expect(log.snapshot.map(\.sequence) == [0, 1, 2, 3, 4, 5])
        #expect(log.sequences(of: "queue1") == [0])
        #expect(log.sequences(of: "thread") == [1, 2, 3])
        #expect(log.sequences(of: "queue2") == [4, 5])
        #expect(log.snapshot.allSatisfy { $0.isOnItsQueue }, "\(log.snapshot)")
        #expect(log.concurrency == 1)
    }

    @Test func cancellingFromAConnectionThreadCallbackEndsTheSubscription() async throws {
        let bus = try Bus("thread-cancel", delivery: .queue(depth: 8))
        defer { bus.stop() }
        let log = CallbackLog()
        let delegate = ThreadDelegate("thread", log: log, cancelsAtFirstFrame: true)
        bus.subscriber.setDelegate(delegate)
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        try bus.publish(0)
        try? bus.publish(1)
        #expect(await eventually { bus.publisher.subscriberCount == 0 }, "the subscriber did not hang up")
        #expect(await eventually { bus.publisher.heldFrameCount == 0 })
        #expect(log.sequences(of: "thread") == [0])
        #expect(!bus.subscriber.isConnected)
    }

    /// Once the connection thread has returned (the stream ended, no reconnects), a delegate set afterwards still
    /// gets the waiting end, on the thread that set it.
    @Test func aDelegateSetAfterTheConnectionThreadEndedGetsTheWaitingEvents() async throws {
        let bus = try Bus("thread-ended", delivery: .queue(depth: 8))
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        bus.publisher.stop()
        #expect(await eventually { !bus.subscriber.isConnected })
        // The end waits in the queue; the connection thread has returned.
        try #require(
            await eventually { bus.subscriber.core.state.withLock { $0.consumers.isConnectionThreadFinished } }
        )
        let log = CallbackLog()
        let delegate = ThreadDelegate("thread", log: log)
        let setter = Thread {
            bus.subscriber.setDelegate(delegate)
        }
        setter.start()
        #expect(await eventually { log.ending != nil })
        #expect(log.ending?.code == .endOfStream, "\(String(describing: log.ending))")
        let thread = delegate.endedOnThread.withLock { $0 }
        // On the setter's thread if the connection thread had returned, else on the connection thread.
        #expect(thread == "other" || thread == "connection", "\(String(describing: thread))")
        bus.subscriber.cancel()
    }
}
