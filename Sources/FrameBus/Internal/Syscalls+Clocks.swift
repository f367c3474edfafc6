// FrameBus's clock reads, as an extension of the package's one syscall layer (Surfaces/Internal/Syscalls.swift).
import Glibc
import Surfaces

extension Syscall {
    /// `CLOCK_MONOTONIC` in nanoseconds.
    package static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        _ = unsafe clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }

    /// CPU time (user + system) of the calling thread, in nanoseconds.
    static func threadCPUNanoseconds() -> UInt64 {
        var time = timespec()
        _ = unsafe clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }

    /// CPU time (user + system) of the whole process, in nanoseconds.
    package static func processCPUNanoseconds() -> UInt64 {
        var time = timespec()
        _ = unsafe clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}
