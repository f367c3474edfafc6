import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A child `framebus` process whose output is collected in files.
package final class Child {
    package let process = Process()
    private let output: URL
    private let errorOutput: URL

    package init(_ executable: URL, _ arguments: [String], environment: [String: String] = [:]) throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("framebus-\(UUID().uuidString)")
        output = base.appendingPathExtension("out")
        errorOutput = base.appendingPathExtension("err")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errorOutput.path, contents: nil)
        process.executableURL = executable
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = try FileHandle(forWritingTo: errorOutput)
        try process.run()
    }

    deinit {
        terminate()
        try? FileManager.default.removeItem(at: output)
        try? FileManager.default.removeItem(at: errorOutput)
    }

    package func terminate() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    package func waitForExit(timeout: Double) {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        terminate()
    }

    package var lines: [String] {
        ((try? String(contentsOf: output, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    package var errors: String { (try? String(contentsOf: errorOutput, encoding: .utf8)) ?? "" }

    /// The JSON summary line of a `subscribe --json` child.
    package var summary: [String: Any]? {
        for line in lines.reversed() {
            if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                object["summary"] as? Bool == true
            {
                return object
            }
        }
        return nil
    }

    /// This executable (`/proc/self/exe`), for starting peers of the same build.
    package static func ownExecutable() throws -> URL {
        let path = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        return URL(fileURLWithPath: path)
    }
}
