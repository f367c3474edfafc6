/// One sample of every factor's measurement (``SystemPressurePolicy`` says what each is); nil: not available here
/// (no PSI, no thermal zone, nothing published yet).
package struct SystemPressureSample: Hashable, Sendable {
    package var cpu: Double?
    package var memory: Double?
    package var io: Double?
    package var thermal: Double?
    package var bus: Double?

    package init(
        cpu: Double? = nil,
        memory: Double? = nil,
        io: Double? = nil,
        thermal: Double? = nil,
        bus: Double? = nil
    ) {
        self.cpu = cpu
        self.memory = memory
        self.io = io
        self.thermal = thermal
        self.bus = bus
    }

    func measurement(of factor: SystemPressureState.Factors) -> Double? {
        switch factor {
        case .cpu: cpu
        case .memory: memory
        case .io: io
        case .thermal: thermal
        default: bus
        }
    }
}

/// The system pressure level as a state machine: samples in, a new ``SystemPressureState`` out when it changes. No
/// files, no clocks, no threads: the monitor feeds it what it measured and when, so its thresholds and hysteresis are
/// table-tested (``SystemPressurePolicy`` documents the rules).
package struct SystemPressureStateMachine: Sendable {
    private struct FactorState: Sendable {
        var level: SystemPressureState.Level = .nominal
        /// Since when the measurement has been below this level's recovery bound, without a break.
        var calmSince: UInt64?
    }

    package let policy: SystemPressurePolicy
    private var factors: [FactorState]
    /// The state last returned.
    package private(set) var state = SystemPressureState.nominal

    package init(policy: SystemPressurePolicy) {
        self.policy = policy
        self.factors = Array(repeating: FactorState(), count: SystemPressureState.Factors.all.count)
    }

    /// The level one factor is at now.
    package func level(of factor: SystemPressureState.Factors) -> SystemPressureState.Level {
        guard let index = SystemPressureState.Factors.all.firstIndex(where: { $0.factor == factor }) else {
            return .nominal
        }
        return factors[index].level
    }

    /// Takes a sample made at `now` (nanoseconds, any monotonic clock).
    ///
    /// - Returns: the new state when its level or factors changed; nil otherwise.
    package mutating func sampled(_ sample: SystemPressureSample, now: UInt64) -> SystemPressureState? {
        let holdTime = policy.holdTime.nanoseconds
        for (index, entry) in SystemPressureState.Factors.all.enumerated() {
            let thresholds = policy.thresholds(of: entry.factor)
            var factor = factors[index]
            // An unavailable measurement is no pressure: the factor comes down like a calm one.
            let measurement = sample.measurement(of: entry.factor) ?? 0
            let reached = measurement.isNaN ? .nominal : thresholds.level(for: measurement)
            if reached > factor.level {
                factor.level = reached
                factor.calmSince = nil
            } else if factor.level > .nominal {
                let bound = (thresholds.threshold(of: factor.level) ?? 0) * policy.recoveryRatio
                if measurement < bound {
                    let since = factor.calmSince ?? now
                    if now &- since >= holdTime {
                        // One level down, then another hold time before the next.
                        factor.level = factor.level.lower
                        factor.calmSince = factor.level > .nominal ? now : nil
                    } else {
                        factor.calmSince = since
                    }
                } else {
                    factor.calmSince = nil
                }
            }
            factors[index] = factor
        }
        let level = factors.map(\.level).max() ?? .nominal
        var set: SystemPressureState.Factors = []
        if level > .nominal {
            for (index, entry) in SystemPressureState.Factors.all.enumerated() where factors[index].level == level {
                set.insert(entry.factor)
            }
        }
        let next = SystemPressureState(level: level, factors: set)
        guard next != state else { return nil }
        state = next
        return next
    }
}
