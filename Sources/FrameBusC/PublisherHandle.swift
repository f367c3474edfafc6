import Foundation
import FrameBus

/// The Swift side of `fb_publisher`: a ``Publisher`` and the ``PixelBufferPool`` its frames come from.
final class PublisherHandle: Sendable {
    let publisher: Publisher
    let pool: PixelBufferPool

    init(publisher: Publisher, pool: PixelBufferPool) {
        self.publisher = publisher
        self.pool = pool
    }

    /// The formats a pool of `format` can serve: the format and its compressed variant.
    static func servable(by format: PixelFormat) -> [PixelFormat] {
        [format] + (format.compressedVariant.map { [$0] } ?? [])
    }

    /// A free buffer, waiting up to `timeoutNanoseconds` (negative: no limit; 0: no wait) for one.
    ///
    /// The wait is ``Publisher/nextPixelBuffer(from:)`` in a task; the C thread blocks on a condition until the task
    /// hands over its result or the deadline passes, then cancels the task. A buffer the task gets after the deadline
    /// is dropped, and so goes back to the pool.
    func acquire(timeoutNanoseconds: Int64) -> Result<PixelBuffer, ABIError> {
        do {
            return .success(try publisher.makePixelBuffer(from: pool))
        } catch  where error.code == .outOfBuffers && timeoutNanoseconds != 0 {
            // Wait below.
        } catch {
            return .failure(ABIError(error))
        }
        let deadline = MonotonicDeadline(timeoutNanoseconds: timeoutNanoseconds)
        let handOver = HandOver<Result<PixelBuffer, ABIError>>()
        let task = Task { [publisher, pool] in
            do {
                handOver.put(.success(try await publisher.nextPixelBuffer(from: pool)))
            } catch {
                handOver.put(.failure(ABIError(any: error)))
            }
        }
        guard let result = handOver.take(until: deadline) else {
            task.cancel()
            return .failure(ABIError(.timedOut, "fb_publisher_acquire_buffer_timeout: no buffer became free in time"))
        }
        return result
    }
}

/// One value handed from a task to a waiting thread. A value put after the taker gave up is dropped at once.
final class HandOver<Value: Sendable>: @unchecked Sendable {
    // @unchecked: `value` and `isAbandoned` are guarded by `condition`.
    private let condition = NSCondition()
    private var value: Value?
    private var isAbandoned = false

    /// Stores the value and wakes the taker. `consuming`: the caller keeps no reference, so that once the taker has
    /// it, the taker's is the only one (a buffer it gives up goes straight back to its pool).
    func put(_ newValue: consuming Value) {
        condition.lock()
        if !isAbandoned { value = consume newValue }
        condition.broadcast()
        condition.unlock()
    }

    /// The value, or nil if none came before `deadline`; then the hand-over is abandoned.
    func take(until deadline: MonotonicDeadline) -> Value? {
        condition.withLock {
            while value == nil, !deadline.hasPassed { deadline.wait(on: condition) }
            // Hand the value over: keeping it here would keep a buffer out of its pool for as long as the task lives.
            defer { value = nil }
            if value == nil { isAbandoned = true }
            return value
        }
    }
}

/// A deadline on the monotonic clock, so that a timeout is not shortened or stretched when the wall clock is set.
struct MonotonicDeadline: Sendable {
    private let instant: ContinuousClock.Instant?

    /// `timeoutNanoseconds` from now; negative: none.
    init(timeoutNanoseconds: Int64) {
        instant = timeoutNanoseconds < 0 ? nil : .now + .nanoseconds(timeoutNanoseconds)
    }

    var hasPassed: Bool { instant.map { ContinuousClock.now >= $0 } ?? false }

    /// Waits on `condition` (locked by the caller) until it is signalled or the deadline may have passed; callers
    /// check their state and ``hasPassed`` again. `NSCondition` waits until a wall-clock `Date`, so the wait is for
    /// the monotonic time that remains, converted at this moment.
    func wait(on condition: NSCondition) {
        guard let instant else {
            condition.wait()
            return
        }
        let remaining = instant - ContinuousClock.now
        guard remaining > .zero else { return }
        let (seconds, attoseconds) = remaining.components
        _ = condition.wait(until: Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) / 1e18))
    }
}
