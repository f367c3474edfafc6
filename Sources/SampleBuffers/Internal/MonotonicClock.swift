#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The one system call of this module: `clock_gettime(CLOCK_MONOTONIC)`.
enum MonotonicClock {
    /// Nanoseconds since an arbitrary point (boot, on Linux), never going backwards.
    ///
    /// The corresponding system call is `clock_gettime(2)` with `CLOCK_MONOTONIC`. It cannot fail for this clock
    /// with a valid pointer (`EINVAL`/`EFAULT` would be programmer errors), so a failure traps.
    static func nanoseconds() -> Int64 {
        var spec = timespec()
        let result = unsafe clock_gettime(CLOCK_MONOTONIC, &spec)
        precondition(result == 0, "clock_gettime(CLOCK_MONOTONIC) failed")
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }
}
