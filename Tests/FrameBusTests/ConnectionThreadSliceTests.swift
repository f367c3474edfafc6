import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

@testable import FrameBus

/// `Subscriber.Configuration.connectionThreadSlice`: the connection thread asks the kernel for a short scheduler
/// slice while frames are consumed on it (a delegate on the connection thread, a loop under the executor), and
/// returns to the default slice while they go to another thread (a queue delegate). Read back from the kernel with
/// `sched_getattr` on the connection thread's id.
/// Whether this kernel reads a slice from `sched_setattr` (Linux 6.12+), for the suite's trait.
enum SchedulerSliceSupport {
    static let kernelRelease: String = {
        var names = utsname()
        uname(&names)
        return withUnsafeBytes(of: names.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }()

    /// Linux 6.12 and later read `sched_runtime` of a SCHED_OTHER thread as the slice it asks for.
    static let isAvailable: Bool = {
        let parts = kernelRelease.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        guard parts.count == 2 else { return false }
        return parts[0] > 6 || (parts[0] == 6 && parts[1] >= 12)
    }()
}

@Suite(
    .timeLimit(.minutes(5)),
    .enabled(
        if: SchedulerSliceSupport.isAvailable,
        "needs Linux 6.12+ (an EEVDF slice asked for with sched_setattr); this kernel is \(SchedulerSliceSupport.kernelRelease)"
    )
)
struct ConnectionThreadSliceTests {
    typealias Bus = SubscriberDelegateTests.Bus

    /// The slice a thread that never asked runs with (this test's thread, the kernel's default).
    static func defaultSlice() throws -> Int64 {
        try Syscall.schedulerSlice(threadID: Syscall.currentThreadID).get()
    }

    static func connectionThreadSlice(_ subscriber: Subscriber) throws -> Int64 {
        let id = subscriber.core.connectionThreadID.load(ordering: .relaxed)
        try #require(id != 0, "the connection thread has not started")
        return try Syscall.schedulerSlice(threadID: id).get()
    }

    /// Counts the frames a delegate got.
    final class CountingDelegate: SubscriberDelegate, @unchecked Sendable {
        // @unchecked: the Mutex-guarded count and a constant queue only.
        let frames = Mutex(0)
        let queue = DispatchQueue(label: "slice-tests.delegate")
        func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {
            frames.withLock { $0 += 1 }
        }
    }

    /// Publishes `count` frames, each seen and handed back before the next: the connection thread has gone round its
    /// loop (where it adjusts its slice) after each frame but the last.
    static func publish(_ bus: Bus, _ count: Int, seen: @escaping @Sendable () -> Int) async throws {
        try #require(await eventually { bus.publisher.subscriberCount == 1 })
        let start = seen()
        for index in 0..<count {
            try bus.publish(index)
            try #require(await eventually { seen() == start + index + 1 }, "frame \(index) not seen")
            try #require(await eventually { bus.publisher.heldFrameCount == 0 }, "frame \(index) not released")
        }
    }

    @Test func aDelegateOnTheConnectionThreadGetsTheShortSliceAndAQueueDelegateTheDefault() async throws {
        let bus = try Bus("slice-delegate", delivery: .queue(depth: 4))
        defer { bus.stop() }
        let defaultSlice = try Self.defaultSlice()
        try #require(defaultSlice != 100_000, "this thread already runs with the slice under test")
        let delegate = CountingDelegate()
        bus.subscriber.setDelegate(delegate)
        try await Self.publish(bus, 3) { delegate.frames.withLock { $0 } }
        #expect(try Self.connectionThreadSlice(bus.subscriber) == 100_000)
        // The frames now go to a queue: the thread goes back to the kernel's default.
        bus.subscriber.setDelegate(delegate, queue: delegate.queue)
        try await Self.publish(bus, 3) { delegate.frames.withLock { $0 } }
        #expect(try Self.connectionThreadSlice(bus.subscriber) == defaultSlice)
        // And back.
        bus.subscriber.setDelegate(delegate)
        try await Self.publish(bus, 3) { delegate.frames.withLock { $0 } }
        #expect(try Self.connectionThreadSlice(bus.subscriber) == 100_000)
    }

    @Test func aLoopUnderTheExecutorGetsTheShortSliceAndOneOnThePoolTheDefault() async throws {
        for usesExecutor in [true, false] {
            let bus = try Bus("slice-loop", delivery: .queue(depth: 4))
            defer { bus.stop() }
            let log = SubscriberExecutorTests.LoopLog()
            let loop = SubscriberExecutorTests.consume(
                bus.subscriber,
                executor: usesExecutor ? bus.subscriber.executor : nil,
                into: log
            )
            try await Self.publish(bus, 3) { log.sequences.count }
            #expect(log.threads == [Bool](repeating: usesExecutor, count: 3), "\(log.threads)")
            let expected = usesExecutor ? 100_000 : try Self.defaultSlice()
            #expect(try Self.connectionThreadSlice(bus.subscriber) == expected, "executor: \(usesExecutor)")
            bus.subscriber.cancel()
            try await loop.value
        }
    }

    @Test func theSliceAskedForIsTheOneConfiguredAndNilAsksForNone() async throws {
        for (configured, expected) in [(Duration.milliseconds(2), Int64(2_000_000)), (nil, try Self.defaultSlice())] {
            let bus = try Bus("slice-config", delivery: .queue(depth: 4)) { $0.connectionThreadSlice = configured }
            defer { bus.stop() }
            let delegate = CountingDelegate()
            bus.subscriber.setDelegate(delegate)
            try await Self.publish(bus, 3) { delegate.frames.withLock { $0 } }
            #expect(try Self.connectionThreadSlice(bus.subscriber) == expected, "\(String(describing: configured))")
        }
    }
}
