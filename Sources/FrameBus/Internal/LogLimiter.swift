/// Admits at most one log line per key per interval, and says how many it suppressed (docs/PROTOCOL.md §8.1).
struct LogLimiter {
    private struct Window {
        var start: UInt64
        var suppressed: UInt64
    }
    private var windows: [String: Window] = [:]

    /// The line to write now, or nil to suppress it. Keys are a small fixed set (reasons), so this is bounded.
    mutating func admit(key: String, message: String, now: UInt64, interval: UInt64) -> String? {
        if var window = windows[key], now &- window.start < interval {
            window.suppressed.saturatingAdd(1)
            windows[key] = window
            return nil
        }
        let suppressed = windows[key]?.suppressed ?? 0
        windows[key] = Window(start: now, suppressed: 0)
        return suppressed > 0
            ? "\(message) (and \(suppressed) similar in the last \(interval / 1_000_000_000) s)" : message
    }
}
