// swift-tools-version: 6.2
// The subscriber's libFuzzer target: the wire decoder and the subscriber's state machine, event queue and outbox,
// driven by arbitrary datagram sequences (FrameBus's `SubscriberProtocolFuzzing`). Built and run by run.sh.
import PackageDescription

let package = Package(
    name: "FuzzSubscriber",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "framebus", path: "../..")],
    targets: [
        .executableTarget(
            name: "FuzzSubscriber",
            dependencies: [.product(name: "FrameBus", package: "framebus")],
            // libFuzzer provides main().
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        ),
        .executableTarget(
            name: "MakeSubscriberSeeds",
            dependencies: [.product(name: "FrameBus", package: "framebus")]
        ),
    ]
)
