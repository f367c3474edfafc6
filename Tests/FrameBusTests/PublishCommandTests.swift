import Foundation
import Glibc
import Testing
import TestSupport

@testable import FrameBus

@Suite(.timeLimit(.minutes(5))) struct PublishCommandTests {
    @Test(arguments: [SIGINT, SIGTERM])
    func aStopSignalSendsEndOfStreamAndRemovesTheSocket(_ signal: Int32) async throws {
        let path = temporaryBusPath("cli")
        let command = try await startFramebus([
            "publish", "--path", path, "--size", "64x48", "--fps", "50", "--quiet",
        ])
        try #require(await eventually { FileManager.default.fileExists(atPath: path) }, "\(command.output)")
        let raw = try RawPeer(connectingTo: path)
        try #require(await raw.handshake() != nil)
        // Some frames flow, then the signal.
        var frames = 0
        while frames < 3, let message = await raw.next(timeout: 20) {
            if case .frame(let frame) = message {
                frames += 1
                raw.send(
                    WireMessage.release(WireRelease(sequence: frame.sequence, surfaceID: frame.surfaceID, flags: 0))
                        .encoded()
                )
            }
        }
        command.send(signal)
        var ended = false
        while let message = await raw.next(timeout: 20) {
            if case .endOfStream = message {
                ended = true
                break
            }
        }
        #expect(ended, "no END_OF_STREAM: \(command.output)")
        let status = try await command.exitStatus(within: 300)
        #expect(status == 0)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func fpsZeroPublishesUnpaced() async throws {
        let path = temporaryBusPath("unpaced")
        let command = try await startFramebus([
            "publish", "--path", path, "--size", "64x48", "--fps", "0", "--duration", "2",
        ])
        let status = try await command.exitStatus(within: 300)
        #expect(status == 0, "\(command.output)")
        #expect(command.output.contains("unpaced"))
        // Without subscribers and unpaced, two seconds publish far more than the old 0.1 fps clamp allowed (one).
        let published = command.output.split(separator: "\n").compactMap { line -> Int? in
            guard let range = line.range(of: "published ") else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        #expect((published.max() ?? 0) > 10, "\(command.output)")
    }

    @Test func theDefaultPathIsInTheRuntimeDirectory() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "fbxdg-\(UUID().uuidString.prefix(8))"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = directory.path
        let command = try await startFramebus(
            ["publish", "--size", "64x48", "--fps", "10", "--quiet"],
            environment: environment
        )
        let path = directory.appendingPathComponent("framebus.sock").path
        #expect(await eventually { FileManager.default.fileExists(atPath: path) }, "\(command.output)")
        command.send(SIGTERM)
        #expect(try await command.exitStatus(within: 60) == 0, "\(command.output)")
        #expect(!FileManager.default.fileExists(atPath: path))

        // Without XDG_RUNTIME_DIR: the private fallback ${TMPDIR:-/tmp}/framebus-UID (SocketPathFallbackTests).
        environment["XDG_RUNTIME_DIR"] = nil
        environment["TMPDIR"] = directory.path
        let fallback = try await startFramebus(
            ["publish", "--size", "64x48", "--fps", "10", "--quiet"],
            environment: environment
        )
        let fallbackPath = directory.appendingPathComponent("framebus-\(getuid())/framebus.sock").path
        #expect(await eventually { FileManager.default.fileExists(atPath: fallbackPath) }, "\(fallback.output)")
        fallback.send(SIGTERM)
        #expect(try await fallback.exitStatus(within: 60) == 0, "\(fallback.output)")
    }

    @Test func socketModeAndAllowedUIDsAreApplied() async throws {
        let path = temporaryBusPath("mode")
        let command = try await startFramebus([
            "publish", "--path", path, "--size", "64x48", "--fps", "10", "--quiet", "--socket-mode", "660",
            "--allow-uid", "4242",
        ])
        try #require(await eventually { FileManager.default.fileExists(atPath: path) }, "\(command.output)")
        // The file appears at bind(2) with the umask's mode and gets --socket-mode from the chmod right after, so
        // wait for the chmod rather than reading the mode in between.
        func mode() -> UInt16? {
            ((try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? NSNumber)?.uint16Value
        }
        #expect(await eventually { mode() == 0o660 }, "mode \(String(mode() ?? 0, radix: 8))")
        command.send(SIGINT)
        #expect(try await command.exitStatus(within: 60) == 0, "\(command.output)")
    }
}
