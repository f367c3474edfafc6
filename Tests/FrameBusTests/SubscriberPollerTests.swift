import Foundation
import Synchronization
import Testing
import TestSupport

@testable import FrameBus

/// `Subscriber.makePoller`, the consumer the C interface's `fb_subscriber_next_event` uses: events wait in the
/// subscriber's queue until taken, `wake` is called when one may be there, and it is one consumer among the others.
@Suite(.timeLimit(.minutes(5))) struct SubscriberPollerTests {
    typealias Bus = SubscriberDelegateTests.Bus

    /// Takes events until `count` frames came, waiting for `wake` between polls.
    static func takeFrames(
        _ count: Int,
        from poller: Subscriber.Poller,
        signal: DispatchSemaphore
    ) -> [UInt64] {
        var sequences: [UInt64] = []
        while sequences.count < count {
            switch poller.next() {
            case .event(.frame(let sample)): sequences.append(sample.busSequenceNumber ?? .max)
            case .event: continue
            case .empty: if signal.wait(timeout: .now() + 20) == .timedOut { return sequences }
            case .finished: return sequences
            }
        }
        return sequences
    }

    @Test func framesWaitUntilTakenAndWakeSignalsTheirArrival() async throws {
        let bus = try Bus("poller", delivery: .queue(depth: 8))
        defer { bus.stop() }
        let signal = DispatchSemaphore(value: 0)
        let wakes = Atomic<Int>(0)
        let poller = try bus.subscriber.makePoller {
            wakes.add(1, ordering: .relaxed)
            signal.signal()
        }
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        for index in 0..<3 { try bus.publish(index) }
        #expect(await eventually { bus.subscriber.statistics.queueDepth == 3 })
        #expect(wakes.load(ordering: .relaxed) >= 3)
        #expect(try await onDedicatedThread { Self.takeFrames(3, from: poller, signal: signal) } == [0, 1, 2])
        // Nothing waits now.
        if case .empty = poller.next() {} else { Issue.record("expected nothing to wait") }
        try bus.publish(3)
        #expect(try await onDedicatedThread { Self.takeFrames(1, from: poller, signal: signal) } == [3])
    }

    @Test func latestOnlyReplacesAFrameThatWaitsUntaken() async throws {
        let bus = try Bus("poller-latest", delivery: .latestOnly)
        defer { bus.stop() }
        let signal = DispatchSemaphore(value: 0)
        let poller = try bus.subscriber.makePoller { signal.signal() }
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        for index in 0..<4 {
            try bus.publish(index)
            #expect(await eventually { bus.publisher.heldFrameCount <= 1 })
        }
        #expect(await eventually { bus.subscriber.statistics.dropped[.frameWasLate] == 3 })
        var late: UInt64 = 0
        var frames: [UInt64] = []
        taking: while true {
            switch poller.next() {
            case .event(.frame(let sample)): frames.append(sample.busSequenceNumber ?? .max)
            case .event(.dropped(let drop)): late += drop.frameCount
            case .event: continue
            case .empty, .finished: break taking
            }
        }
        #expect(frames == [3])
        #expect(late == 3)
    }

    @Test func aPollerIsOneConsumerAndCancellingFinishesIt() async throws {
        let bus = try Bus("poller-one", delivery: .queue(depth: 4))
        defer { bus.stop() }
        let woken = DispatchSemaphore(value: 0)
        let poller = try bus.subscriber.makePoller { woken.signal() }
        #expect(throws: FrameBusError.self) { _ = try bus.subscriber.makePoller {} }
        var events = bus.subscriber.events.makeAsyncIterator()
        await #expect(throws: FrameBusError.self) { _ = try await events.next() }
        bus.subscriber.cancel()
        #expect(await signalled(woken, within: 20), "cancel did not wake the poller")
        if case .finished = poller.next() {} else { Issue.record("a cancelled subscriber's poller is not finished") }
    }
}
