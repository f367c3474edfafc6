// swift-tools-version: 6.1
// The benchmarks live in their own package (swift-nio's layout), so package-benchmark and its plugins do not
// slow down every build of the library. Run from this folder: `swift package benchmark`.
import Foundation
import PackageDescription

/// The `-package-name` SwiftPM compiles the main package's modules with: its identity (the name of its directory,
/// lowercased) made a C identifier, every character other than an ASCII letter, digit or `_` replaced by `_`, and a
/// leading digit prefixed with `_` (a checkout in /src/framebus is `framebus`, a clone in /tmp/ci-clone2 `ci_clone2`).
let mainPackageName: String = {
    let identity = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent.lowercased()
    let mangled = String(identity.map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") ? $0 : "_" })
    return mangled.first?.isNumber == true ? "_" + mangled : mangled
}()

let package = Package(
    name: "FrameBusBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "framebus", path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-atomics", from: "1.3.0"),
    ],
    targets: [
        .executableTarget(
            name: "Codec",
            dependencies: [
                .product(name: "FrameBus", package: "framebus"),
                .product(name: "ImageSources", package: "framebus"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Codec",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "Bus",
            dependencies: [
                .product(name: "FrameBus", package: "framebus"),
                "BenchmarksTesting",
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Bus",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // FrameBusTesting (the wire codec's probe) is not a product of framebus: not installed, not API. Its sources
        // are compiled here from ../Sources/FrameBusTesting (a symlink) as BenchmarksTesting (target names are unique in a
        // package graph), a module of package `framebus` (`-package-name`): that is how it reaches FrameBus's `package`
        // declarations (as Fuzz/Bus does).
        .target(
            name: "BenchmarksTesting",
            dependencies: [
                .product(name: "FrameBus", package: "framebus"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Atomics", package: "swift-atomics"),
            ],
            path: "FrameBusTesting",
            // SwiftPM would name this package; the flag below names the main package instead.
            packageAccess: false,
            swiftSettings: [.unsafeFlags(["-package-name", mainPackageName])]
        ),
    ]
)
