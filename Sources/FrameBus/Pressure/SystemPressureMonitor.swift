import Foundation
import Synchronization

/// Measures what ``SystemPressureSample`` needs on a thread of its own and feeds the ``SystemPressureStateMachine``:
/// pressure stall information (PSI) woken by the kernel's `poll()`able triggers, thermal zones, and the stream's own
/// cost from its publisher.
///
/// Where it reads:
/// - **PSI**: the `cpu.pressure`, `memory.pressure` and `io.pressure` files of this process's own cgroup (cgroup v2,
///   found through `/proc/self/cgroup` and the cgroup2 mount in `/proc/self/mountinfo`) when it is not the root
///   cgroup, otherwise `/proc/pressure/{cpu,memory,io}`. It arms one trigger per file at the factor's ``fair``
///   threshold over the policy's window, so a quiet system costs one wake-up per window, and pressure wakes it at
///   once. A kernel without PSI (or a file it may not open) leaves that factor unavailable (never raised).
/// - **Thermal**: `/sys/class/thermal/thermal_zone*/temp` against each zone's first `passive` (else `hot`) trip point,
///   and its `critical` one; a machine without zones (most virtual machines) has no thermal factor.
/// - **Bus**: a closure its publisher gives (the frame cost, at least 1.0 while frames are shed).
final class SystemPressureMonitor: Sendable {
    /// Where the files are; tests point the thermal root at a directory of their own.
    struct Roots: Sendable {
        var procPressure = "/proc/pressure"
        var thermal = "/sys/class/thermal"
        var selfCgroup = "/proc/self/cgroup"
        var selfMountInfo = "/proc/self/mountinfo"
    }

    private struct Counters {
        var time: UInt64
        /// Cumulative stall microseconds: cpu some, memory some, memory full, io some (nil: not available).
        var cpu: UInt64?
        var memorySome: UInt64?
        var memoryFull: UInt64?
        var io: UInt64?
    }

    private struct Shared {
        var machine: SystemPressureStateMachine
        var isStopped = false
        var lastSample = SystemPressureSample()
    }

    let policy: SystemPressurePolicy
    /// The PSI files read: a cgroup's or the system's.
    let pressureFiles: (cpu: String, memory: String, io: String)
    private let roots: Roots
    private let doorbell: Doorbell
    private let shared: Mutex<Shared>
    private let bus: @Sendable () -> Double?
    private let changed: @Sendable (SystemPressureState) -> Void

    /// Starts measuring. `bus` is asked for the stream's measurement at every sample; `changed` is called on the
    /// monitor's thread whenever the state changes.
    init(
        policy: SystemPressurePolicy,
        roots: Roots = Roots(),
        bus: @escaping @Sendable () -> Double?,
        changed: @escaping @Sendable (SystemPressureState) -> Void
    ) throws(FrameBusError) {
        self.policy = policy
        self.roots = roots
        self.bus = bus
        self.changed = changed
        self.doorbell = try Doorbell()
        self.shared = Mutex(Shared(machine: SystemPressureStateMachine(policy: policy)))
        self.pressureFiles = Self.pressureFiles(roots)
        let thread = Thread { [self] in run() }
        thread.name = "framebus.pressure"
        thread.start()
    }

    /// The state now.
    var state: SystemPressureState { shared.withLock { $0.machine.state } }

    /// The measurements of the last sample (for `framebus top` and tests).
    var lastSample: SystemPressureSample { shared.withLock { $0.lastSample } }

    /// Ends the thread at its next wake-up, which this rings for.
    func stop() {
        shared.withLock { $0.isStopped = true }
        doorbell.ring()
    }

    // MARK: The thread

