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

    /// A Python client shows as its script, not just "python"; the header names the publisher's process and the
    /// formats it delivers. The client speaks HELLO by hand (docs/PROTOCOL.md Appendix A), so only python3 is needed.
    @Test func topNamesAPythonClientByItsScriptAndShowsThePublishersProcess() async throws {
        let path = temporaryBusPath("topscript")
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        defer { publisher.stop() }
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("fbtop-\(UUID().uuidString.prefix(8)).py")
        try """
            import socket, sys, time
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(sys.argv[1])
            s.send(bytes.fromhex("010000001c00000053554246020000000100010000000000" + "76303234"))
            s.recv(4096)
            print("welcomed", flush=True)
            sys.stdin.read()
            """.write(to: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: script) }
        let python = try #require(TestLocations.onPath("python3"), "python3 is not on the PATH")
        let client = try await ChildProcess(python, [script.path, path], lifeline: true)
        try #require(await eventually { publisher.subscriberCount == 1 }, "\(client.output)")
        let top = try await startFramebus(["top", path, "--iterations", "1", "--no-clear"])
        #expect(await top.waitForExit(timeout: 60), "\(top.output)")
        let record = try #require(publisher.statistics.subscribers.first)
        let row = try #require(top.output.split(separator: "\n").first { $0.hasPrefix("\(record.id) ") })
        #expect(row.contains(" python") && row.hasSuffix(" \(script.lastPathComponent)"), "\(top.output)")
        #expect(top.output.contains("publisher pid \(getpid()) ("), "\(top.output)")
        #expect(top.output.contains("formats delivered 420v"), "\(top.output)")
        _ = client
    }

    /// With no publisher, top says so in the words `framebus subscribe` uses.
    @Test func topSaysThereIsNoPublisher() async throws {
        let path = temporaryBusPath("topnone")
        let top = try await startFramebus(["top", path, "--iterations", "1"])
        #expect(await top.waitForExit(timeout: 60), "\(top.output)")
        #expect(top.output.contains("no publisher at \(path)"), "\(top.output)")
    }
}
