// swift-tools-version: 6.2
// The bus's libFuzzer targets in one binary, so that FrameBus is built once under the sanitizers (a release build of
// it and its dependencies costs about a minute on two cores; the rings' fuzzer, their race harness, both seed makers
// and the subscriber's fuzzer used to build it five times). FuzzBus.swift says how a run picks its target.
// Built by build.sh; run by Fuzz/Rings/run.sh, Fuzz/Rings/race.sh and Fuzz/Subscriber/run.sh.
import PackageDescription

let package = Package(
    name: "FuzzBus",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "framebus", path: "../..")],
    targets: [
        .executableTarget(
            name: "FuzzBus",
            dependencies: [.product(name: "FrameBusTesting", package: "framebus")],
            // libFuzzer provides main().
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        )
    ]
)
