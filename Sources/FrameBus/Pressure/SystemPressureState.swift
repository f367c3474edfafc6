/// How hard the system is pressed, and by what: `AVCaptureDevice.SystemPressureState` for a publisher and everyone
/// who receives its frames.
///
/// The publisher computes it from the kernel's pressure stall information (`/proc/pressure/{cpu,memory,io}`, or its own
/// cgroup's `cpu.pressure`, `memory.pressure`, `io.pressure` on cgroup v2), thermal zones where the machine has them,
/// and its own stream (``PublisherCost``), with the thresholds and hysteresis of one ``SystemPressurePolicy``. Its
/// producer reads it as ``Publisher/systemPressureState``; subscribers that ask for it receive it whenever it changes
/// (docs/PROTOCOL.md, STATUS). As Apple advises, a producer lowers its frame rate at ``Level-swift.enum/serious``
/// and ``Level-swift.enum/critical`` and restores it at ``Level-swift.enum/nominal``
/// (``SystemPressurePolicy/adaptedFrameRate(nominal:current:level:)``).
public struct SystemPressureState: Hashable, Sendable, CustomStringConvertible {
    /// How pressed the system is. Raw values are wire-stable (STATUS `level`).
    public enum Level: UInt8, Hashable, Sendable, CaseIterable, Comparable, CustomStringConvertible {
        /// Nothing to do.
        case nominal = 0
        /// Somewhat elevated: no action needed, but watch it.
        case fair = 1
        /// Elevated: lower the frame rate or the work per frame.
        case serious = 2
        /// Critically elevated: lower the frame rate (and work) drastically.
        case critical = 3
        /// The system is about to stop or throttle everything (memory thrashing, a critical thermal trip point):
        /// stop what can be stopped.
        case shutdown = 4

        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

        /// `"nominal"`, `"fair"`, `"serious"`, `"critical"` or `"shutdown"`.
        public var description: String {
            switch self {
            case .nominal: "nominal"
            case .fair: "fair"
            case .serious: "serious"
            case .critical: "critical"
            case .shutdown: "shutdown"
            }
        }

        /// The level one below this one (nominal stays nominal).
        var lower: Level { Level(rawValue: rawValue &- 1) ?? .nominal }
    }

    /// What drives the level. Bit positions are wire-stable (STATUS `factors`).
    public struct Factors: OptionSet, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }

        /// Tasks wait for a CPU (PSI `cpu` "some").
        public static let cpu = Factors(rawValue: 1 << 0)
        /// Tasks wait for memory: reclaim, swap-in, thrashing (PSI `memory`).
        public static let memory = Factors(rawValue: 1 << 1)
        /// Tasks wait for I/O (PSI `io`).
        public static let io = Factors(rawValue: 1 << 2)
        /// A thermal zone nears or passes its trip points.
        public static let thermal = Factors(rawValue: 1 << 3)
        /// The stream itself: the cost of a frame against its interval, and frames shed (``PublisherCost``).
        public static let bus = Factors(rawValue: 1 << 4)

        /// Every factor, in wire bit order.
        public static let all: [(factor: Factors, name: String)] = [
            (.cpu, "cpu"), (.memory, "memory"), (.io, "io"), (.thermal, "thermal"), (.bus, "bus"),
        ]

        /// The factors' names, in wire bit order (`["cpu", "bus"]`).
        public var names: [String] { Self.all.filter { contains($0.factor) }.map(\.name) }

        public var description: String { "[" + names.joined(separator: ", ") + "]" }
    }

    /// How pressed the system is.
    public var level: Level
    /// The factors at that level (empty at ``Level-swift.enum/nominal``).
    public var factors: Factors

    public init(level: Level, factors: Factors) {
        self.level = level
        self.factors = factors
    }

    /// Nominal, no factors.
    public static let nominal = SystemPressureState(level: .nominal, factors: [])

    /// `"serious [cpu, bus]"`.
    public var description: String { factors.isEmpty ? "\(level)" : "\(level) \(factors)" }
}
