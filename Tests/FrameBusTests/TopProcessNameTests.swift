import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import FrameBus

/// `framebus top` names each subscriber's process (from the peer pid, `/proc/PID/comm`) and explains its columns.
@Suite(.timeLimit(.minutes(3))) struct TopProcessNameTests {
    @Test func topNamesTheSubscribersProcessAndPrintsALegend() async throws {
        let path = temporaryBusPath("topname")
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        defer { publisher.stop() }
        let subscriber = try await startPeer(["bus-subscriber", path, "--timeout", "600"])  // ends with its lifeline
        try #require(await eventually { publisher.subscriberCount == 1 })
        let top = try await startFramebus(["top", path, "--iterations", "1", "--no-clear"])
        #expect(await top.waitForExit(timeout: 60), "\(top.output)")
        let record = try #require(publisher.statistics.subscribers.first)
        let row = try #require(top.output.split(separator: "\n").first { $0.hasPrefix("\(record.id) ") })
        // The test peer's executable is FrameBusTestPeer; the kernel keeps the first 15 bytes of a name.
        #expect(row.hasSuffix(" FrameBusTestPee"), "\(top.output)")
        #expect(row.split(separator: " ", omittingEmptySubsequences: true)[1] == "\(subscriber.processIdentifier)")
        // A legend under the table says what each column is.
        for explanation in [
            "ID subscriber id", "PID its process", "MODE latest-only, or queue N", "HELD frames it holds now",
            "QUEUE messages waiting in its socket", "FPS, MB/s frames and bytes delivered", "LATE, OOB, DISC frames it lost",
            "HOLD p50, p99 how long it keeps a frame", "V its protocol version", "NAME its process's name",
        ] {
            #expect(top.output.contains(explanation), "no legend for \(explanation): \(top.output)")
        }
        _ = subscriber
    }
}
