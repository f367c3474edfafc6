/// The host's monotonic clock, the time base of capture timestamps (`CMClockGetHostTimeClock`).
///
/// On Linux this is `CLOCK_MONOTONIC`: nanoseconds since boot, not affected by changes of the wall clock, the
/// same in every process of the machine (so timestamps can be compared across the bus). Times are in timescale
/// 1 000 000 000.
///
/// ```swift
/// let captured = HostClock.now
/// // … later, in another process …
/// let latency = HostClock.now - captured
/// ```
public enum HostClock {
    /// The current host time, in nanoseconds (timescale 1 000 000 000).
    ///
    /// The corresponding system call is `clock_gettime(2)` with `CLOCK_MONOTONIC`.
    public static var now: MediaTime {
        MediaTime(nanoseconds: MonotonicClock.nanoseconds())
    }
}

extension MediaTime {
    /// The current host time (``HostClock/now``), like `CMClockGetTime(CMClockGetHostTimeClock())`.
    public static func hostTime() -> MediaTime {
        HostClock.now
    }
}
