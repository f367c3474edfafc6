/// Every threshold of ``SystemPressureState`` in one place, and how a level comes down again (hysteresis).
///
/// Each factor has a measurement, sampled every ``sampleInterval`` over the last ``window``:
///
/// | factor | measurement |
/// |---|---|
/// | cpu | PSI `cpu` "some": the share of the window in which at least one task waited for a CPU (0…1) |
/// | memory | PSI `memory` "some", the same for memory (reclaim, swap-in, refaults); "full" (every task stalled) counts double |
/// | io | PSI `io` "some" |
/// | thermal | the hottest zone's temperature over its first passive (or hot) trip point; at its critical trip point, at least ``Thresholds/shutdown`` |
/// | bus | the stream's ``PublisherCost/value``; at least 1.0 while frames are shed |
///
/// **Going up** is immediate: a measurement at or above a level's threshold raises that factor to the level at the
/// next sample. **Coming down** is one level at a time: a factor leaves its level only after its measurement has been
/// below that level's threshold × ``recoveryRatio`` for ``holdTime`` without a break, and then waits another
/// ``holdTime`` before the next step. So a measurement hovering around a threshold does not flap, and a critical
/// level returns to nominal after three hold times of calm (12 s with the defaults, plus the window).
///
/// The state's level is the highest level of any factor; its factors are the factors at that level.
public struct SystemPressurePolicy: Hashable, Sendable {
    /// The measurement at which a factor reaches each level; nil: never by this factor.
    public struct Thresholds: Hashable, Sendable {
        public var fair: Double?
        public var serious: Double?
        public var critical: Double?
        public var shutdown: Double?

        public init(fair: Double?, serious: Double?, critical: Double?, shutdown: Double? = nil) {
            self.fair = fair
            self.serious = serious
            self.critical = critical
            self.shutdown = shutdown
        }

        /// The threshold of `level` (none for nominal).
        public func threshold(of level: SystemPressureState.Level) -> Double? {
            switch level {
            case .nominal: nil
            case .fair: fair
            case .serious: serious
            case .critical: critical
            case .shutdown: shutdown
            }
        }

        /// The highest level whose threshold `measurement` reaches.
        public func level(for measurement: Double) -> SystemPressureState.Level {
            for level in SystemPressureState.Level.allCases.reversed() where level != .nominal {
                if let threshold = threshold(of: level), measurement >= threshold { return level }
            }
            return .nominal
        }
    }

    /// PSI `cpu` "some" share. Three busy processes beside the publisher on two cores keep it near 1.0.
    public var cpu = Thresholds(fair: 0.40, serious: 0.65, critical: 0.90)
    /// PSI `memory` share ("some", plus "full" counted twice).
    public var memory = Thresholds(fair: 0.05, serious: 0.15, critical: 0.30, shutdown: 0.60)
    /// PSI `io` "some" share.
    public var io = Thresholds(fair: 0.20, serious: 0.40, critical: 0.70)
    /// Hottest zone: temperature over its first passive (or hot) trip point.
    public var thermal = Thresholds(fair: 0.90, serious: 0.97, critical: 1.0, shutdown: 1.10)
    /// The stream's cost (1.0: all of the frame interval; frames being shed count as at least 1.0).
    public var bus = Thresholds(fair: 0.80, serious: 1.0, critical: 2.0)

    /// A factor leaves its level only while its measurement is below that level's threshold times this (0…1).
    public var recoveryRatio = 0.75
    /// How long a factor's measurement must stay low before it comes down one level.
    public var holdTime: Duration = .seconds(4)
    /// The span each sample measures, and the window of the PSI triggers that wake the monitor: a multiple of 2 s,
    /// which the kernel requires of a process without `CAP_SYS_RESOURCE`.
    public var window: Duration = .seconds(2)
    /// How often the monitor samples while any factor is above nominal (at nominal, the triggers wake it, and it
    /// samples every ``window`` for the bus and thermal zones).
    public var sampleInterval: Duration = .seconds(1)

    /// The defaults above.
    public init() {}

    /// The thresholds of one factor.
    public func thresholds(of factor: SystemPressureState.Factors) -> Thresholds {
        switch factor {
        case .cpu: cpu
        case .memory: memory
        case .io: io
        case .thermal: thermal
        default: bus
        }
    }

    /// The frame rate to publish at, as Apple advises: half the nominal rate at serious, a quarter at critical and
    /// shutdown, the nominal rate at nominal, and whatever it is now at fair (so a level coming down through fair
    /// keeps the lower rate until nominal).
    public func adaptedFrameRate(nominal: Double, current: Double, level: SystemPressureState.Level) -> Double {
        switch level {
        case .nominal: nominal
        case .fair: current
        case .serious: max(1, nominal / 2)
        case .critical, .shutdown: max(1, nominal / 4)
        }
    }

    /// Checks the values.
    ///
    /// - Throws: ``FrameBusError/Code-swift.struct/invalidArgument`` naming the field.
    public func validate() throws(FrameBusError) {
        func check(_ condition: Bool, _ message: String) throws(FrameBusError) {
            guard condition else { throw FrameBusError(.invalidArgument, "SystemPressurePolicy", message: message) }
        }
        try check(recoveryRatio > 0 && recoveryRatio <= 1, "recoveryRatio \(recoveryRatio)")
        try check(holdTime >= .zero && holdTime <= .seconds(3600), "holdTime \(holdTime)")
        let windowNanoseconds = window.nanoseconds
        try check(
            window >= .seconds(2) && window <= .seconds(10) && windowNanoseconds % 2_000_000_000 == 0,
            "window \(window) (2, 4, 6, 8 or 10 s)"
        )
        try check(sampleInterval >= .milliseconds(100) && sampleInterval <= window, "sampleInterval \(sampleInterval)")
        for (factor, name) in SystemPressureState.Factors.all {
            let values = SystemPressureState.Level.allCases.compactMap { thresholds(of: factor).threshold(of: $0) }
            try check(values.allSatisfy { $0.isFinite && $0 > 0 }, "\(name) thresholds \(values)")
            try check(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, "\(name) thresholds not increasing")
        }
    }
}
