import Foundation
import Synchronization
import TestSupport
import Testing

@testable import FrameBus

/// System pressure from the real kernel: PSI files and triggers on this machine, and CPU hogs as real processes.
@Suite(.timeLimit(.minutes(5))) struct SystemPressureMonitorTests {
    static var hasPSI: Bool { Syscall.isReadable("/proc/pressure/cpu") }

    /// Three busy-looping processes (at nice 19, so the rest of the suite keeps its share) on a two-core machine keep
    /// some task waiting for a CPU nearly all the time: the publisher's PSI trigger wakes its monitor, the level rises
    /// to serious or critical with the cpu factor, and the producer's handler and `systemPressureState` say so.
    @Test(.enabled(if: hasPSI, "this kernel has no /proc/pressure (PSI)"))
    func cpuHogsRaiseTheLevelWithTheCPUFactor() async throws {
        let seen = Mutex<[SystemPressureState]>([])
        var configuration = Publisher.Configuration(
            path: temporaryBusPath("psi"),
            formats: [.yuv420BiPlanarVideoRange8]
        )
        configuration.systemPressureHandler = { state in seen.withLock { $0.append(state) } }
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        let cores = max(2, ProcessInfo.processInfo.activeProcessorCount)
        var hogs: [ChildProcess] = []
        for _ in 0..<(cores + 1) {
            hogs.append(
                try await ChildProcess(
                    URL(fileURLWithPath: "/usr/bin/nice"),
                    ["-n", "19", "/bin/sh", "-c", "while :; do :; done"],
                    lifeline: true
                )
            )
        }
        let raised = await eventually(timeout: 60) {
            let state = publisher.systemPressureState
            return state.level >= .serious && state.factors.contains(.cpu)
        }
        let sample = publisher.core.pressureMonitor.withLock { $0?.lastSample }
        for hog in hogs { await hog.kill() }
        #expect(raised, "level \(publisher.systemPressureState), last sample \(String(describing: sample))")
        #expect((sample?.cpu ?? 0) >= SystemPressurePolicy().cpu.serious!, "\(String(describing: sample))")
        let states = seen.withLock { $0 }
        #expect(states.contains { $0.level >= .serious && $0.factors.contains(.cpu) }, "handler saw \(states)")
        #expect(states.last == publisher.systemPressureState || !raised)
    }

    /// The files the monitor reads parse, and a trigger with a 2-second window (what an unprivileged process may
    /// arm) is accepted by the kernel.
    @Test(.enabled(if: hasPSI, "this kernel has no /proc/pressure (PSI)"))
    func thisKernelsPressureFilesParseAndTakeATrigger() throws {
        let files = SystemPressureMonitor.pressureFiles(.init())
        for path in [files.cpu, files.memory, files.io] {
            let text = try #require(Syscall.readSmallFile(path), "\(path)")
            #expect(PressureStallFile(text) != nil, "\(path): \(text)")
        }
        let trigger = Syscall.openPressureTrigger(
            files.cpu,
            kind: "some",
            stallMicroseconds: 800_000,
            windowMicroseconds: 2_000_000
        )
        let descriptor = try trigger.get()
        Syscall.close(descriptor)
    }

    @Test func stallTotalsParseFromTheKernelsText() {
        let text = """
            some avg10=27.28 avg60=7.92 avg300=5.53 total=33049119
            full avg10=0.00 avg60=0.00 avg300=0.00 total=17

            """
        #expect(PressureStallFile(text) == PressureStallFile(some: 33_049_119, full: 17))
        #expect(PressureStallFile("some avg10=1.00 total=5\n")?.full == nil)
        #expect(PressureStallFile("full avg10=1.00 total=5\n") == nil)
        #expect(PressureStallFile("garbage") == nil)
    }

    /// Zones are read from sysfs where the machine has them (this one has none; its layout is made here).
    @Test func thermalZonesAreMeasuredAgainstTheirTripPoints() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("fbthermal-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        func zone(_ name: String, temperature: Int, trips: [(String, Int)]) throws {
            let directory = root.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try "\(temperature)\n".write(
                to: directory.appendingPathComponent("temp"),
                atomically: true,
                encoding: .utf8
            )
            for (index, trip) in trips.enumerated() {
                try "\(trip.0)\n".write(
                    to: directory.appendingPathComponent("trip_point_\(index)_type"),
                    atomically: true,
                    encoding: .utf8
                )
                try "\(trip.1)\n".write(
                    to: directory.appendingPathComponent("trip_point_\(index)_temp"),
                    atomically: true,
                    encoding: .utf8
                )
            }
        }
        try zone("thermal_zone0", temperature: 45_000, trips: [("passive", 90_000), ("critical", 105_000)])
        try zone("thermal_zone1", temperature: 88_000, trips: [("hot", 95_000)])
        try zone("cooling_device0", temperature: 1, trips: [])
        let zones = ThermalZone.discover(in: root.path)
        #expect(zones.count == 2)
        let measured = try #require(ThermalZone.measurement(zones, shutdownAt: 1.1))
        #expect(abs(measured - 88.0 / 95.0) < 1e-9)
        try zone("thermal_zone0", temperature: 106_000, trips: [("passive", 90_000), ("critical", 105_000)])
        #expect(ThermalZone.measurement(zones, shutdownAt: 1.25) == 1.25)
        #expect(ThermalZone.discover(in: root.path + "/missing").isEmpty)
    }
}
