import Foundation
import Glibc
import Synchronization
import Testing

/// Where CPU-bound tests (the `.heavyWork` trait) run: two threads of the test process's own, never Swift's cooperative pool.
///
/// The pool has as many threads as the machine has cores, two on a small CI runner. A synchronous test that computes
/// for seconds (a debug-build codec round trip, an exhaustive loop) holds a pool thread all that time; two of them at
/// once, beside the CI's CPU hogs, stalled every other test of the process for about 60 s, long enough for a child
/// process waiting on its test to give up and the test to fail. Work sent here competes for the CPU like any thread
/// but leaves the pool to the tests that wait on other processes. Two threads: at most two such bodies at once, so
/// they do not crowd out the rest of a small machine either.
public final class HeavyWorkExecutor: TaskExecutor, Sendable {
    public static let shared = HeavyWorkExecutor(threads: 2)

    private let jobs = Mutex<[UnownedJob]>([])
    private let queued = DispatchSemaphore(value: 0)
    /// The pthreads of this executor (a Foundation `Thread`'s name is not reliable on Linux).
    private let threadIDs = Mutex<Set<pthread_t>>([])

    private init(threads: Int) {
        for index in 0..<threads {
            let thread = Thread { [self] in
                threadIDs.withLock { _ = $0.insert(pthread_self()) }
                while true {
                    queued.wait()
                    let job = jobs.withLock { $0.removeFirst() }
                    job.runSynchronously(on: asUnownedTaskExecutor())
                }
            }
            thread.name = "test-heavy-\(index)"
            thread.start()
        }
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        jobs.withLock { $0.append(unowned) }
        queued.signal()
    }

    /// Whether the calling thread is one of this executor's.
    public static var isCurrent: Bool {
        let current = pthread_self()
        return shared.threadIDs.withLock { $0.contains(current) }
    }
}

/// Runs CPU-heavy `body` (seconds to minutes of debug-build codec or conversion work in one piece) on a thread of its
/// own, at most two such bodies at once in the test process (the others wait their turn, suspended): off the
/// cooperative pool, and off ``HeavyWorkExecutor`` too, so one long body never holds up the short tests queued there.
/// `#expect` inside `body` is not seen by the test (a plain thread): return what to check.
public func heavyWork<Result: Sendable>(_ body: @escaping @Sendable () throws -> Result) async throws -> Result {
    await HeavyWorkGate.shared.enter()
    defer { HeavyWorkGate.shared.leave() }
    return try await onDedicatedThread("test-heavy-work", body)
}

/// A test trait: every test it applies to (every test of a suite it marks, nested suites included) runs on
/// ``HeavyWorkExecutor``, its synchronous body and the continuations of its awaits alike. For suites of CPU-bound tests
/// of up to a few seconds each; a body of minutes goes through ``heavyWork(_:)``. A test that blocks on another
/// thread's work must not use it (two threads), or wait through ``onDedicatedThread(_:_:)``. Its time limit counts
/// the time it waits for a thread: give such suites minutes.
public struct HeavyWorkTrait: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? { testCase == nil ? nil : self }

    public func provideScope(
        for test: Test,
        testCase: Test.Case?,
        performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(HeavyWorkExecutor.shared) { try await function() }
    }
}

extension Trait where Self == HeavyWorkTrait {
    /// CPU-bound tests: they run on ``HeavyWorkExecutor``, off Swift's cooperative pool.
    public static var heavyWork: Self { Self() }
}

/// A counting gate for ``heavyWork(_:)``: waiters suspend (they hold no thread) until a slot is free.
final class HeavyWorkGate: Sendable {
    static let shared = HeavyWorkGate(slots: 2)

    private struct State {
        var free: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    init(slots: Int) { state = Mutex(State(free: slots)) }

    func enter() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func leave() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
