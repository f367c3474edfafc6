import Foundation
import Synchronization
import Testing
import TestSupport

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
    static var packageRoot: URL { TestLocations.packageRoot }

    static var includeDirectory: URL { packageRoot.appendingPathComponent("include") }

    static func source(_ name: String) -> URL {
        packageRoot.appendingPathComponent("Tests/CABI/\(name).c")
    }

    /// The directory holding libFrameBusC.so: the test bundle's.
    static func productsDirectory() throws -> URL {
        let directory = try TestLocations.productsDirectory()
        guard FileManager.default.fileExists(atPath: directory.appendingPathComponent("libFrameBusC.so").path) else {
            throw CABITestError("libFrameBusC.so not found in \(directory.path)")
        }
        return directory
    }

    /// A C compiler: `$CC`, else `cc`, `gcc` or `clang` on the PATH (the Swift toolchain ships clang).
    static func compiler() throws -> URL {
        var names = ["cc", "gcc", "clang"]
        if let chosen = ProcessInfo.processInfo.environment["CC"], !chosen.isEmpty { names.insert(chosen, at: 0) }
        for name in names {
            if let found = TestLocations.onPath(name) { return found }
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

    /// Programs compiled or being compiled in this test process: each is compiled once, however many tests run it.
    private static let compiled = Mutex<[String: Task<CProgram, any Error>]>([:])

    /// Tests/CABI/`name`.c compiled with every warning an error, into the build products directory
    /// (`CABIPrograms/`), once per test process.
    static func build(_ name: String) async throws -> CProgram {
        let compilation = compiled.withLock { cache in
            if let compilation = cache[name] { return compilation }
            let compilation = Task { try await compile(name) }
            cache[name] = compilation
            return compilation
        }
        return try await compilation.value
    }

    private static func compile(_ name: String) async throws -> CProgram {
        let products = try CABILocations.productsDirectory()
        // Beside the library; in a temporary directory where that is read-only (the guest of scripts/guest-run
        // sees the host's file system read-only).
        var directory = products.appendingPathComponent("CABIPrograms")
        if access(products.path, W_OK) != 0 {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("CABIPrograms")
        }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let output = directory.appendingPathComponent(name)
        let arguments = [
            "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-O1", "-I",
            CABILocations.includeDirectory.path, CABILocations.source(name).path, "-o", output.path, "-L",
            products.path, "-lFrameBusC", "-Wl,-rpath,\(products.path)", "-lpthread",
        ]
        let (status, log) = try await runToEnd(try CABILocations.compiler(), arguments, timeout: 300)
        guard status == 0 else { throw CABITestError("compiling \(name).c failed (\(status)):\n\(log)") }
        return CProgram(executable: output)
    }

    /// Starts the program; its standard output and error go to a file in `directory`.
    func start(_ arguments: [String], in directory: ScratchDirectory) async throws -> ChildProcess {
        try await ChildProcess(executable, arguments, outputDirectory: directory.url)
    }
}
