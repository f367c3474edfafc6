// swift-tools-version: 6.2
// Protocol version 3's rings (docs/PROTOCOL.md §9) under the sanitizers: a libFuzzer target over ring contents
// (FuzzRings) and a concurrent-writer harness (RaceRings), both through FrameBus's `RingFuzzing` entry points, with
// real ring files mapped as the publisher and the subscriber map them. Built and run by run.sh and race.sh.
import PackageDescription

let package = Package(
    name: "FuzzRings",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "framebus", path: "../..")],
    targets: [
        .executableTarget(
            name: "FuzzRings",
            dependencies: [.product(name: "FrameBus", package: "framebus")],
            // libFuzzer provides main().
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        ),
        .executableTarget(name: "RaceRings", dependencies: [.product(name: "FrameBus", package: "framebus")]),
        .executableTarget(name: "MakeRingSeeds", dependencies: [.product(name: "FrameBus", package: "framebus")]),
    ]
)
