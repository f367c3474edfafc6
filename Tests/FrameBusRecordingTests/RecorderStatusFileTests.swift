import Foundation
import FrameBus
import FrameBusRecording
import Glibc
import TestSupport
import Testing

/// The recorder's status file, which `framebus top` reads: shown by top beside the recorder's subscriber row, gone
/// when the recording ends, and read as hostile input.
@Suite(.serialized, .timeLimit(.minutes(3))) struct RecorderStatusFileTests {
    @Test func topShowsTheRecordersRemainingCapacityAndBacklog() async throws {
        let path = temporarySocketPath("rec-top")
        let file = temporaryFileURL("rec-top.mkv")
        defer { try? FileManager.default.removeItem(at: file) }
        let publisher = try await startFramebus([
            "publish", "--path", path, "--size", "320x240", "--fps", "30", "--duration", "60",
            "--wait-for-subscriber", "--quiet",
        ])
        defer { publisher.send(SIGTERM) }
        let recorder = try await startFramebus([
            "record", "--path", path, "--output", file.path, "--json", "--backlog-mb", "8", "--connect-timeout", "60",
        ])
        // The recorder's first status line: it is connected and writing (its status file exists from its start).
        #expect(await recorder.waitForOutput("\"seconds\"", timeout: 60), "\(recorder.output)")
        let top = try await startFramebus(["top", path, "--iterations", "2", "--no-clear"])
        #expect(try await top.exitStatus(within: 120) == 0, "\(top.output)")
        let lines = top.output.split(separator: "\n").filter { $0.hasPrefix("recorder ") && $0.contains(" → ") }
        #expect(lines.count == 2, "\(top.output)")
        let line = String(lines.last ?? "")
        #expect(line.contains("→ \(file.standardizedFileURL.path)"), "\(line)")
        // The backlog's size is the one asked for (8 MiB = 8.4 MB), and the space left is the file system's.
        #expect(line.contains("/8 MB"), "\(line)")
        let remaining = line.components(separatedBy: "remaining ").dropFirst().first?.split(separator: " ").first
        let gigabytes = try #require(remaining.flatMap { Double($0) }, "\(line)")
        var info = statvfs()
        #expect(statvfs(file.deletingLastPathComponent().path, &info) == 0)
        let free = Double(info.f_bavail) * Double(info.f_frsize) / 1e9
        #expect(gigabytes > 0 && abs(gigabytes - free) < max(1, free * 0.1), "top says \(gigabytes) GB, df \(free)")
        #expect(line.contains("O_DIRECT") || line.contains("buffered"))

        // When the recording ends its status file goes.
        recorder.send(SIGINT)
        #expect(try await recorder.exitStatus(within: 60) == 0, "\(recorder.output)")
        let directory = try SocketPath.runtimeDirectory()
        let left = RecorderStatusFile.find(
            processID: recorder.processIdentifier,
            socketPath: URL(fileURLWithPath: path).standardizedFileURL.path,
            directory: directory,
            allowedUserIDs: [getuid()]
        )
        #expect(left.isEmpty)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        #expect(!names.contains { $0.hasPrefix(RecorderStatusFile.namePrefix(processID: recorder.processIdentifier)) })
    }

    @Test func aHostileStatusFileIsRefusedNeverTrusted() throws {
        let valid: [String: Any] = [
            "version": 1, "pid": 42, "socket": "/s", "output": "/o", "time": 1.5, "framesWritten": 3,
            "bytesWritten": 4096, "bytesPerSecond": 10.0, "remainingBytes": 1 << 30, "backlogBytes": 0,
            "backlogCapacity": 1 << 20, "backlogPeakBytes": 4096, "busy": ["syncing"], "drops": ["backlogFull": 2],
            "direct": true,
        ]
        func data(_ object: [String: Any]) throws -> Data { try JSONSerialization.data(withJSONObject: object) }
        let decoded = try #require(RecorderStatusFile.decode(try data(valid)))
        #expect(decoded.processID == 42 && decoded.remainingBytes == 1 << 30 && decoded.drops["backlogFull"] == 2)
        // Negative, huge, or mistyped fields; another version; too many bytes; not JSON.
        for (key, value) in [
            ("remainingBytes", -1 as Any), ("bytesWritten", 1e30 as Any), ("pid", 1 << 40 as Any),
            ("direct", "yes" as Any), ("version", 2 as Any), ("socket", String(repeating: "x", count: 5000) as Any),
        ] {
            var object = valid
            object[key] = value
            #expect(RecorderStatusFile.decode(try data(object)) == nil, "\(key)")
        }
        #expect(RecorderStatusFile.decode(Data(repeating: 0x20, count: RecorderStatusFile.maximumByteCount + 1)) == nil)
        #expect(RecorderStatusFile.decode(Data("{\"version\":1,".utf8)) == nil)

        // Read only as a regular file of an allowed owner, never through a symbolic link.
        let directory = temporaryFileURL("status-dir")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let real = directory.appendingPathComponent(RecorderStatusFile.namePrefix(processID: 42) + "1.json")
        try data(valid).write(to: real)
        #expect(RecorderStatusFile.read(path: real.path, allowedUserIDs: [getuid()]) == decoded)
        #expect(RecorderStatusFile.read(path: real.path, allowedUserIDs: [getuid() &+ 1]) == nil)
        let link = directory.appendingPathComponent(RecorderStatusFile.namePrefix(processID: 42) + "2.json")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: real)
        #expect(RecorderStatusFile.read(path: link.path, allowedUserIDs: [getuid()]) == nil)
        let found = RecorderStatusFile.find(
            processID: 42,
            socketPath: "/s",
            directory: directory.path,
            allowedUserIDs: [getuid()]
        )
        #expect(found == [decoded])
    }
}
