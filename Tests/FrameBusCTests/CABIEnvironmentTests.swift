import Foundation
import TestSupport
import Testing

/// The C ABI's environment functions from C (Tests/CABI/environment.c): `fb_default_socket_path`, the runtime-directory
/// rule and its private fallback, and the log route (`fb_set_log_handler`, `fb_set_log_level`).
@Suite(.serialized, .timeLimit(.minutes(5))) struct CABIEnvironmentTests {
    /// Runs `environment` with `arguments` to its end (an async, time-limited wait: nothing blocks the pool).
    private func run(_ arguments: [String], in scratch: ScratchDirectory) async throws -> (ChildProcess, Int32) {
        let program = try await CProgram.build("environment")
        let run = try await program.start(arguments, in: scratch)
        let status = try await run.exitStatus(within: 120)
        return (run, status)
    }

    @Test func theDefaultSocketPathFollowsTheRuntimeDirectoryAndFallsBackToAPrivateDirectory() async throws {
        let scratch = try ScratchDirectory()
        let runtime = scratch.path("runtime")
        let parent = scratch.path("tmp")
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: false)
        let (run, status) = try await run(["socketpath", runtime, parent], in: scratch)
        #expect(status == 0, "\(run.output)")
        let cases = Dictionary(run.records("path").map { ($0["case"] ?? "", $0) }) { first, _ in first }
        #expect(cases["xdg"]?["status"] == "0")
        #expect(cases["xdg"]?["path"] == runtime + "/camera.sock")
        #expect(cases["fallback"]?["status"] == "0")
        #expect(cases["fallback"]?["path"] == "\(parent)/framebus-\(getuid())/camera.sock")
        #expect(cases["fallback"]?["mode"] == "700", "the fallback directory is made with mode 0700")
        #expect(cases["fallback"]?["uid"] == "\(getuid())")
        #expect(cases["wide"]?["status"] == "4", "a fallback directory open to others is refused (PERMISSION_DENIED)")
        #expect(cases["small"]?["status"] == "18", "BUFFER_TOO_SMALL")
        #expect(cases["badname"]?["status"] == "1", "INVALID_ARGUMENT")
    }

    @Test func logMessagesGoToTheCallbackAboveTheLevelToStandardErrorWithoutOneAndNowhereWhenOff() async throws {
        let scratch = try ScratchDirectory()
        let (run, status) = try await run(["logging", scratch.path("refusing.sock")], in: scratch)
        #expect(status == 0, "\(run.output)")
        let output = run.output
        #expect(run.records("end").count == 4 && run.records("end").allSatisfy { $0["status"] == "5" }, "\(output)")

        // Each warning of the publisher (which refuses) and of the subscriber (refused) reached the callback, with
        // its user_data, level and label, and none went to stderr meanwhile.
        let logs = run.records("log")
        #expect(logs.allSatisfy { $0["tag"] == "7" }, "the callback's user_data: \(output)")
        #expect(logs.contains { $0["label"] == "framebus.publisher" && $0["level"] == "4" }, "\(output)")
        #expect(logs.contains { $0["label"] == "framebus.subscriber" && $0["level"] == "4" }, "\(output)")
        let lines = output.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("log ") && $0.contains("subscription to") && $0.contains("refusing.sock") })
        #expect(!output.contains("warning framebus"), "a message went to stderr while a callback was set: \(output)")
        #expect(run.records("reentry").allSatisfy { $0["status"] == "13" }, "BUSY from inside the callback")
        #expect(run.records("counts").first?["filtered"] == "0", "warnings below FB_LOG_ERROR were not filtered")

        // Without a callback both go to standard error; with FB_LOG_OFF nothing does.
        #expect(run.records("stderr").first == ["publisher": "1", "subscriber": "1"], "\(output)")
        #expect(run.records("off").first?["publisher"] == "0", "FB_LOG_OFF let a message through: \(output)")
        #expect(run.records("badlevel").first?["status"] == "1")
    }
}
