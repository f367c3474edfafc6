import Foundation
import Synchronization
import Testing
import TestSupport

@testable import FrameBus

/// `Subscriber.executor`: a `for await` loop over `events` under `withTaskExecutorPreference` runs on the subscriber's
/// connection thread (one wake-up per frame), gets every frame in order and releases each.
@Suite(.timeLimit(.minutes(5))) struct SubscriberExecutorTests {
    typealias Bus = SubscriberDelegateTests.Bus

    /// What a consumer loop saw: each frame's sequence and whether its body ran on the connection thread.
    final class LoopLog: Sendable {
        let entries = Mutex<[(sequence: UInt64, onConnectionThread: Bool)]>([])
        var sequences: [UInt64] { entries.withLock { $0.map(\.sequence) } }
        var threads: [Bool] { entries.withLock { $0.map(\.onConnectionThread) } }
    }

    /// Runs a loop over `events` (with `executor` as its preference, or none) until cancelled; each frame is dropped
    /// (released) when its iteration ends.
    static func consume(_ subscriber: Subscriber, executor: (any TaskExecutor)?, into log: LoopLog) -> Task<Void, Error>
    {
        Task(executorPreference: executor) {
            for try await event in subscriber.events {
                guard case .frame(let sample) = event else { continue }
                let sequence = sample.busSequenceNumber ?? .max
                log.entries.withLock { $0.append((sequence, subscriber.isOnConnectionThread)) }
            }
        }
    }

    static func publishInOrder(_ bus: Bus, _ count: Int, log: LoopLog) async throws {
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        for index in 0..<count {
            try bus.publish(index)
            // Each frame is seen and handed back before the next, whatever the machine's load.
            try #require(await eventually { log.sequences.count == index + 1 }, "frame \(index): \(log.sequences)")
            try #require(await eventually { bus.publisher.heldFrameCount == 0 }, "frame \(index) not released")
        }
    }

    @Test func aLoopUnderTheExecutorRunsOnTheConnectionThreadInOrderAndReleasesEveryFrame() async throws {
        let bus = try Bus("executor", delivery: .queue(depth: 8))
        defer { bus.stop() }
        let log = LoopLog()
        let loop = Self.consume(bus.subscriber, executor: bus.subscriber.executor, into: log)
        try await Self.publishInOrder(bus, 30, log: log)
        #expect(log.sequences == Array(0..<30))
        #expect(log.threads.allSatisfy { $0 }, "\(log.threads)")
        bus.subscriber.cancel()
        try await loop.value  // the loop ends after cancel (its last jobs run on the global executor)
        #expect(bus.subscriber.statistics.delivered == 30)
    }

    /// The same loop without the executor runs on the cooperative pool: the check above can fail.
    @Test func withoutTheExecutorTheLoopRunsOffTheConnectionThread() async throws {
        let bus = try Bus("no-executor", delivery: .queue(depth: 8))
        defer { bus.stop() }
        let log = LoopLog()
        let loop = Self.consume(bus.subscriber, executor: nil, into: log)
        try await Self.publishInOrder(bus, 10, log: log)
        #expect(log.sequences == Array(0..<10))
        #expect(log.threads.allSatisfy { !$0 }, "\(log.threads)")
        bus.subscriber.cancel()
        try await loop.value
    }

    /// `withTaskExecutorPreference` in a running task: its first hop (from the pool) wakes the connection thread; a
    /// loop that awaits something else in its body (a sleep) comes back to the connection thread.
    @Test func withTaskExecutorPreferenceHopsToTheConnectionThreadAndBack() async throws {
        let bus = try Bus("executor-pref", delivery: .queue(depth: 8))
        defer { bus.stop() }
        let log = LoopLog()
        let awaited = Mutex<[Bool]>([])
        let loop = Task {
            try await withTaskExecutorPreference(bus.subscriber.executor) {
                for try await frame in bus.subscriber.frames {
                    log.entries.withLock {
                        $0.append((frame.busSequenceNumber ?? .max, bus.subscriber.isOnConnectionThread))
                    }
                    try await Task.sleep(for: .milliseconds(1))
                    awaited.withLock { $0.append(bus.subscriber.isOnConnectionThread) }
                }
            }
        }
        try await Self.publishInOrder(bus, 5, log: log)
        #expect(log.sequences == Array(0..<5))
        #expect(log.threads.allSatisfy { $0 }, "\(log.threads)")
        #expect(await eventually { awaited.withLock { $0.count } == 5 })
        #expect(awaited.withLock { $0 }.allSatisfy { $0 })
        bus.subscriber.cancel()
        _ = try? await loop.value
    }

    /// A task that prefers the executor of a subscriber whose connection thread has ended still runs (on the global
    /// executor).
    @Test func afterTheConnectionThreadEndsJobsRunElsewhere() async throws {
        let bus = try Bus("executor-ended", delivery: .queue(depth: 8))
        bus.stop()
        #expect(await eventually { !bus.subscriber.isConnected })
        // Without a thread to run on, this task would never finish (the suite's time limit would end it).
        let events = await Task(executorPreference: bus.subscriber.executor) {
            var events = 0
            for try await _ in bus.subscriber.events { events += 1 }
            return events
        }.result
        #expect((try? events.get()) != nil)
    }
}
