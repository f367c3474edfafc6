import Dispatch
import Foundation
import Surfaces
import Synchronization
import SystemPackage

/// The recorder's write workers: `depth` threads, each `pwrite`-ing one block-aligned stretch of the ring at a time
/// at its own file offset, so that several writes are queued at the disk at once (one synchronous write at a time
/// leaves the disk idle between them: the I/O thread's planning, the reservation, the completion's bookkeeping).
///
/// The I/O thread hands stretches over with ``submit(position:count:)`` and collects their ends with
/// ``takeCompletions()``; each end signals `wake`, the semaphore the I/O thread sleeps on. The bytes of a stretch
/// in flight stay the I/O thread's: the ring space is given back only once every write before it has ended.
final class WriteWorkers: Sendable {
    struct Completion {
        var position: Int
        var count: Int
        /// How long the `pwrite` took, in nanoseconds.
        var elapsed: UInt64
        var result: Result<Void, Errno>
    }

    let depth: Int
    private let ring: AlignedRing
    private let file: RecordingFile
    private let wake: DispatchSemaphore
    /// Stretches waiting for a worker (nil: a worker's signal to leave), oldest first.
    private let jobs = Mutex<[(position: Int, count: Int)?]>([])
    private let jobReady = DispatchSemaphore(value: 0)
    private let completions = Mutex<[Completion]>([])
    private let exited = DispatchSemaphore(value: 0)
    private let started = Mutex(false)

    init(depth: Int, ring: AlignedRing, file: RecordingFile, wake: DispatchSemaphore) {
        self.depth = depth
        self.ring = ring
        self.file = file
        self.wake = wake
    }

    /// Starts the threads (once).
    func start() {
        let first = started.withLock { started -> Bool in
            defer { started = true }
            return !started
        }
        guard first else { return }
        for index in 0..<depth {
            let thread = Thread { [self] in
                run()
                exited.signal()
            }
            thread.name = "framebus.recorder.write\(index)"
            thread.start()
        }
    }

    /// Hands `[position, position + count)` of the ring (block-aligned, not wrapping) to a worker.
    func submit(position: Int, count: Int) {
        jobs.withLock { $0.append((position, count)) }
        jobReady.signal()
    }

    /// The writes that ended since the last call, in the order they ended.
    func takeCompletions() -> [Completion] {
        completions.withLock { completions in
            defer { completions.removeAll(keepingCapacity: true) }
            return completions
        }
    }

    /// Lets the workers finish what they were given, then stops them and waits for them to leave.
    func finish() {
        guard started.withLock({ $0 }) else { return }
        for _ in 0..<depth {
            jobs.withLock { $0.append(nil) }
            jobReady.signal()
        }
        for _ in 0..<depth { exited.wait() }
    }

    private func run() {
        while true {
            jobReady.wait()
            guard let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) ?? nil else { return }
            let began = Syscall.monotonicNanoseconds()
            let result = file.write(from: ring, position: job.position, count: job.count)
            if case .success = result {
                file.startWriteback(from: Int64(job.position), upTo: Int64(job.position + job.count))
            }
            let completion = Completion(
                position: job.position,
                count: job.count,
                elapsed: Syscall.monotonicNanoseconds() &- began,
                result: result
            )
            completions.withLock { $0.append(completion) }
            wake.signal()
        }
    }
}
