import Foundation
import Logging

// System pressure: the monitor's thread reports changes here, which go to the producer and to subscribers.

extension PublisherCore {
    // MARK: System pressure

    /// Starts measuring system pressure when the configuration has a policy. The monitor holds the core weakly, so it
    /// never keeps a stopped publisher alive; ``stop()`` ends it.
    func startPressureMonitor() throws(FrameBusError) {
        guard let policy = configuration.systemPressurePolicy else { return }
        let monitor = try SystemPressureMonitor(
            policy: policy,
            bus: { [weak self] in
                self?.costMeter.withLock { $0.busMeasurement(now: ProcessInfoShim.monotonicNanoseconds()) }
            },
            changed: { [weak self] state in self?.systemPressureChanged(state) }
        )
        let stale = pressureMonitor.withLock { current -> SystemPressureMonitor? in
            let stale = current
            current = monitor
            return stale
        }
        stale?.stop()
    }

    /// The monitor's thread: the state changed.
    func systemPressureChanged(_ state: SystemPressureState) {
        systemPressure.withLock { $0 = state }
        withState { core in
            var fields = core.machine.status
            fields.level = UInt16(state.level.rawValue)
            fields.factors = state.factors.rawValue
            perform(core.machine.updateStatus(fields, now: ProcessInfoShim.monotonicNanoseconds()), &core)
        }
        let sample = pressureMonitor.withLock { $0?.lastSample } ?? SystemPressureSample()
        let line =
            "system pressure \(state) (cpu \(Self.percent(sample.cpu)), memory \(Self.percent(sample.memory)), "
            + "io \(Self.percent(sample.io)), bus \(sample.bus.map(PublisherCost.rounded) ?? "-"))"
        configuration.logger.log(level: state.level >= .serious ? .warning : .notice, "\(line)")
        configuration.systemPressureHandler?(state)
    }

    static func percent(_ share: Double?) -> String {
        share.map { "\(Int(($0 * 100).rounded())) %" } ?? "-"
    }
}

extension PublisherCore {
    /// The cost's part of STATUS, after each window (no STATUS is sent for it alone: PROTOCOL.md §5.13).
    func costChanged(_ cost: PublisherCost) {
        withState { state in
            var fields = state.machine.status
            fields.cost =
                cost.frameInterval == nil
                ? WireStatus.unknownCost : UInt32(min(max(0, cost.value * 1000), 4_294_967_294))
            fields.framesShed = cost.framesShed
            perform(state.machine.updateStatus(fields, now: ProcessInfoShim.monotonicNanoseconds()), &state)
        }
    }
}