    private func run() {
        var triggers: [Int32] = []
        let window = policy.window.nanoseconds / 1000
        for (path, thresholds) in [
            (pressureFiles.cpu, policy.cpu), (pressureFiles.memory, policy.memory), (pressureFiles.io, policy.io),
        ] {
            guard let fair = thresholds.fair, fair > 0, fair < 1 else { continue }
            let stall = UInt64(Double(window) * fair)
            if case .success(let descriptor) = Syscall.openPressureTrigger(
                path,
                kind: "some",
                stallMicroseconds: stall,
                windowMicroseconds: window
            ) {
                triggers.append(descriptor)
            }
        }
        defer { for descriptor in triggers { Syscall.close(descriptor) } }
        let zones = ThermalZone.discover(in: roots.thermal)
        var history: [Counters] = []
        var interests: [(descriptor: Int32, events: Int16)] = [(doorbell.descriptor, PollEvents.readable)]
        for descriptor in triggers { interests.append((descriptor, Syscall.pressureTriggerEvent)) }
        var timeout = Int32(0)  // the first sample at once
        while true {
            let ready: [Int16]
            switch Syscall.poll(interests, timeout: timeout) {
            case .success(let events): ready = events
            case .failure(.interrupted): continue
            case .failure: return
            }
            if ready[0] != 0 { doorbell.drain() }
            if shared.withLock({ $0.isStopped }) { return }
            // A trigger whose file went away (its cgroup removed) is dropped; the others stay armed.
            for index in stride(from: ready.count - 1, to: 0, by: -1)
            where ready[index] & Syscall.pressureTriggerError != 0 {
                Syscall.close(interests[index].descriptor)
                interests.remove(at: index)
            }
            let now = ProcessInfoShim.monotonicNanoseconds()
            history.append(readCounters(now))
            // Keep the samples of the last window: the oldest gives the share over (about) the window.
            while history.count > 2, now &- history[1].time >= policy.window.nanoseconds { history.removeFirst() }
            var sample = shares(history)
            sample.thermal = ThermalZone.measurement(zones, shutdownAt: policy.thermal.shutdown)
            sample.bus = bus()
            let (next, elevated) = shared.withLock { shared -> (SystemPressureState?, Bool) in
                shared.lastSample = sample
                let next = shared.machine.sampled(sample, now: now)
                let elevated = SystemPressureState.Factors.all.contains {
                    shared.machine.level(of: $0.factor) > .nominal
                }
                return (next, elevated)
            }
            if let next { changed(next) }
            // While anything is elevated, sample often enough to see it come down; at nominal the triggers wake us.
            let interval = elevated || history.count < 2 ? policy.sampleInterval : policy.window
            timeout = Int32(clamping: interval.nanoseconds / 1_000_000)
        }
    }

    private func readCounters(_ now: UInt64) -> Counters {
        let cpu = Syscall.readSmallFile(pressureFiles.cpu).flatMap { PressureStallFile($0) }
        let memory = Syscall.readSmallFile(pressureFiles.memory).flatMap { PressureStallFile($0) }
        let io = Syscall.readSmallFile(pressureFiles.io).flatMap { PressureStallFile($0) }
        return Counters(time: now, cpu: cpu?.some, memorySome: memory?.some, memoryFull: memory?.full, io: io?.some)
    }

    private func shares(_ history: [Counters]) -> SystemPressureSample {
        guard let first = history.first, let last = history.last, last.time > first.time else {
            return SystemPressureSample()
        }
        let span = Double(last.time - first.time) / 1000  // microseconds
        func share(_ path: KeyPath<Counters, UInt64?>) -> Double? {
            guard let before = first[keyPath: path], let after = last[keyPath: path], after >= before else {
                return nil
            }
            return min(1, Double(after - before) / span)
        }
        let memory: Double? = share(\.memorySome).map { some in min(1, some + 2 * (share(\.memoryFull) ?? 0)) }
        return SystemPressureSample(cpu: share(\.cpu), memory: memory, io: share(\.io))
    }

    /// The PSI files of this process's cgroup when it has its own (cgroup v2, not the root), else the system's.
    static func pressureFiles(_ roots: Roots) -> (cpu: String, memory: String, io: String) {
        if let directory = ownCgroupDirectory(roots), Syscall.isReadable(directory + "/cpu.pressure") {
            return (directory + "/cpu.pressure", directory + "/memory.pressure", directory + "/io.pressure")
        }
        return (roots.procPressure + "/cpu", roots.procPressure + "/memory", roots.procPressure + "/io")
    }

