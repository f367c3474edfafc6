@testable import SurfaceCompression
import Testing
import TestSupport

/// A job that records, per worker, how many times it ran and the call it last saw (so a worker that ran
/// without being asked, twice in a call, or with a stale job shows up), and makes worker 1 compute a little
/// longer than the others when `slowWorker` is set (the caller then finishes first and waits).
private final class CountingJob: ParallelWork, @unchecked Sendable {
    // @unchecked: worker w writes only element w, and the caller reads them after `run` has returned.
    let runs: UnsafeMutableBufferPointer<Int>
    let seen: UnsafeMutableBufferPointer<Int>
    let sinks: UnsafeMutableBufferPointer<UInt64>
    var call = 0
    var slowWorker = false

    init(workers: Int) {
        runs = .allocate(capacity: workers)
        runs.initialize(repeating: 0)
        seen = .allocate(capacity: workers)
        seen.initialize(repeating: -1)
        sinks = .allocate(capacity: workers)
        sinks.initialize(repeating: 0)
    }

    deinit {
        runs.deallocate()
        seen.deallocate()
        sinks.deallocate()
    }

    func work(worker: Int) {
        runs[worker] += 1
        seen[worker] = call
        if slowWorker && worker == 1 {
            // A few tens of microseconds of arithmetic (not a sleep: the work itself is what the caller waits for).
            var x: UInt64 = UInt64(call)
            for i in 0..<20_000 { x = x &* 6_364_136_223_846_793_005 &+ UInt64(i) }
            sinks[worker] = x
        }
    }
}

/// The codec's worker pool: every call runs each asked-for worker exactly once with that call's job; a pool is
/// released (its threads joined) and a new one made many times without a hang.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct WorkerPoolTests {

    /// 3 threads (4 workers), 2,000 calls with 1 to 4 workers in turn (some threads asked, others not), half of
    /// them with a slow worker 1: each asked worker ran once per call and saw the call's job; the others did not run.
    @Test func everyCallRunsEachAskedWorkerOnceWithItsJob() throws {
        let pool = WorkerPool(threadCount: 3)
        #expect(pool.availableWorkers == 4)
        let job = CountingJob(workers: 4)
        var expected = [0, 0, 0, 0]
        var stale = 0
        for call in 0..<2000 {
            let workers = 1 + call % 4
            job.call = call
            job.slowWorker = call % 2 == 0
            pool.run(workers: workers, job)
            for worker in 0..<workers {
                expected[worker] += 1
                if job.seen[worker] != call { stale += 1 }
            }
        }
        #expect(Array(job.runs) == expected)
        #expect(stale == 0)
    }

    /// A pool is made, used for a few calls and released, 200 times: each release ends its threads (the joins
    /// return; the time limit catches a hang) and each new pool works.
    @Test func poolsAreReleasedAndMadeAgainWithoutAHang() throws {
        var total = 0
        for round in 0..<200 {
            let pool = WorkerPool(threadCount: 1 + round % 2)
            let job = CountingJob(workers: pool.availableWorkers)
            for call in 0..<(round % 5) {
                job.call = call
                pool.run(workers: pool.availableWorkers, job)
            }
            total += job.runs.reduce(0, +)
        }
        // Rounds with 2 workers (even) and 3 (odd), 0 to 4 calls each.
        let expected = (0..<200).reduce(0) { $0 + ($1 % 5) * (2 + $1 % 2) }
        #expect(total == expected)
    }
}
