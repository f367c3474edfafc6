import Foundation
import ImageSources
import Testing

@testable @_spi(Testing) import FrameBus

/// The FrameBusTestPeer executable, built next to the test bundle (the build products directory).
func busPeerExecutable() throws -> URL {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
        Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent(),
    ]
    for directory in candidates {
        let url = directory.appendingPathComponent("FrameBusTestPeer")
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    throw BusTestError("FrameBusTestPeer not found next to \(CommandLine.arguments[0]); run `swift build` first")
}

struct BusTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Polls `condition` every 5 ms until it holds or `timeout` seconds pass.
@discardableResult
func waitUntil(timeout: Double = 20, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(5000)
    }
    return condition()
}

/// A peer process whose standard output goes to a file (so a chatty peer can never block on a full pipe).
final class PeerProcess {
    let process = Process()
    let outputURL: URL

    init(_ arguments: [String]) throws {
        outputURL = FileManager.default.temporaryDirectory.appendingPathComponent("fbpeer-\(UUID().uuidString).out")
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        let handle = try FileHandle(forWritingTo: outputURL)
        process.executableURL = try busPeerExecutable()
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = FileHandle.nullDevice
        try process.run()
        try? handle.close()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: outputURL)
    }

    var output: String { (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "" }

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

    /// Waits for the peer to exit; kills it after `timeout` seconds. Returns whether it exited by itself.
    @discardableResult
    func waitForExit(timeout: Double = 30) -> Bool {
        let exited = waitUntil(timeout: timeout) { !process.isRunning }
        if !exited { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return exited
    }

    func killHard() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

func temporaryBusPath(_ tag: String) -> String {
    "/tmp/fbbus-\(tag)-\(UUID().uuidString.prefix(8)).sock"
}

/// FNV-1a, 64-bit (the peer computes the same over the frames it receives).
func fnv1a(_ bytes: [UInt8]) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes {
        hash ^= UInt64(byte)
        hash = hash &* 0x100_0000_01b3
    }
    return hash
}

/// Fills `buffer` with frame `index` of the test pattern and returns the hash of its packed bytes.
func fillFrame(_ buffer: PixelBuffer, index: Int) throws -> UInt64 {
    try buffer.lock()
    defer { try? buffer.unlock() }
    try TestPattern.fill(buffer, frameIndex: index)
    // A per-frame stamp in the first bytes, so that identical pattern frames still differ.
    try buffer.withUnsafeMutableBytes(ofPlane: 0) { bytes in
        withUnsafeBytes(of: UInt64(index).littleEndian) { stamp in
            for offset in 0..<8 { bytes[offset] = stamp[offset] }
        }
    }
    return fnv1a(try buffer.packedBytes())
}
