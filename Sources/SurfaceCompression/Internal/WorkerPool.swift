import CSurfaceCodecKernels
import Dispatch
import Glibc
import Synchronization

/// Work split between workers: `work(worker:)` runs once for each worker index of a call.
protocol ParallelWork: AnyObject {
    func work(worker: Int)
}

/// Threads kept by a codec context, so that a parallel encode or decode allocates nothing per frame
/// (`DispatchQueue.concurrentPerform` allocates on every call, and so does handing a closure to a thread).
///
/// `run(workers:_:)` runs `work(worker: 0)` on the calling thread and workers 1…`workers - 1` on the pool's
/// threads, and returns when all have finished. One call at a time (the context's lock serialises them). The
/// work is a class instance the workspace keeps, so passing it is a retain, not an allocation.
///
/// Waking a sleeping thread costs about 20–25 µs each way on an idle 2-vCPU VM (the futex wake, then the
/// hypervisor waking the halted vCPU), against 35–90 µs of work per worker on a photograph. So both sides spin,
/// for a bounded time, before they sleep (``Spin``): a worker that has finished polls for the next call (back-to-back
/// frames then cost no wake-up at all), and a caller that has finished its share polls for the workers' end.
/// Each poll is a `pause` instruction and an atomic load; past the bound, the thread sleeps on a semaphore.
final class WorkerPool: @unchecked Sendable {
    /// How long the threads of a pool poll before they sleep.
    struct Spin: Hashable, Sendable {
        /// How long a worker that has finished polls for the next call.
        var workerNanoseconds: UInt64
        /// How long a caller that has finished its share polls for the workers to finish theirs.
        var callerNanoseconds: UInt64

        /// Measured in docs/BENCHMARKS.md ("Threads").
        static let `default` = Spin(workerNanoseconds: 50_000, callerNanoseconds: 100_000)
        /// Sleep at once (a semaphore wait each way).
        static let none = Spin(workerNanoseconds: 0, callerNanoseconds: 0)
    }

    /// One worker thread's hand-off: its state and the semaphore it sleeps on.
    final class Slot: Sendable {
        /// Polling for a call (or about to).
        static let idle = 0
        /// Asleep on ``start``: the caller signals it.
        static let asleep = 1
        /// A call (or the pool's end) was posted.
        static let posted = 2

        let state = Atomic<Int>(Slot.idle)
        let start = DispatchSemaphore(value: 0)
    }

    // @unchecked: `job` and `stopping` are written by the caller before it posts to the slots (an atomic
    // exchange) and read by the workers after they have seen the post; the caller writes `job` again only after
    // `remaining` has fallen to 0 (each worker's last access to `job` comes before its decrement).
    final class Shared: @unchecked Sendable {
        var job: (any ParallelWork)? = nil
        var stopping = false
        let slots: [Slot]
        let spin: Spin
        /// Workers of the current call that have not finished.
        let remaining = Atomic<Int>(0)
        /// 1 while the caller is (about to be) asleep on `finished`; the worker that ends the call takes it and
        /// signals.
        let callerAsleep = Atomic<Int>(0)
        let finished = DispatchSemaphore(value: 0)

        init(threads: Int, spin: Spin) {
            slots = (0..<threads).map { _ in Slot() }
            self.spin = spin
        }

        /// Hands the posted call to worker `index`, waking it if it sleeps.
        func post(_ index: Int) {
            if slots[index].state.exchange(Slot.posted, ordering: .sequentiallyConsistent) == Slot.asleep {
                slots[index].start.signal()
            }
        }

        /// Returns when a call is posted to `slot`: polls for `spin.workerNanoseconds`, then sleeps.
        func awaitPost(_ slot: Slot) {
            let deadline = WorkerPool.monotonicNanoseconds() &+ spin.workerNanoseconds
            var polls = 0
            while slot.state.load(ordering: .acquiring) != Slot.posted {
                polls &+= 1
                if polls & 63 == 0 || spin.workerNanoseconds == 0, WorkerPool.monotonicNanoseconds() >= deadline {
                    // Asleep unless a call was posted meanwhile; the caller that posts next sees `asleep` and signals.
                    if slot.state.compareExchange(
                        expected: Slot.idle,
                        desired: Slot.asleep,
                        ordering: .sequentiallyConsistent
                    ).exchanged {
                        slot.start.wait()
                    }
                    return
                }
                _ = sched_yield()
            }
        }

