import Foundation
import TestSupport
import Testing

/// docs/C-ABI.md's "Use" example as a new user runs it: `luma.c` taken from the document, compiled with every
/// warning an error and an rpath, and `framebus publish --name camera` beside it, with `XDG_RUNTIME_DIR` unset (the
/// container, CI and ssh case), so both must find the private fallback directory's `camera.sock`.
@Suite(.serialized, .timeLimit(.minutes(5))) struct CABIDocumentExampleTests {
    /// The C code block that follows "`luma.c`" in docs/C-ABI.md.
    static func lumaSource() throws -> String {
        let document = try String(
            contentsOf: CABILocations.packageRoot.appendingPathComponent("docs/C-ABI.md"),
            encoding: .utf8
        )
        guard let introduction = document.range(of: "`luma.c`"),
            let start = document.range(of: "```c\n", range: introduction.upperBound..<document.endIndex),
            let end = document.range(of: "\n```", range: start.upperBound..<document.endIndex)
        else { throw CABITestError("no luma.c block in docs/C-ABI.md") }
        return String(document[start.upperBound..<end.lowerBound]) + "\n"
    }

    /// The environment of a shell without `XDG_RUNTIME_DIR`, its temporary directory the scratch directory.
    static func environment(_ scratch: ScratchDirectory) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = nil
        environment["TMPDIR"] = scratch.url.path
        return environment
    }

    @Test func theLumaExampleWorksAsWrittenWithoutARuntimeDirectory() async throws {
        let scratch = try ScratchDirectory()
        let source = scratch.path("luma.c")
        try Self.lumaSource().write(toFile: source, atomically: true, encoding: .utf8)
        let products = try CABILocations.productsDirectory()
        let luma = scratch.path("luma")
        let (compiled, log) = try await runToEnd(
            try CABILocations.compiler(),
            [
                "-std=c11", "-Wall", "-Wextra", "-Werror", source, "-I", CABILocations.includeDirectory.path, "-L",
                products.path, "-lFrameBusC", "-Wl,-rpath,\(products.path)", "-o", luma,
            ],
            timeout: 300
        )
        #expect(compiled == 0, "\(log)")
        let environment = Self.environment(scratch)
        let publisher = try await startFramebus(
            ["publish", "--name", "camera", "--size", "64x48", "--fps", "30", "--duration", "3", "--quiet"],
            environment: environment
        )
        let socket = "\(scratch.url.path)/framebus-\(getuid())/camera.sock"
        #expect(await eventually { FileManager.default.fileExists(atPath: socket) }, "\(publisher.output)")
        let (status, output) = try await runToEnd(URL(fileURLWithPath: luma), [], environment: environment, timeout: 120)
        #expect(status == 0, "\(output)")
        #expect(output.contains("mean luma"), "\(output)")
        #expect(output.contains("stream ended (FB_ERROR_END_OF_STREAM)"), "\(output)")
        #expect(try await publisher.exitStatus(within: 120) == 0, "\(publisher.output)")
    }

    @Test func lumaSaysWhyItEndsWhenNoPublisherIsThere() async throws {
        let scratch = try ScratchDirectory()
        let source = scratch.path("luma.c")
        try Self.lumaSource().write(toFile: source, atomically: true, encoding: .utf8)
        let products = try CABILocations.productsDirectory()
        let luma = scratch.path("luma")
        let (compiled, log) = try await runToEnd(
            try CABILocations.compiler(),
            [
                "-std=c11", source, "-I", CABILocations.includeDirectory.path, "-L", products.path, "-lFrameBusC",
                "-Wl,-rpath,\(products.path)", "-o", luma,
            ],
            timeout: 300
        )
        #expect(compiled == 0, "\(log)")
        let (status, output) = try await runToEnd(
            URL(fileURLWithPath: luma),
            [],
            environment: Self.environment(scratch),
            timeout: 120
        )
        #expect(status == 1, "\(output)")
        #expect(output.contains("stream ended (FB_ERROR_TIMED_OUT)"), "\(output)")
    }

    @Test func aPublisherRefusesASocketDirectlyInTheRootDirectory() async throws {
        let scratch = try ScratchDirectory()
        // What `--path "$XDG_RUNTIME_DIR/camera.sock"` becomes when the variable is unset.
        let name = "fbdoc-\(UUID().uuidString.prefix(8)).sock"
        let (status, output) = try await runToEnd(
            try TestLocations.executable("framebus"),
            ["publish", "--path", "/\(name)", "--size", "64x48", "--duration", "1"],
            environment: Self.environment(scratch),
            timeout: 120
        )
        #expect(status != 0, "\(output)")
        #expect(output.contains("--name"), "\(output)")
        #expect(!FileManager.default.fileExists(atPath: "/\(name)"))
    }
}
