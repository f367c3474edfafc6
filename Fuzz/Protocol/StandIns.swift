// Stand-ins for what the protocol sources import but the fuzzer does not need (the fuzzer builds the wire layer and
// the state machines alone, without SwiftPM): swift-log's level, swift-system's Errno, the latency histogram.

package enum Logger {
    package enum Level: Int, Comparable, Sendable {
        case trace, debug, info, notice, warning, error, critical
        package static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    }
}

public struct Errno: Hashable, Sendable {}

public struct LatencySummary: Hashable, Sendable {
    public var count = 0
    public var p50: UInt64 = 0
    public var p99: UInt64 = 0
    public var p999: UInt64 = 0
    public var maximum: UInt64 = 0
}

struct LatencyRecorder {
    private var count = 0
    private var maximum: UInt64 = 0
    mutating func record(nanoseconds: UInt64) {
        count += 1
        maximum = max(maximum, nanoseconds)
    }
    var summary: LatencySummary {
        LatencySummary(count: count, p50: maximum, p99: maximum, p999: maximum, maximum: maximum)
    }
}