    /// `<cgroup2 mount><path>` from `/proc/self/cgroup`'s `0::<path>` line; nil for the root cgroup or without v2.
    static func ownCgroupDirectory(_ roots: Roots) -> String? {
        guard let cgroups = Syscall.readSmallFile(roots.selfCgroup, maximumSize: 4096),
            let line = cgroups.split(separator: "\n").first(where: { $0.hasPrefix("0::") })
        else { return nil }
        let path = String(line.dropFirst(3))
        guard path != "/", !path.contains("..") else { return nil }
        guard let mounts = Syscall.readSmallFile(roots.selfMountInfo, maximumSize: 65536) else { return nil }
        for mount in mounts.split(separator: "\n") {
            // "... mountpoint options - cgroup2 source superoptions": the fields after " - " start with the type.
            let halves = mount.components(separatedBy: " - ")
            guard halves.count == 2, halves[1].hasPrefix("cgroup2 ") else { continue }
            let fields = halves[0].split(separator: " ")
            guard fields.count >= 5 else { continue }
            return String(fields[4]) + path
        }
        return nil
    }
}

/// One PSI file's cumulative stall times (`some … total=N`, `full … total=N`, in microseconds).
struct PressureStallFile: Hashable {
    var some: UInt64
    var full: UInt64?

    init(some: UInt64, full: UInt64?) {
        self.some = some
        self.full = full
    }

    /// Parses the kernel's text; nil when it has no "some" line with a total.
    init?(_ text: String) {
        var some: UInt64?
        var full: UInt64?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let kind = fields.first,
                let total = fields.first(where: { $0.hasPrefix("total=") }).flatMap({ UInt64($0.dropFirst(6)) })
            else { continue }
            if kind == "some" { some = total } else if kind == "full" { full = total }
        }
        guard let some else { return nil }
        self.some = some
        self.full = full
    }
}

/// A thermal zone with its trip points (millidegrees Celsius).
struct ThermalZone: Hashable {
    var temperaturePath: String
    /// The first passive trip point, else the first hot one: where the kernel starts to throttle.
    var throttle: Int
    /// The critical trip point (the kernel shuts down there), if any.
    var critical: Int?

    /// The zones under `root` (`thermal_zone*`) that have a temperature and a passive, hot or critical trip point.
    static func discover(in root: String) -> [ThermalZone] {
        guard let names = Syscall.directoryEntries(root) else { return [] }
        var zones: [ThermalZone] = []
        for name in names.sorted() where name.hasPrefix("thermal_zone") {
            let directory = root + "/" + name
            var passive: Int?
            var hot: Int?
            var critical: Int?
            for index in 0..<32 {
                guard let type = Syscall.readSmallFile(directory + "/trip_point_\(index)_type"),
                    let value = Syscall.readSmallFile(directory + "/trip_point_\(index)_temp")
                        .flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }),
                    value > 0
                else { break }
                switch type.trimmingCharacters(in: .whitespacesAndNewlines) {
                case "passive": passive = passive ?? value
                case "hot": hot = hot ?? value
                case "critical": critical = critical ?? value
                default: break
                }
            }
            guard let throttle = passive ?? hot ?? critical else { continue }
            zones.append(ThermalZone(temperaturePath: directory + "/temp", throttle: throttle, critical: critical))
        }
        return zones
    }

    /// The hottest zone's temperature over its throttle point; at its critical point at least `shutdownAt`. Nil
    /// without zones (or when none can be read).
    static func measurement(_ zones: [ThermalZone], shutdownAt: Double?) -> Double? {
        var worst: Double?
        for zone in zones {
            guard let text = Syscall.readSmallFile(zone.temperaturePath),
                let temperature = Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
            else { continue }
            var value = Double(temperature) / Double(zone.throttle)
            if let critical = zone.critical, temperature >= critical, let shutdownAt { value = max(value, shutdownAt) }
            worst = max(worst ?? value, value)
        }
        return worst
    }
}
