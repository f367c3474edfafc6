import Glibc

/// A lock with a condition whose timed waits run on `CLOCK_MONOTONIC` (`pthread_condattr_setclock`), for the
/// subscriber's leader/follower hand-over and blocking poller.
///
/// `NSCondition.wait(until: Date)` is `pthread_cond_timedwait` on `CLOCK_REALTIME`: a wall-clock step (NTP, a user
/// setting the time) stretches or cuts every wait in flight, although every deadline here is a monotonic time. Here a
/// deadline is a `CLOCK_MONOTONIC` time in nanoseconds, as ``Syscall/monotonicNanoseconds()`` reads it.
@safe final class MonotonicCondition: @unchecked Sendable {
    // @unchecked: the mutex and condition are pthread objects, used only through pthread calls, at stable addresses
    // (allocated here, never moved, freed in deinit).
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    /// The clock its timed waits use, as the condition's attributes say after they were set (`CLOCK_MONOTONIC`).
    let clock: clockid_t

    init() {
        unsafe mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        unsafe condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        var attributes = pthread_condattr_t()
        unsafe precondition(pthread_condattr_init(&attributes) == 0)
        unsafe precondition(pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC) == 0)
        var used = clockid_t()
        _ = unsafe pthread_condattr_getclock(&attributes, &used)
        clock = used
        unsafe precondition(pthread_cond_init(condition, &attributes) == 0)
        _ = unsafe pthread_condattr_destroy(&attributes)
        unsafe precondition(pthread_mutex_init(mutex, nil) == 0)
    }

    deinit {
        _ = unsafe pthread_cond_destroy(condition)
        _ = unsafe pthread_mutex_destroy(mutex)
        unsafe condition.deallocate()
        unsafe mutex.deallocate()
    }

    func lock() {
        unsafe precondition(pthread_mutex_lock(mutex) == 0)
    }

    func unlock() {
        unsafe precondition(pthread_mutex_unlock(mutex) == 0)
    }

    /// Wakes every thread waiting (call with the lock held).
    func broadcast() {
        _ = unsafe pthread_cond_broadcast(condition)
    }

    /// Waits until woken (with the lock held; it is released while waiting). Wake-ups may be spurious.
    func wait() {
        _ = unsafe pthread_cond_wait(condition, mutex)
    }

    /// Waits until woken or until `deadline` (`CLOCK_MONOTONIC` nanoseconds), with the lock held; returns false when
    /// the deadline passed. Wake-ups may be spurious.
    @discardableResult
    func wait(untilMonotonicNanoseconds deadline: UInt64) -> Bool {
        var time = timespec(
            tv_sec: Int(clamping: deadline / 1_000_000_000),
            tv_nsec: Int(deadline % 1_000_000_000)
        )
        return unsafe pthread_cond_timedwait(condition, mutex, &time) != ETIMEDOUT
    }
}
