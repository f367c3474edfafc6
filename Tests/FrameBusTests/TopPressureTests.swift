import Foundation
import TestSupport
import Testing

@testable import FrameBus

/// `framebus top` (a real process) shows the publisher's STATUS: pressure, cost, frame duration, frames shed.
@Suite(.timeLimit(.minutes(5))) struct TopPressureTests {
    @Test func topShowsThePublishersPressureAndFrameDuration() async throws {
        var configuration = Publisher.Configuration(
            path: temporaryBusPath("toppressure"),
            formats: [.yuv420BiPlanarVideoRange8]
        )
        configuration.systemPressurePolicy = nil  // the test says what the pressure is
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        publisher.core.systemPressureChanged(SystemPressureState(level: .critical, factors: [.cpu, .thermal]))
        let pool = try PublisherFairnessTests.pool(threshold: 8)
        let buffer = try publisher.makePixelBuffer(from: pool)
        _ = try fillFrame(buffer, index: 0)
        // A frame of 1/25 s: the status's frame duration.
        try publisher.publish(
            buffer,
            timing: SampleTimingInfo(presentationTimeStamp: HostClock.now, duration: MediaTime(value: 1, timescale: 25))
        )
        let top = try await startFramebus(["top", configuration.path, "--iterations", "1", "--no-clear"])
        #expect(try await top.exitStatus(within: 120) == 0, "\(top.output)")
        let line = top.output.split(separator: "\n").first { $0.hasPrefix("pressure ") }.map(String.init)
        #expect(
            line?.hasPrefix("pressure critical [cpu, thermal]  cost -  frame 40.0ms  shed 0") == true,
            "\(top.output)"
        )
    }

    /// The monitor's first report already carries the status (it follows the report at once).
    @Test func aMonitorsFirstReportCarriesTheStatus() async throws {
        let path = temporaryBusPath("topnostatus")
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        defer { publisher.stop() }
        let monitor = try PublisherMonitor(path: path)
        let first = try #require(try monitor.nextReport(timeout: .seconds(30)))
        #expect(first.status != nil)
        #expect(first.status?.systemPressure.level == publisher.systemPressureState.level)
    }
}
