import Foundation
import Glibc
import TestSupport
import Testing

@testable import FrameBus

/// The condition the subscriber's leader/follower hand-over and blocking poller wait on (review finding m2): its
/// timed waits run on `CLOCK_MONOTONIC`, the clock every deadline there is read from, so a wall-clock step cannot
/// stretch or cut them.
@Suite struct MonotonicConditionTests {
    @Test func theConditionsClockIsTheMonotonicClock() {
        #expect(MonotonicCondition().clock == CLOCK_MONOTONIC)
    }

    /// A deadline given in monotonic nanoseconds is kept on that clock: on the wall clock (what `NSCondition`'s
    /// `wait(until: Date)` uses) the same number lies decades in the past, and the wait would return at once.
    @Test func aTimedWaitEndsAtItsMonotonicDeadlineAndNotBefore() async throws {
        let waited = try await onDedicatedThread("monotonic-wait") { () -> (signalled: Bool, elapsed: UInt64) in
            let condition = MonotonicCondition()
            let start = Syscall.monotonicNanoseconds()
            let deadline = start + 50_000_000
            condition.lock()
            var signalled = false
            // Spurious wake-ups may end a wait early: wait again until the deadline, as every caller does.
            while Syscall.monotonicNanoseconds() < deadline {
                signalled = condition.wait(untilMonotonicNanoseconds: deadline) || signalled
                if !signalled { break }
            }
            condition.unlock()
            return (signalled, Syscall.monotonicNanoseconds() - start)
        }
        #expect(waited.signalled == false, "nobody signalled: the wait must end by its deadline")
        #expect(waited.elapsed >= 50_000_000, "the wait ended \(waited.elapsed) ns after it began, before its deadline")
        #expect(waited.elapsed < 30_000_000_000)
    }

    /// A broadcast ends a wait long before its deadline.
    @Test func aBroadcastEndsAWaitBeforeItsDeadline() async throws {
        let condition = MonotonicCondition()
        let flag = Flag()
        let waiting = DedicatedThreadTask("monotonic-waiter") { () -> Bool in
            condition.lock()
            defer { condition.unlock() }
            let deadline = Syscall.monotonicNanoseconds() + 60_000_000_000
            flag.set(1)
            while flag.get() != 2 {
                guard condition.wait(untilMonotonicNanoseconds: deadline) else { return false }
            }
            return true
        }
        #expect(await eventually(timeout: 30) { flag.get() == 1 })
        condition.lock()
        flag.set(2)
        condition.broadcast()
        condition.unlock()
        #expect(try await waiting.value)
    }
}

private final class Flag: @unchecked Sendable {
    // @unchecked: `value` is guarded by `lock`.
    private let lock = NSLock()
    private var value = 0
    func set(_ newValue: Int) { lock.withLock { value = newValue } }
    func get() -> Int { lock.withLock { value } }
}
