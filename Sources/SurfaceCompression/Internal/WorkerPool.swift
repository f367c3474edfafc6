import Dispatch
import Glibc

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
final class WorkerPool: @unchecked Sendable {
    // @unchecked: `job` is written by the caller before the start semaphores are signalled and read by the
    // workers after they are woken; the caller waits on `finished` before it writes it again. The semaphores
    // order those accesses.
    final class Shared: @unchecked Sendable {
        var job: (any ParallelWork)? = nil
        var stopping = false
        let starts: [DispatchSemaphore]
        let finished = DispatchSemaphore(value: 0)
        init(threads: Int) { starts = (0..<threads).map { _ in DispatchSemaphore(value: 0) } }
    }

    private let shared: Shared
    private var threads: [pthread_t] = []

    /// A pool of `threadCount` threads (the caller is one more worker).
    init(threadCount: Int) {
        shared = Shared(threads: max(0, threadCount))
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
        for index in 0..<threads.count { shared.starts[index].signal() }
        for thread in threads { pthread_join(thread, nil) }
    }

    /// The workers a call can have: the pool's threads and the caller.
    var availableWorkers: Int { threads.count + 1 }

    /// Runs `job` for `workers` workers (at most ``availableWorkers``), worker 0 on this thread.
    func run(workers: Int, _ job: any ParallelWork) {
        let helpers = min(max(workers, 1), availableWorkers) - 1
        shared.job = job
        for index in 0..<helpers { shared.starts[index].signal() }
        job.work(worker: 0)
        for _ in 0..<helpers { shared.finished.wait() }
        shared.job = nil
    }

    private final class WorkerContext {
        let shared: Shared
        let index: Int
        init(shared: Shared, index: Int) {
            self.shared = shared
            self.index = index
        }

        func loop() {
            while true {
                shared.starts[index].wait()
                if shared.stopping { return }
                shared.job?.work(worker: index + 1)
                shared.finished.signal()
            }
        }
    }
}