        /// Called by a worker when it has finished its share: the last one wakes the caller if it sleeps.
        func workerFinished() {
            if remaining.subtract(1, ordering: .sequentiallyConsistent).newValue == 0,
                callerAsleep.exchange(0, ordering: .sequentiallyConsistent) == 1
            {
                finished.signal()
            }
        }

        /// Returns when every worker of the call has finished: polls for `spin.callerNanoseconds`, then sleeps.
        ///
        /// A worker that ended the previous call may take the flag and signal late, waking the caller early: the
        /// caller then finds workers still running and sleeps again; every signal answers one flag it set.
        func awaitWorkers() {
            let deadline = WorkerPool.monotonicNanoseconds() &+ spin.callerNanoseconds
            var polls = 0
            while remaining.load(ordering: .acquiring) != 0 {
                polls &+= 1
                if polls & 63 == 0 || spin.callerNanoseconds == 0, WorkerPool.monotonicNanoseconds() >= deadline {
                    break
                }
                _ = sched_yield()
            }
            while remaining.load(ordering: .sequentiallyConsistent) != 0 {
                callerAsleep.store(1, ordering: .sequentiallyConsistent)
                if remaining.load(ordering: .sequentiallyConsistent) == 0 {
                    // Finished meanwhile: take the flag back, or, if a worker took it, take its signal.
                    if callerAsleep.exchange(0, ordering: .sequentiallyConsistent) == 0 { finished.wait() }
                    return
                }
                finished.wait()
            }
        }
    }

    private let shared: Shared
    private var threads: [pthread_t] = []

    /// A pool of `threadCount` threads (the caller is one more worker), polling as `spin` says before they sleep.
    init(threadCount: Int, spin: Spin = .default) {
        shared = Shared(threads: max(0, threadCount), spin: spin)
        for index in 0..<max(0, threadCount) {
            let context = unsafe Unmanaged.passRetained(WorkerContext(shared: shared, index: index)).toOpaque()
            var thread = pthread_t()
            let status = unsafe pthread_create(
                &thread,
                nil,
                { argument in
                    guard let argument = unsafe argument else { return nil }
                    let context = unsafe Unmanaged<WorkerContext>.fromOpaque(argument).takeRetainedValue()
                    context.loop()
                    return nil
                },
                context
            )
            guard status == 0 else {
                // No more threads: fewer workers (run never asks for more than availableWorkers).
                unsafe Unmanaged<WorkerContext>.fromOpaque(context).release()
                break
            }
            threads.append(thread)
        }
    }

    deinit {
        shared.stopping = true
        for index in 0..<threads.count { shared.post(index) }
        for thread in threads { pthread_join(thread, nil) }
    }

    /// The workers a call can have: the pool's threads and the caller.
    var availableWorkers: Int { threads.count + 1 }

    /// Runs `job` for `workers` workers (at most ``availableWorkers``), worker 0 on this thread.
    func run(workers: Int, _ job: any ParallelWork) {
        let helpers = min(max(workers, 1), availableWorkers) - 1
        shared.job = job
        shared.remaining.store(helpers, ordering: .sequentiallyConsistent)
        for index in 0..<helpers { shared.post(index) }
        job.work(worker: 0)
        if helpers > 0 { shared.awaitWorkers() }
        shared.job = nil
    }

    /// CLOCK_MONOTONIC in nanoseconds (the vDSO: no system call).
    static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        unsafe clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(truncatingIfNeeded: time.tv_sec) &* 1_000_000_000 &+ UInt64(truncatingIfNeeded: time.tv_nsec)
    }

    private final class WorkerContext {
        let shared: Shared
        let index: Int
        init(shared: Shared, index: Int) {
            self.shared = shared
            self.index = index
        }

        func loop() {
            let slot = shared.slots[index]
            while true {
                shared.awaitPost(slot)
                if shared.stopping { return }
                shared.job?.work(worker: index + 1)
                // Idle again before the call can end (the caller may post the next one as soon as it has).
                slot.state.store(Slot.idle, ordering: .sequentiallyConsistent)
                shared.workerFinished()
            }
        }
    }
}
