// swift-tools-version: 6.2
// The bus's libFuzzer targets in one binary, so that FrameBus is built once under the sanitizers (a release build of
// it and its dependencies costs about a minute on two cores; the rings' fuzzer, their race harness, both seed makers
// and the subscriber's fuzzer used to build it five times). FuzzBus.swift says how a run picks its target.
// Built by build.sh; run by Fuzz/Rings/run.sh, Fuzz/Rings/race.sh and Fuzz/Subscriber/run.sh.
//
// FrameBusTesting (the fuzz bodies and hostile peers) is not a product of framebus: it is not installed and not API.
// Its sources are compiled here from the main package's Sources/FrameBusTesting (a symlink) as the module
// FuzzBusTesting (target names are unique across a package graph), a module of the main package
// (`-package-name`): that is how it reaches FrameBus's `package` declarations from outside SwiftPM's package boundary.
import Foundation
import PackageDescription

/// The `-package-name` SwiftPM compiles the main package's modules with: its identity (the name of its directory,
/// lowercased) made a C identifier, every character other than an ASCII letter, digit or `_` replaced by `_`, and a
/// leading digit prefixed with `_` (a checkout in /src/framebus is `framebus`, a clone in /tmp/ci-clone2 `ci_clone2`).
let mainPackageName: String = {
    let identity = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().lastPathComponent.lowercased()
    let mangled = String(identity.map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") ? $0 : "_" })
    return mangled.first?.isNumber == true ? "_" + mangled : mangled
}()

let package = Package(
    name: "FuzzBus",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "framebus", path: "../.."),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-atomics", from: "1.3.0"),
    ],
    targets: [
        .target(
            name: "FuzzBusTesting",
            dependencies: [
                .product(name: "FrameBus", package: "framebus"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Atomics", package: "swift-atomics"),
            ],
            path: "Sources/FrameBusTesting",
            // SwiftPM would name this package; the flag below names the main package instead.
            packageAccess: false,
            swiftSettings: [.strictMemorySafety(), .unsafeFlags(["-package-name", mainPackageName])]
        ),
        .executableTarget(
            name: "FuzzBus",
            dependencies: ["FuzzBusTesting"],
            // libFuzzer provides main().
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        ),
    ]
)
