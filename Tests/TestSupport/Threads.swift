import Foundation

/// Runs `body` on a thread of its own and waits for it without holding a thread of Swift's cooperative pool.
///
/// The pool has as many threads as the machine has cores (two on a small CI runner): CPU-heavy or blocking work run
/// inline in an async test would stall every other test of the process, and the peers they talk to would time out.
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

/// Polls `condition` every 5 ms until it holds or `timeout` seconds pass; suspends between polls, so it never holds a
/// thread of the cooperative pool. Returns whether the condition held; gives up at once when the task is cancelled
/// (as a test is at its time limit).
@discardableResult
public func eventually(timeout: Double = 60, _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    while ContinuousClock.now < deadline, !Task.isCancelled {
        if try condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return try condition()
}

/// An error of the test harness itself (a missing executable, a child that did not start).
public struct TestSupportError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
