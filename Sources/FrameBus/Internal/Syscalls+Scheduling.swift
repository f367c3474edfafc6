import CFrameBusShims
import Surfaces
import SystemPackage

// The scheduler slice a subscriber's connection thread asks for (`Subscriber.Configuration.connectionThreadSlice`).

extension Syscall {
    /// Asks the scheduler for a slice of `nanoseconds` for the calling thread (`sched_setattr`, SCHED_OTHER with
    /// `sched_runtime`: the EEVDF slice on Linux 6.12+, ignored by older kernels); 0 returns to the kernel's default.
    /// Keeps the thread's nice value; leaves a thread whose policy is not SCHED_OTHER alone (`.success(false)`).
    static func setSchedulerSlice(nanoseconds: UInt64) -> Result<Bool, Errno> {
        let result = cfb_set_scheduler_slice(nanoseconds)
        if result < 0 { return .failure(Errno(rawValue: -result)) }
        return .success(result == 0)
    }

    /// The slice thread `threadID` of this process runs with, in nanoseconds (`sched_getattr`'s `sched_runtime` of a
    /// SCHED_OTHER thread, Linux 6.12+).
    package static func schedulerSlice(threadID: Int32) -> Result<Int64, Errno> {
        let result = cfb_scheduler_slice(threadID)
        if result < 0 { return .failure(Errno(rawValue: Int32(clamping: -result))) }
        return .success(result)
    }

    /// The calling thread's kernel id (`gettid`).
    package static var currentThreadID: Int32 { cfb_thread_id() }
}
