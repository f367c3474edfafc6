import Foundation
import Testing

/// The C ABI's environment functions from C (Tests/CABI/environment.c): `fb_default_socket_path`, the runtime-directory
/// rule and its private fallback, and the log route (`fb_set_log_handler`, `fb_set_log_level`).
@Suite(.serialized, .timeLimit(.minutes(5))) struct CABIEnvironmentTests {
    /// Runs `environment` with `arguments` off the cooperative pool's threads and returns the finished run.
    private func run(_ arguments: [String], in scratch: ScratchDirectory) async throws -> (ProgramRun, Int32) {
        let program = try CProgram.build("environment")
        let run = try program.start(arguments, in: scratch)
        let status = await Task.detached { run.wait(timeout: 120) }.value
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
        let (run, status) = try await run(["logging", scratch.path("nobody.sock")], in: scratch)
        #expect(status == 0, "\(run.output)")
        let output = run.output
        let phases = output.components(separatedBy: "phase name=")
        // phases[1]: callback, [2]: filtered, [3]: stderr, [4]: off, [5]: done.
        try #require(phases.count == 6, "\(output)")

        #expect(
            run.records("thread").count == 4 && run.records("thread").allSatisfy { $0["gone"] == "1" },
            "a subscriber's connection thread did not end: \(output)"
        )
        let logs = run.records("log")
        #expect(!logs.isEmpty, "the callback got no message: \(output)")
        for log in logs {
            #expect(log["tag"] == "7", "the callback's user_data")
            #expect(log["level"] == "4", "a warning: \(log)")
            #expect(log["label"] == "framebus.subscriber")
        }
        let messages = output.split(separator: "\n").filter { $0.hasPrefix("log ") }
        #expect(messages.contains { $0.contains("subscription to") && $0.contains("nobody.sock") }, "\(output)")
        #expect(run.records("reentry").allSatisfy { $0["status"] == "13" }, "BUSY from inside the callback")
        #expect(run.records("counts").first?["filtered"] == "0", "warnings below FB_LOG_ERROR were not filtered")
        #expect(!phases[1].contains("warning framebus"), "a message went to stderr while a callback was set")

        // Without a callback the warning goes to standard error (which the harness writes to the same file).
        #expect(phases[3].contains("warning framebus.subscriber"), "\(phases[3])")
        #expect(!phases[4].contains("framebus.subscriber"), "FB_LOG_OFF let a message through: \(phases[4])")
        #expect(run.records("badlevel").first?["status"] == "1")
    }
}
