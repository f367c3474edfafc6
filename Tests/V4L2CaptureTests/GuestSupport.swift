import Foundation
import FrameBus
import Glibc
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

/// Waits without blocking a thread of the cooperative pool: checks `condition` every 20 ms for at most `timeout`.
@discardableResult
func eventually(timeout: Duration = .seconds(60), _ condition: () -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while clock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
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
        process.executableURL = try builtExecutable(executable)
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

    /// Waits (asynchronously) for the child to exit; kills it after `timeout`. Returns whether it exited by itself.
    func exit(within timeout: Duration) async -> Bool {
        let exited = await eventually(timeout: timeout) { !process.isRunning }
        if !exited {
            kill(process.processIdentifier, SIGKILL)
            await eventually(timeout: .seconds(10)) { !process.isRunning }
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

/// FNV-1a 64 of a buffer's image bytes without row padding (what FrameBusTestPeer's subscriber prints).
func imageHash(_ buffer: PixelBuffer) throws -> UInt64 {
    try buffer.lock(.readOnly)
    defer { try? buffer.unlock(.readOnly) }
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for index in 0..<buffer.planeCount {
        let plane = buffer.planeLayout(index)
        let rowBytes = plane.width * plane.bytesPerElement
        try buffer.withUnsafeBytes(ofPlane: index) { bytes in
            for row in 0..<plane.height {
                let start = row * plane.bytesPerRow
                for byte in bytes[start..<start + rowBytes] {
                    hash ^= UInt64(byte)
                    hash = hash &* 0x100_0000_01b3
                }
            }
        }
    }
    return hash
}

