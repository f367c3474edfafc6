import Foundation
import Synchronization

/// Runs `body` on a thread of its own and waits for it without holding a thread of Swift's cooperative pool.
///
/// For blocking waits (a semaphore, a poller, a blocking read): the pool has as many threads as the machine has cores
/// (two on a small CI runner), and a blocked pool thread stalls every other test of the process. Starts at once: a
/// wait must never queue behind ``heavyWork(_:)`` (a poller test once waited 500 s there for the corpus tests).
/// Do not call `#expect` inside `body` (the test's context does not reach a plain thread): return what to check.
public func onDedicatedThread<Result: Sendable>(
    _ name: String = "test-worker",
    _ body: @escaping @Sendable () throws -> Result
) async throws -> Result {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Result, any Error>) in
        let thread = Thread {
            do {
                continuation.resume(returning: try body())
            } catch {
                continuation.resume(throwing: error)
            }
        }
        thread.name = name
        thread.start()
    }
}

/// Polls `condition` every 5 ms until it holds or `timeout` seconds of polling pass; suspends between polls, so it
/// never holds a thread of the cooperative pool. Returns whether the condition held; gives up at once when the task is
/// cancelled (as a test is at its time limit).
///
/// The time counted is the sleeps asked for, not the clock: a test whose task could not run for a while (other tests
/// held every thread of the pool on a loaded machine) does not find its time used up by the wait it never made.
@discardableResult
public func eventually(timeout: Double = 60, _ condition: () throws -> Bool) async rethrows -> Bool {
    let interval = Duration.milliseconds(5)
    var waited = Duration.zero
    let limit = Duration.milliseconds(Int(timeout * 1000))
    while waited < limit, !Task.isCancelled {
        if try condition() { return true }
        let before = ContinuousClock.now
        try? await Task.sleep(for: interval)
        // A poll that overslept by more than a second was starved, not waiting: count only what was asked for.
        let slept = ContinuousClock.now - before
        waited += slept > interval + .seconds(1) ? interval : slept
    }
    return try condition()
}

/// An error of the test harness itself (a missing executable, a child that did not start).
public struct TestSupportError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Waits up to `seconds` for `semaphore` to be signalled, on a thread of its own: the waiting test suspends and holds
/// no thread of the cooperative pool meanwhile. Returns whether it was signalled.
public func signalled(_ semaphore: DispatchSemaphore, within seconds: Double) async -> Bool {
    await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        let thread = Thread {
            continuation.resume(returning: semaphore.wait(timeout: .now() + seconds) == .success)
        }
        thread.name = "test-semaphore-wait"
        thread.start()
    }
}

/// `body` started on a thread of its own at once, before the caller's next suspension; ``value`` waits for its result
/// without holding a thread of Swift's cooperative pool.
///
/// For the test's side of a dialogue whose peer starts a clock before the test could resume: a child process that
/// connects and waits 5 s for an answer is started after this thread, so the answer never waits for the test's task
/// to get a pool thread back (at the start of a run that took seconds). Await ``value`` once. Do not call `#expect`
/// inside `body`: return what to check.
public final class DedicatedThreadTask<Result: Sendable>: Sendable {
    private struct State {
        var outcome: Swift.Result<Result, any Error>?
        var waiter: CheckedContinuation<Result, any Error>?
    }

    private let state = Mutex(State())

    public init(_ name: String = "test-worker", _ body: @escaping @Sendable () throws -> Result) {
        let thread = Thread { [self] in
            let outcome = Swift.Result { try body() }
            let waiter = state.withLock { state -> CheckedContinuation<Result, any Error>? in
                if let waiter = state.waiter {
                    state.waiter = nil
                    return waiter
                }
                state.outcome = outcome
                return nil
            }
            waiter?.resume(with: outcome)
        }
        thread.name = name
        thread.start()
    }

    /// The body's result (or what it threw), once it has returned.
    public var value: Result {
        get async throws {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Result, any Error>) in
                let outcome = state.withLock { state -> Swift.Result<Result, any Error>? in
                    if let outcome = state.outcome { return outcome }
                    state.waiter = continuation
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        }
    }
}
