import Foundation
import Testing

/// `framebus subscribe` as a user runs it, against a publisher process.
@Suite struct SubscribeCommandTests {
    /// The framebus executable, built next to the test bundle.
    func framebusExecutable() throws -> URL {
        let peer = try busPeerExecutable()
        let url = peer.deletingLastPathComponent().appendingPathComponent("framebus")
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw BusTestError("framebus not found next to \(peer.path); run `swift build` first")
        }
        return url
    }

    /// Runs `framebus ARGUMENTS` to its end (killed after `timeout` seconds); returns its standard output and status.
    func runFramebus(_ arguments: [String], timeout: Double = 60) throws -> (output: [UInt8], status: Int32) {
        let outputURL = FileManager.default.temporaryDirectory.appendingPathComponent("fbcli-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: outputURL) }
        let handle = try FileHandle(forWritingTo: outputURL)
        let process = Process()
        process.executableURL = try framebusExecutable()
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = FileHandle.nullDevice
        try process.run()
        try? handle.close()
        if !waitUntil(timeout: timeout, { !process.isRunning }) { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return (Array(try Data(contentsOf: outputURL)), process.terminationStatus)
    }

    @Test func aPublishersReasonIsPrintedWithItsControlCharactersEscaped() throws {
        let path = temporaryBusPath("cli-escape")
        let peer = try PeerProcess(["hostile-publisher", path, "error-reason"])
        try #require(waitUntil { peer.output.contains("listening") })
        let (output, status) = try runFramebus(["subscribe", "--path", path, "--duration", "30"])
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
