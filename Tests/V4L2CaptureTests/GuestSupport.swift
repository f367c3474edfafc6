import Foundation
import FrameBus
import Glibc
import TestSupport
import Testing

/// The capture device the guest suite uses: $FRAMEBUS_V4L2_DEVICE, or /dev/video0 (vivid's first node after
/// `modprobe vivid` in the guest kernel; see scripts/guest-run).
let captureDevicePath = ProcessInfo.processInfo.environment["FRAMEBUS_V4L2_DEVICE"] ?? "/dev/video0"
let hasCaptureDevice = access(captureDevicePath, R_OK | W_OK) == 0
/// With FRAMEBUS_REQUIRE_ALL=1 the device tests run even without the device, and fail naming it.
let requireAll = ProcessInfo.processInfo.environment["FRAMEBUS_REQUIRE_ALL"] == "1"
let runsDeviceTests = hasCaptureDevice || requireAll
let noDeviceReason: Comment = "needs \(captureDevicePath) (vivid in a guest kernel: scripts/guest-run); absent here"

/// Fails (under FRAMEBUS_REQUIRE_ALL=1) when the device is missing.
func requireCaptureDevice() throws {
    try #require(hasCaptureDevice, "needs \(captureDevicePath): run this suite in the guest kernel (scripts/guest-run)")
}

/// An executable built next to the test bundle (the build products directory).
func builtExecutable(_ name: String) throws -> URL {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
        Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent(),
    ]
    for directory in candidates {
        let url = directory.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    throw GuestTestError("\(name) not found next to \(CommandLine.arguments[0]); run `swift build` first")
}

struct GuestTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A socket path on a local file system (in the guest, /tmp is tmpfs: `bind` on the 9p share fails).
func temporarySocketPath(_ tag: String) -> String {
    "/tmp/fbv4l2-\(tag)-\(UUID().uuidString.prefix(8)).sock"
}

/// A child process (FrameBusTestPeer or framebus) whose output goes to a file, so it can never block on a pipe.
final class ChildProcess: @unchecked Sendable {
    // @unchecked: `process` is only started here and then read (isRunning, status), which Foundation allows.
    let process = Process()
    let outputURL: URL

    init(_ executable: String, _ arguments: [String]) throws {
        outputURL = FileManager.default.temporaryDirectory.appendingPathComponent("fbv4l2-\(UUID().uuidString).out")
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        let handle = try FileHandle(forWritingTo: outputURL)
        process.executableURL =
            executable.hasPrefix("/") ? URL(fileURLWithPath: executable) : try builtExecutable(executable)
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        try? handle.close()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(at: outputURL)
    }

    var processID: Int32 { process.processIdentifier }
    var output: String { (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "" }

    /// The child's state letter and raw wait status from /proc/PID/stat (fields 3 and 52, the latter valid for a
    /// zombie); nil once it has been reaped.
    private var procStat: (state: Character, waitStatus: Int32?)? {
        guard let text = try? String(contentsOfFile: "/proc/\(processID)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard let state = fields.first?.first else { return nil }
        // fields[0] is field 3 (state), so field 52 (exit_code) is fields[49].
        return (state, fields.count > 49 ? Int32(fields[49].trimmingCharacters(in: .whitespacesAndNewlines)) : nil)
    }

    /// Whether the child has exited: Foundation says so, or the kernel shows it as a zombie or gone. (Foundation
    /// learns of an exit through a loopback socket pair; in a guest without loopback it reported exited children as
    /// running for minutes, so the kernel's view is checked too.)
    var hasExited: Bool {
        if !process.isRunning { return true }
        guard let stat = procStat else { return true }
        return stat.state == "Z" || stat.state == "X"
    }

    /// The exit status once exited (nil while running, or if killed by a signal).
    var exitStatus: Int32? {
        if !process.isRunning {
            return process.terminationReason == .exit ? process.terminationStatus : nil
        }
        guard let stat = procStat, stat.state == "Z", let raw = stat.waitStatus, raw & 0x7f == 0 else { return nil }
        return (raw >> 8) & 0xff
    }

    /// Waits (asynchronously) for the child to exit; kills it after `timeout`. Returns whether it exited by itself.
    func exit(within timeout: Duration) async -> Bool {
        let exited = await eventually(timeout: Double(timeout.components.seconds)) { hasExited }
        if !exited {
            kill(process.processIdentifier, SIGKILL)
            await eventually(timeout: 10) { hasExited }
        }
        return exited
    }

    /// Lines starting with `prefix`, parsed as `key=value` fields.
    func records(_ prefix: String) -> [[String: String]] {
        output.split(separator: "\n").filter { $0.hasPrefix(prefix + " ") }.map { line in
            var fields: [String: String] = [:]
            for part in line.split(separator: " ").dropFirst() {
                let pair = part.split(separator: "=", maxSplits: 1)
                if pair.count == 2 { fields[String(pair[0])] = String(pair[1]) }
            }
            return fields
        }
    }
}

/// v4l2-ctl (Debian: v4l-utils), to drive vivid's controls as a user would.
let v4l2ctlPath: String? = ["/usr/bin/v4l2-ctl", "/bin/v4l2-ctl"].first { (path: String) in access(path, X_OK) == 0 }

/// Runs `v4l2-ctl -d DEVICE ARGUMENTS...` and returns its exit status.
func v4l2ctl(_ arguments: [String]) async throws -> Int32? {
    let path = try #require(v4l2ctlPath, "needs v4l2-ctl (apt-get install v4l-utils)")
    let child = try ChildProcess(path, ["-d", captureDevicePath] + arguments)
    _ = await child.exit(within: .seconds(60))
    return child.exitStatus
}
