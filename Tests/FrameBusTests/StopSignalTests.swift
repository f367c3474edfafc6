import Foundation
import Glibc
import Testing
import TestSupport

@testable import FrameBus

/// SIGTERM (what a service manager sends to stop a service) at every point of a long-running command's start-up: the
/// command ends within the time limit every time, and leaves nothing behind.
///
/// Before the fix, `framebus publish` ignored SIGTERM and registered its handler asynchronously (a libdispatch signal
/// source), so a signal in between was lost and the publisher ran on forever. Now `main` blocks the stop signals
/// before any thread starts and a `sigwait` thread takes them, so a signal that comes while the command starts up is
/// kept until the command looks. Only one that comes before `main`'s first statement (in the dynamic loader) can end
/// the process by the signal's default action, before any socket exists; the sweep accepts that and nothing else.
@Suite(.serialized, .timeLimit(.minutes(10))) struct StopSignalTests {
    /// Delays from the start of the process to the signal, in microseconds: from "at once" (still in the loader) past
    /// the moment the socket exists (tens of milliseconds in a debug build on an idle machine).
    static let delays = [0, 200, 500, 1000, 2000, 3000, 5000, 7000, 10_000, 15_000, 20_000, 30_000, 50_000, 80_000,
        120_000, 200_000, 400_000]

    /// Whether the child ended as a stop signal may end it: by itself with status 0, or, for a signal that beat
    /// `main`, by the signal's default action.
    static func endedCleanly(_ child: ChildProcess, status: Int32) -> Bool {
        status == 0 || (child.endedBySignal == true && status == SIGTERM)
    }

    @Test(arguments: delays)
    func publishEndsCleanlyWheneverSIGTERMComes(delay: Int) async throws {
        let path = temporaryBusPath("sigterm")
        let command = try await startFramebus(["publish", "--path", path, "--size", "64x48", "--fps", "30", "--quiet"])
        try await Task.sleep(for: .microseconds(delay))
        command.send(SIGTERM)
        let status = try await command.exitStatus(within: 60)
        #expect(Self.endedCleanly(command, status: status), "status \(status): \(command.output)")
        #expect(!FileManager.default.fileExists(atPath: path), "the socket file was left behind")
        unlink(path)
    }

    /// The same once the socket exists (the test's end of the sweep), many times over: every run stops cleanly with
    /// status 0, never by the signal.
    @Test func publishStopsWithStatusZeroForASIGTERMOnceListening() async throws {
        for round in 0..<10 {
            let path = temporaryBusPath("sigterm-listening")
            let command = try await startFramebus(["publish", "--path", path, "--size", "64x48", "--fps", "30", "--quiet"])
            try #require(await eventually { FileManager.default.fileExists(atPath: path) }, "\(command.output)")
            command.send(SIGTERM)
            let status = try await command.exitStatus(within: 60)
            #expect(status == 0 && command.endedBySignal == false, "round \(round): status \(status)")
            #expect(!FileManager.default.fileExists(atPath: path), "round \(round): the socket file was left behind")
        }
    }

    @Test(arguments: delays)
    func subscribeEndsCleanlyWheneverSIGTERMComes(delay: Int) async throws {
        // No publisher: the subscriber waits for one (--reconnect) until it is stopped.
        let path = temporaryBusPath("sigterm-sub")
        let command = try await startFramebus(["subscribe", "--path", path, "--reconnect", "--json"])
        try await Task.sleep(for: .microseconds(delay))
        command.send(SIGTERM)
        let status = try await command.exitStatus(within: 60)
        #expect(Self.endedCleanly(command, status: status), "status \(status): \(command.output)")
        if status == 0 && command.endedBySignal == false {
            #expect(Self.summary(command.output) != nil, "no summary line: \(command.output)")
        }
    }

    /// `framebus subscribe --help` promises a last line with "summary": true: it comes on SIGINT and SIGTERM too,
    /// counting the frames received.
    @Test(arguments: [SIGINT, SIGTERM])
    func subscribePrintsItsSummaryWhenStopped(_ signal: Int32) async throws {
        let path = temporaryBusPath("sub-summary")
        let publisher = try await startFramebus(["publish", "--path", path, "--size", "64x48", "--fps", "50", "--quiet"])
        try #require(await eventually { FileManager.default.fileExists(atPath: path) }, "\(publisher.output)")
        let command = try await startFramebus(["subscribe", "--path", path, "--json"])
        // The first per-second line: connected and receiving.
        try #require(await eventually { command.output.contains("\"framesPerSecond\"") }, "\(command.output)")
        command.send(signal)
        let status = try await command.exitStatus(within: 60)
        #expect(status == 0 && command.endedBySignal == false, "status \(status): \(command.output)")
        let summary = try #require(Self.summary(command.output), "no summary line: \(command.output)")
        #expect((summary["frames"] as? NSNumber)?.intValue ?? 0 > 0, "\(summary)")
        publisher.send(SIGTERM)
        #expect(try await publisher.exitStatus(within: 60) == 0)
    }

    @Test func topEndsWithStatusZeroOnSIGTERM() async throws {
        let path = temporaryBusPath("top-stop")
        let publisher = try await startFramebus(["publish", "--path", path, "--size", "64x48", "--fps", "10", "--quiet"])
        try #require(await eventually { FileManager.default.fileExists(atPath: path) }, "\(publisher.output)")
        let top = try await startFramebus(["top", path, "--no-clear"])
        try #require(await eventually { top.output.contains("published") }, "\(top.output)")
        top.send(SIGTERM)
        let status = try await top.exitStatus(within: 60)
        #expect(status == 0 && top.endedBySignal == false, "status \(status): \(top.output)")
        publisher.send(SIGTERM)
        #expect(try await publisher.exitStatus(within: 60) == 0)
    }

    /// A command that does not stop cleanly keeps the default action: it ends by the signal, at once.
    @Test func otherCommandsKeepTheDefaultAction() async throws {
        let image = TestLocations.packageRoot.appendingPathComponent("Corpus/synthetic/testsrc_1280x720.png")
        // Minutes of work unless stopped.
        let command = try await startFramebus([
            "bench", "codec", image.path, "--formats", "420v", "--threads", "1", "--repetitions", "100000",
            "--memory-frames", "0",
        ])
        // Working (past `main`, whose output is buffered): it has used a quarter second of CPU.
        func cpuTicks() -> Int {
            let stat = (try? String(contentsOfFile: "/proc/\(command.processIdentifier)/stat", encoding: .utf8)) ?? ""
            let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
            return fields.count > 12 ? (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0) : 0
        }
        try #require(await eventually { cpuTicks() >= sysconf(Int32(_SC_CLK_TCK)) / 4 }, "\(command.output)")
        command.send(SIGTERM)
        let status = try await command.exitStatus(within: 60)
        #expect(command.endedBySignal == true && status == SIGTERM, "status \(status): \(command.output)")
    }

    /// The JSON line with "summary": true, if any.
    static func summary(_ output: String) -> [String: Any]? {
        for line in output.split(separator: "\n").reversed() {
            if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                object["summary"] as? Bool == true
            {
                return object
            }
        }
        return nil
    }
}
