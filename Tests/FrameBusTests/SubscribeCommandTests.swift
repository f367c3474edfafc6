import Foundation
import Testing
import TestSupport

/// `framebus subscribe` as a user runs it, against a publisher process.
@Suite(.timeLimit(.minutes(5))) struct SubscribeCommandTests {
    /// Runs `framebus ARGUMENTS` to its end (killed after `timeout` seconds); returns its standard output and status.
    func runFramebus(_ arguments: [String], timeout: Double = 120) async throws -> (output: [UInt8], status: Int32) {
        let child = try await ChildProcess(try TestLocations.executable("framebus"), arguments, captureStandardError: false)
        let status = try await child.exitStatus(within: timeout)
        return (child.outputBytes, status)
    }

    @Test func aPublishersReasonIsPrintedWithItsControlCharactersEscaped() async throws {
        let path = temporaryBusPath("cli-escape")
        let peer = try await startPeer(["hostile-publisher", path, "error-reason"])
        try #require(await eventually { peer.output.contains("listening") })
        let (output, status) = try await runFramebus(["subscribe", "--path", path, "--duration", "30"])
        let text = String(decoding: output, as: UTF8.self)
        #expect(text.contains("stream ended"), "\(text)")
        #expect(text.contains("slow\\u{1B}]0;pwned\\u{07}"), "\(text)")
        // No escape, bell or carriage return reached the terminal.
        #expect(!output.contains(0x1B))
        #expect(!output.contains(0x07))
        #expect(!output.contains(0x0D))
        #expect(status != 0)
    }
}
