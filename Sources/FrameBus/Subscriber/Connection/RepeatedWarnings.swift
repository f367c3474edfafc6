import Logging

/// The subscriber's warnings, each logged unless it repeats the previous one within ``interval`` (then it is counted,
/// and the count is logged with the next one that gets through): a publisher that fails the same way on every
/// reconnect (every 100 ms by default) must not flood the log. Unlike the publisher's ``LogLimiter``, which keeps a
/// window per fixed reason, this keeps only the last line: a subscriber's warnings carry the peer's error text, so
/// their keys are not a fixed set.
struct RepeatedWarnings {
    static let interval: UInt64 = 10_000_000_000

    /// The last warning logged, when, and how many identical ones were left out since.
    private var last: (text: String, time: UInt64, suppressed: Int)?

    mutating func warn(_ text: String, now: UInt64, logger: Logger) {
        if let last, last.text == text, now &- last.time < Self.interval {
            self.last?.suppressed += 1
            return
        }
        if let last, last.suppressed > 0 {
            logger.warning("(\(last.suppressed) more: \(last.text))")
        }
        logger.warning("\(text)")
        last = (text, now, 0)
    }
}
