import Foundation
import Glibc
import Testing

@testable @_spi(Testing) import FrameBus

/// The `framebus` executable, built next to the test bundle.
func framebusExecutable() throws -> URL {
    let peer = try busPeerExecutable()
    let url = peer.deletingLastPathComponent().appendingPathComponent("framebus")
    guard FileManager.default.isExecutableFile(atPath: url.path) else {
        throw BusTestError("framebus not found next to \(peer.path); run `swift build` first")
    }
    return url
}

/// `framebus` started as a child process, its output in a file.
final class CommandProcess {
    let process = Process()
    let outputURL: URL

    init(_ arguments: [String], environment: [String: String]? = nil) throws {
        outputURL = FileManager.default.temporaryDirectory.appendingPathComponent("fbcmd-\(UUID().uuidString).out")
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        let handle = try FileHandle(forWritingTo: outputURL)
        process.executableURL = try framebusExecutable()
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        try? handle.close()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: outputURL)
    }

    var output: String { (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "" }
}

@Suite struct PublishCommandTests {
    @Test(arguments: [SIGINT, SIGTERM])
    func aStopSignalSendsEndOfStreamAndRemovesTheSocket(_ signal: Int32) throws {
        let path = temporaryBusPath("cli")
        let command = try CommandProcess([
            "publish", "--path", path, "--size", "64x48", "--fps", "50", "--quiet",
        ])
        try #require(waitUntil { FileManager.default.fileExists(atPath: path) }, "\(command.output)")
        let raw = try RawPeer(connectingTo: path)
        try #require(raw.handshake() != nil)
        // Some frames flow, then the signal.
        var frames = 0
        while frames < 3, let message = raw.next(timeout: 20) {
            if case .frame(let frame) = message {
                frames += 1
                raw.send(
                    WireMessage.release(WireRelease(sequence: frame.sequence, surfaceID: frame.surfaceID, flags: 0))
                        .encoded()
                )
            }
        }
        kill(command.process.processIdentifier, signal)
        var ended = false
        while let message = raw.next(timeout: 20) {
            if case .endOfStream = message {
                ended = true
                break
            }
        }
        #expect(ended, "no END_OF_STREAM: \(command.output)")
        command.process.waitUntilExit()
        #expect(command.process.terminationStatus == 0)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func fpsZeroPublishesUnpaced() throws {
        let path = temporaryBusPath("unpaced")
        let command = try CommandProcess([
            "publish", "--path", path, "--size", "64x48", "--fps", "0", "--duration", "2",
        ])
        command.process.waitUntilExit()
        #expect(command.process.terminationStatus == 0, "\(command.output)")
        #expect(command.output.contains("unpaced"))
        // Without subscribers and unpaced, two seconds publish far more than the old 0.1 fps clamp allowed (one).
        let published = command.output.split(separator: "\n").compactMap { line -> Int? in
            guard let range = line.range(of: "published ") else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        #expect((published.max() ?? 0) > 10, "\(command.output)")
    }

    @Test func theDefaultPathIsInTheRuntimeDirectory() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "fbxdg-\(UUID().uuidString.prefix(8))"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = directory.path
        let command = try CommandProcess(
            ["publish", "--size", "64x48", "--fps", "10", "--quiet"],
            environment: environment
        )
        let path = directory.appendingPathComponent("framebus.sock").path
        #expect(waitUntil { FileManager.default.fileExists(atPath: path) }, "\(command.output)")
        kill(command.process.processIdentifier, SIGTERM)
        command.process.waitUntilExit()
        #expect(!FileManager.default.fileExists(atPath: path))

        // Without XDG_RUNTIME_DIR: the private fallback ${TMPDIR:-/tmp}/framebus-UID (SocketPathFallbackTests).
        environment["XDG_RUNTIME_DIR"] = nil
        environment["TMPDIR"] = directory.path
        let fallback = try CommandProcess(
            ["publish", "--size", "64x48", "--fps", "10", "--quiet"],
            environment: environment
        )
        let fallbackPath = directory.appendingPathComponent("framebus-\(getuid())/framebus.sock").path
        #expect(waitUntil { FileManager.default.fileExists(atPath: fallbackPath) }, "\(fallback.output)")
        kill(fallback.process.processIdentifier, SIGTERM)
        #expect(waitUntil { !fallback.process.isRunning }, "\(fallback.output)")
        if fallback.process.isRunning { kill(fallback.process.processIdentifier, SIGKILL) }
        fallback.process.waitUntilExit()
    }

    @Test func socketModeAndAllowedUIDsAreApplied() throws {
        let path = temporaryBusPath("mode")
        let command = try CommandProcess([
            "publish", "--path", path, "--size", "64x48", "--fps", "10", "--quiet", "--socket-mode", "660",
            "--allow-uid", "4242",
        ])
        try #require(waitUntil { FileManager.default.fileExists(atPath: path) }, "\(command.output)")
        // The file appears at bind(2) with the umask's mode and gets --socket-mode from the chmod right after, so
        // wait for the chmod rather than reading the mode in between.
        func mode() -> UInt16? {
            ((try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? NSNumber)?.uint16Value
        }
        #expect(waitUntil { mode() == 0o660 }, "mode \(String(mode() ?? 0, radix: 8))")
        kill(command.process.processIdentifier, SIGINT)
        command.process.waitUntilExit()
    }
}
