import Foundation
import Synchronization

/// Runs tasks' jobs on a subscriber's connection thread (``Subscriber/executor``): a `for await` loop over
/// ``Subscriber/events`` under `withTaskExecutorPreference(subscriber.executor)` resumes on the thread that read the
/// frame, right after reading it, with no second thread woken (swift-nio's `NIOSerialEventLoopExecutor` runs an
/// actor's jobs on its event loop's thread the same way).
///
/// A job enqueued by the connection thread while it hands an event to a waiting iteration runs at once, when the
/// hand-over returns; one enqueued from another thread (the task's first hop, a timer, a cancellation) is queued and
/// the connection thread is woken through the subscriber's doorbell. Once the connection thread has returned (the
/// subscriber was cancelled or its stream ended for good), jobs go to Swift's global concurrent executor instead, so
/// a task that prefers this executor is never stranded.
final class SubscriberExecutor: TaskExecutor, Sendable {
    private struct State {
        var jobs: [UnownedJob] = []
        var thread: pthread_t?
        /// The connection thread is running jobs (``runJobs()``): what it enqueues itself runs in that pass.
        var isRunning = false
        /// The connection thread is handing an event over and runs the jobs this enqueues right after.
        var isHandingOver = false
        var isFinished = false
    }

    private let state = Mutex(State())
    private let doorbell: Doorbell
    /// Jobs run on the connection thread so far (``SubscriberCore/deliver(_:sequence:)`` compares it around a
    /// delivery: an iteration that prefers this executor consumes frames on the connection thread).
    let jobsRun = Atomic<UInt64>(0)

    init(doorbell: Doorbell) { self.doorbell = doorbell }

    /// Called on the connection thread as it starts.
    func attachCurrentThread() { state.withLock { $0.thread = pthread_self() } }

    private static func isCurrent(_ thread: pthread_t?) -> Bool {
        guard let thread else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        enum Next { case nothing, wake, forward }
        let next: Next = state.withLock { state in
            if state.isFinished { return .forward }
            state.jobs.append(unowned)
            let runsSoon = (state.isRunning || state.isHandingOver) && Self.isCurrent(state.thread)
            return runsSoon ? .nothing : .wake
        }
        switch next {
        case .nothing: break
        case .wake: doorbell.ring()
        case .forward: globalConcurrentExecutor.enqueue(ExecutorJob(unowned))
        }
    }

    /// On the connection thread: hands an event over (`body` resumes a waiting iteration), then runs the jobs that
    /// enqueued, the resumed iteration's first.
    func handOver(_ body: () -> Void) {
        state.withLock { $0.isHandingOver = true }
        body()
        state.withLock { $0.isHandingOver = false }
        runJobs()
    }

    /// On the connection thread: runs the queued jobs, and those they enqueue, until none is left. A nested call (a
    /// job that makes the connection thread hand over another event) leaves them to the outer pass.
    func runJobs() {
        let starts = state.withLock { state -> Bool in
            guard !state.isRunning, !state.jobs.isEmpty, Self.isCurrent(state.thread) else { return false }
            state.isRunning = true
            return true
        }
        guard starts else { return }
        while let job = state.withLock({ state -> UnownedJob? in
            guard !state.jobs.isEmpty else {
                state.isRunning = false
                return nil
            }
            return state.jobs.removeFirst()
        }) {
            jobsRun.add(1, ordering: .relaxed)
            unsafe job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }

    /// The connection thread returns: jobs waiting and jobs to come go to the global concurrent executor.
    func finish() {
        let waiting = state.withLock { state in
            state.isFinished = true
            defer { state.jobs.removeAll() }
            return state.jobs
        }
        for job in waiting { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
    }
}
