import Testing

@testable import FrameBus

/// The pressure level as a state machine: thresholds, factors, and how it comes down (SystemPressurePolicy).
@Suite struct SystemPressureStateMachineTests {
    static let second: UInt64 = 1_000_000_000

    /// One step of a table: a sample at a time (seconds), and the state expected after it.
    struct Step: CustomStringConvertible, Sendable {
        var time: Double
        var sample: SystemPressureSample
        var level: SystemPressureState.Level
        var factors: SystemPressureState.Factors
        var description: String { "t=\(time) \(sample) → \(level) \(factors)" }
    }

    static func step(
        _ time: Double,
        cpu: Double? = nil,
        memory: Double? = nil,
        io: Double? = nil,
        thermal: Double? = nil,
        bus: Double? = nil,
        _ level: SystemPressureState.Level,
        _ factors: SystemPressureState.Factors = []
    ) -> Step {
        Step(
            time: time,
            sample: SystemPressureSample(cpu: cpu, memory: memory, io: io, thermal: thermal, bus: bus),
            level: level,
            factors: factors
        )
    }

    struct Table: CustomStringConvertible, Sendable {
        var name: String
        var steps: [Step]
        var description: String { name }
    }

    static let tables: [Table] = [
        Table(
            name: "a calm system stays nominal and says nothing",
            steps: [step(0, cpu: 0.1, memory: 0, io: 0.05, bus: 0.3, .nominal), step(1, cpu: 0.39, .nominal)]
        ),
        Table(
            name: "going up is immediate, to the highest level reached",
            steps: [
                step(0, cpu: 0.1, .nominal), step(1, cpu: 0.95, .critical, .cpu),
                step(2, cpu: 0.5, memory: 0.7, .shutdown, .memory),
            ]
        ),
        Table(
            name: "factors are those at the state's level",
            steps: [
                step(0, cpu: 0.7, bus: 1.2, .serious, [.cpu, .bus]), step(1, cpu: 0.7, bus: 2.5, .critical, .bus),
                step(2, cpu: 0.7, io: 0.5, bus: 2.5, .critical, .bus),
            ]
        ),
        Table(
            name: "a measurement hovering around a threshold does not flap",
            steps: [
                step(0, cpu: 0.7, .serious, .cpu), step(1, cpu: 0.6, .serious, .cpu),
                step(2, cpu: 0.66, .serious, .cpu),
                step(6, cpu: 0.5, .serious, .cpu), step(12, cpu: 0.5, .serious, .cpu),
            ]
        ),
        Table(
            name: "coming down is one level per hold time of calm",
            steps: [
                step(0, cpu: 1.0, .critical, .cpu), step(1, cpu: 0.1, .critical, .cpu),
                step(4, cpu: 0.1, .critical, .cpu), step(5, cpu: 0.1, .serious, .cpu),
                step(8, cpu: 0.1, .serious, .cpu), step(9, cpu: 0.1, .fair, .cpu), step(13, cpu: 0.1, .nominal),
            ]
        ),
        Table(
            name: "a break in the calm starts the hold time again",
            steps: [
                step(0, cpu: 0.7, .serious, .cpu), step(1, cpu: 0.1, .serious, .cpu), step(4, cpu: 0.6, .serious, .cpu),
                step(5, cpu: 0.1, .serious, .cpu), step(8, cpu: 0.1, .serious, .cpu), step(9, cpu: 0.1, .fair, .cpu),
            ]
        ),
        Table(
            name: "a measurement that goes away counts as calm",
            steps: [
                step(0, io: 0.5, .serious, .io), step(1, .serious, .io), step(5, .fair, .io), step(9, .nominal),
            ]
        ),
        Table(
            name: "a factor coming down leaves another one at the top",
            steps: [
                step(0, cpu: 0.7, bus: 0.9, .serious, .cpu), step(1, cpu: 0.1, bus: 0.9, .serious, .cpu),
                step(5, cpu: 0.1, bus: 0.9, .fair, [.cpu, .bus]), step(9, cpu: 0.1, bus: 0.9, .fair, .bus),
            ]
        ),
        Table(
            name: "thermal at its critical trip point is shutdown",
            steps: [step(0, thermal: 0.95, .fair, .thermal), step(1, thermal: 1.10, .shutdown, .thermal)]
        ),
    ]

    @Test(arguments: tables)
    func theLevelFollowsTheTable(_ table: Table) {
        var machine = SystemPressureStateMachine(policy: SystemPressurePolicy())
        var previous = SystemPressureState.nominal
        for step in table.steps {
            let changed = machine.sampled(step.sample, now: UInt64(step.time * Double(Self.second)))
            let expected = SystemPressureState(level: step.level, factors: step.factors)
            #expect(machine.state == expected, "\(step)")
            // An event exactly when the state changed.
            #expect(changed == (expected != previous ? expected : nil), "\(step)")
            previous = machine.state
        }
    }

    @Test(arguments: [
        (SystemPressureState.Level.nominal, 60.0, 15.0, 60.0), (.fair, 60, 30, 30), (.serious, 60, 60, 30),
        (.critical, 60, 30, 15), (.shutdown, 60, 60, 15), (.serious, 2, 2, 1), (.critical, 2, 2, 1),
    ])
    func theFrameRateFallsAtSeriousAndComesBackAtNominal(
        level: SystemPressureState.Level,
        nominal: Double,
        current: Double,
        expected: Double
    ) {
        #expect(SystemPressurePolicy().adaptedFrameRate(nominal: nominal, current: current, level: level) == expected)
    }

    @Test func aWindowThatIsNotAMultipleOfTwoSecondsIsRefused() {
        var policy = SystemPressurePolicy()
        policy.window = .seconds(3)
        #expect(throws: FrameBusError.self) { try policy.validate() }
        policy.window = .seconds(4)
        policy.cpu = .init(fair: 0.5, serious: 0.4, critical: 0.9)
        #expect(throws: FrameBusError.self) { try policy.validate() }
        #expect(throws: Never.self) { try SystemPressurePolicy().validate() }
    }

    @Test func stateAndFactorsPrintAsTheirWireNames() {
        let state = SystemPressureState(level: .serious, factors: [.bus, .cpu])
        #expect(state.factors.names == ["cpu", "bus"])
        #expect("\(state)" == "serious [cpu, bus]")
        #expect("\(SystemPressureState.nominal)" == "nominal")
    }
}
