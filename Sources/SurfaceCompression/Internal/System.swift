import Dispatch
import Glibc

enum System {
    /// Online processors (sysconf(_SC_NPROCESSORS_ONLN)), at least 1.
    static var processorCount: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// The calling thread's identity (pthread_self), never 0 for a running thread.
    static var currentThread: UInt { UInt(pthread_self()) }

    /// Runs `body(worker)` for `workers` workers on up to that many threads (libdispatch); inline for one.
    static func parallel(workers: Int, _ body: (Int) -> Void) {
        if workers <= 1 {
            body(0)
        } else {
            withoutActuallyEscaping(body) { body in
                let shared = UncheckedSendable(body)
                DispatchQueue.concurrentPerform(iterations: workers) { worker in shared.value(worker) }
            }
        }
    }
}

/// Hands a closure to the worker threads of `System.parallel`.
///
/// @unchecked: concurrentPerform returns only after every iteration has finished, and each worker writes only
/// the memory of its own tiles or chunks, so the captured pointers are never used concurrently on the same bytes.
private struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
