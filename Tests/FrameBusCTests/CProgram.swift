import Foundation
import Synchronization
import Testing

/// Errors of the harness itself (no compiler, no library, a program that hung).
struct CABITestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Where things are: the package root (for include/ and Tests/CABI/) and the build products directory, which holds
/// libFrameBusC.so.
///
/// `swift test` builds every product of the package before it runs a test, the dynamic library product included, and
/// puts it beside the test bundle; so the C programs link the very library that plain `swift test` just built, with
/// no nested `swift build` (which would wait forever on the build lock `swift test` holds).
enum CABILocations {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static var includeDirectory: URL { packageRoot.appendingPathComponent("include") }

    static func source(_ name: String) -> URL {
        packageRoot.appendingPathComponent("Tests/CABI/\(name).c")
    }

    /// The directory holding libFrameBusC.so: the test bundle's.
    static func productsDirectory() throws -> URL {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent(),
        ]
        for directory in candidates
        where FileManager.default.fileExists(atPath: directory.appendingPathComponent("libFrameBusC.so").path) {
            return directory
        }
        throw CABITestError("libFrameBusC.so not found next to \(CommandLine.arguments[0])")
    }

    /// A C compiler: `$CC`, else `cc`, `gcc` or `clang` on the PATH (the Swift toolchain ships clang).
    static func compiler() throws -> URL {
        var names = ["cc", "gcc", "clang"]
        if let chosen = ProcessInfo.processInfo.environment["CC"], !chosen.isEmpty { names.insert(chosen, at: 0) }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for name in names {
            if name.hasPrefix("/") {
                if FileManager.default.isExecutableFile(atPath: name) { return URL(fileURLWithPath: name) }
                continue
            }
            for directory in path.split(separator: ":") {
                let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent(name)
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            }
        }
        throw CABITestError("no C compiler (cc, gcc or clang) on the PATH; set CC")
    }
}

/// A private scratch directory with a short path (socket paths must fit in 108 bytes), removed at the end.
final class ScratchDirectory {
    let url: URL

    init() throws {
        url = URL(fileURLWithPath: "/tmp/fbc-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
}

/// A C test program compiled with `cc` against include/framebus.h and the built libFrameBusC.so.
struct CProgram: Sendable {
    let executable: URL

    /// Programs compiled so far in this test process: each is compiled once, however many tests run it.
    private static let compiled = Mutex<[String: Result<CProgram, CABITestError>]>([:])

    /// Tests/CABI/`name`.c compiled with every warning an error, into the build products directory
    /// (`CABIPrograms/`), once per test process.
    static func build(_ name: String) throws -> CProgram {
        // Compiling under the lock serialises the few compilations, which also keeps them off a loaded machine's
        // other tests.
        try compiled.withLock { cache in
            if let result = cache[name] { return try result.get() }
            let result = Result { () throws(CABITestError) -> CProgram in try compile(name) }
            cache[name] = result
            return try result.get()
        }
    }

    private static func compile(_ name: String) throws(CABITestError) -> CProgram {
        do {
            let products = try CABILocations.productsDirectory()
            // Beside the library; in a temporary directory where that is read-only (the guest of scripts/guest-run
            // sees the host's file system read-only).
            var directory = products.appendingPathComponent("CABIPrograms")
            if access(products.path, W_OK) != 0 {
                directory = FileManager.default.temporaryDirectory.appendingPathComponent("CABIPrograms")
            }
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let output = directory.appendingPathComponent(name)
            let log = directory.appendingPathComponent(name + ".log")
            let arguments = [
                "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-O1", "-I",
                CABILocations.includeDirectory.path, CABILocations.source(name).path, "-o", output.path, "-L",
                products.path, "-lFrameBusC", "-Wl,-rpath,\(products.path)", "-lpthread",
            ]
            let run = try ProgramRun(try CABILocations.compiler(), arguments, outputURL: log)
            let status = run.wait(timeout: 120)
            guard status == 0 else {
                throw CABITestError("compiling \(name).c failed (\(status)):\n\(run.output)")
            }
            return CProgram(executable: output)
        } catch let error as CABITestError {
            throw error
        } catch {
            throw CABITestError("compiling \(name).c: \(error)")
        }
    }

    func start(_ arguments: [String], in directory: ScratchDirectory) throws -> ProgramRun {
        try ProgramRun(executable, arguments, directory: directory)
    }
}

/// A running process whose standard output and error go to a file (a chatty process never blocks on a pipe).
final class ProgramRun {
    let process = Process()
    let outputURL: URL

    convenience init(_ executable: URL, _ arguments: [String], directory: ScratchDirectory) throws {
        try self.init(
            executable,
            arguments,
            outputURL: directory.url.appendingPathComponent("out-\(UUID().uuidString.prefix(8))")
        )
    }

    init(_ executable: URL, _ arguments: [String], outputURL: URL) throws {
        self.outputURL = outputURL
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        let handle = try FileHandle(forWritingTo: outputURL)
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        try? handle.close()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    var output: String { (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "" }

    /// Waits for the exit (killing the process after `timeout` seconds) and returns its status; -1 if killed.
    func wait(timeout: Double) -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return -1
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Lines starting with `prefix`, parsed as `key=value` fields.
    func records(_ prefix: String) -> [[String: String]] {
        output.split(separator: "\n").filter { $0.hasPrefix(prefix + " ") || $0 == prefix }.map { line in
            var fields: [String: String] = [:]
            for part in line.split(separator: " ").dropFirst() {
                let pair = part.split(separator: "=", maxSplits: 1)
                if pair.count == 2 { fields[String(pair[0])] = String(pair[1]) }
            }
            return fields
        }
    }

    /// Polls until the output contains `text` or `timeout` seconds pass.
    func waitForOutput(_ text: String, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if output.contains(text) { return true }
            if !process.isRunning { return output.contains(text) }
            usleep(10_000)
        }
        return false
    }
}
