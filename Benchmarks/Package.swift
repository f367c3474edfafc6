// swift-tools-version: 6.1
// The benchmarks live in their own package (swift-nio's layout), so package-benchmark and its plugins do not
// slow down every build of the library. Run from this folder: `swift package benchmark`.
import PackageDescription

let package = Package(
    name: "FrameBusBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "framebus", path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
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
                .product(name: "FrameBusTesting", package: "framebus"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Bus",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
