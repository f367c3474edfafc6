// swift-tools-version: 6.2
import PackageDescription

/// Library targets check every unsafe expression (SE-0458): unsafe code lives in each module's `Internal/`.
let librarySettings: [SwiftSetting] = [.strictMemorySafety()]

let package = Package(
    name: "framebus",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "FrameBus", targets: ["FrameBus"]),
        // Image input for tests, demos and benchmarks (PNG via libpng, RGB conversion, test patterns); not part of
        // FrameBus, so a producer linking FrameBus needs only liblz4.
        .library(name: "ImageSources", targets: ["ImageSources"]),
        .executable(name: "framebus", targets: ["framebus"]),
        // The C ABI (include/framebus.h) as a shared library, libFrameBusC.so: SwiftPM's product names are unique and
        // `framebus` is the executable, so install it as libframebus.so (docs/C-ABI.md).
        .library(name: "FrameBusC", type: .dynamic, targets: ["FrameBusC"]),
        // A V4L2 camera as a producer (Linux); beside FrameBus, which does not depend on it.
        .library(name: "V4L2Capture", targets: ["V4L2Capture"]),
        // A recorder over FrameBus (a queue-mode subscriber writing Matroska with O_DIRECT) and its reader.
        .library(name: "FrameBusRecording", targets: ["FrameBusRecording"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-atomics", from: "1.3.0"),
        // Tests only: in-process SHA-256 for the conversion corpus's reference checksums.
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
    ],
    targets: [
        // Native libraries, found through pkg-config.
        .systemLibrary(name: "CLZ4", pkgConfig: "liblz4", providers: [.apt(["liblz4-dev"])]),
        .systemLibrary(name: "CPNG", pkgConfig: "libpng", providers: [.apt(["libpng-dev"])]),
        // zstd: the codec's screen-content mode (layout version 8, SurfaceCompression) and a reference codec for
        // `framebus bench codec`.
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),
        .target(name: "CFrameBusShims", cSettings: [.define("_GNU_SOURCE")]),
        // The codec's vector kernels: on x86-64 per-function target attributes (AVX2, SSE4.1) and a runtime CPU
        // check, no global -march; on arm64 NEON (baseline there).
        .target(name: "CSurfaceCodecKernels"),

        // The layers, bottom up; each imports only the layers below it.
        .target(
            name: "Surfaces",
            dependencies: ["CFrameBusShims", .product(name: "SystemPackage", package: "swift-system")],
            swiftSettings: librarySettings
        ),
        .target(
            name: "PixelBuffers",
            dependencies: ["Surfaces"],
            swiftSettings: librarySettings
        ),
        .target(
            name: "SurfaceCompression",
            dependencies: ["PixelBuffers", "Surfaces", "CLZ4", "CZstd", "CSurfaceCodecKernels"],
            swiftSettings: librarySettings
        ),
        .target(
            name: "SampleBuffers",
            dependencies: ["PixelBuffers", "Surfaces"],
            swiftSettings: librarySettings
        ),
        .target(
            name: "FrameBus",
            dependencies: [
                "Surfaces", "PixelBuffers", "SurfaceCompression", "SampleBuffers", "CFrameBusShims",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Atomics", package: "swift-atomics"),
            ],
            swiftSettings: librarySettings
        ),

        // Beside the stack, not in it: a V4L2 camera as a producer (its ioctls in CV4L2).
        .target(name: "CV4L2"),
        .target(
            name: "V4L2Capture",
            dependencies: ["FrameBus", "CFrameBusShims", "CV4L2", .product(name: "SystemPackage", package: "swift-system")],
            swiftSettings: librarySettings
        ),

        // Beside the stack, not in it: image input for tests, demos and benchmarks.
        .target(
            name: "ImageSources",
            dependencies: ["PixelBuffers", "Surfaces", "CPNG"],
            swiftSettings: librarySettings
        ),

        // Beside the stack, not in it: the recorder and the recording reader (docs/RECORDING.md); its file calls that
        // need _GNU_SOURCE (O_DIRECT, fallocate flags, sync_file_range) in its own shim.
        .target(name: "CFrameBusRecordingShims", cSettings: [.define("_GNU_SOURCE")]),
        .target(
            name: "FrameBusRecording",
            dependencies: [
                "FrameBus", "CFrameBusRecordingShims",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            swiftSettings: librarySettings
        ),

        // The command line, and the peer process the cross-process tests start.
        .executableTarget(
            name: "framebus",
            dependencies: [
                "FrameBus", "ImageSources", "V4L2Capture", "FrameBusBench", "FrameBusRecording",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // `framebus bench bus|codec|plot`: the measurement harness the command line runs, in its own module so that
        // Sources/framebus is the command line only. Reaches FrameBus's socket and clocks through `package` access.
        .target(
            name: "FrameBusBench",
            dependencies: [
                "FrameBus", "ImageSources", "Surfaces", "CFrameBusShims", "CLZ4", "CZstd", "FrameBusRecording",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(name: "FrameBusTestPeer", dependencies: ["FrameBus", "FrameBusTesting", "ImageSources"]),
        // Test, fuzz and hostile-peer entry points (the libFuzzer bodies, a hand-driven version-3 peer): beside
        // FrameBus, not in it, so the shipping library has no test hooks; reaches FrameBus's internals through
        // `package` access. Not a product: Fuzz/Bus and Benchmarks/ (packages of their own) compile its sources through
        // a symlink as a module of this package (`-package-name`, see their manifests).
        .target(
            name: "FrameBusTesting",
            dependencies: [
                "FrameBus", "Surfaces", "PixelBuffers", "SampleBuffers",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Atomics", package: "swift-atomics"),
            ],
            swiftSettings: librarySettings
        ),

        // The C ABI: include/framebus.h (imported through include/module.modulemap) and its Swift implementation.
        .systemLibrary(name: "CFrameBusABI", path: "include"),
        .target(
            name: "FrameBusC",
            dependencies: [
                "FrameBus", "SurfaceCompression", "FrameBusRecording", "CFrameBusABI",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: librarySettings
        ),

        // What the test targets share: child processes with time-limited waits, polling, thread helpers, scratch paths.
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "SurfacesTests", dependencies: ["Surfaces", "CFrameBusShims", "TestSupport"]),
        .testTarget(name: "PixelBuffersTests", dependencies: ["PixelBuffers", "CFrameBusShims", "TestSupport"]),
        .testTarget(
            name: "ImageSourcesTests",
            dependencies: [
                "ImageSources", "PixelBuffers", "TestSupport", .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "SurfaceCompressionTests",
            dependencies: ["SurfaceCompression", "PixelBuffers", "ImageSources", "TestSupport"]
        ),
        .testTarget(name: "SampleBuffersTests", dependencies: ["SampleBuffers", "TestSupport"]),
        .testTarget(
            name: "FrameBusTests",
            dependencies: ["FrameBus", "FrameBusTesting", "ImageSources", "TestSupport"]
        ),
        // Host: the format, colorimetry and accounting logic; in a guest kernel with vivid: the capture for real.
        .testTarget(name: "V4L2CaptureTests", dependencies: ["V4L2Capture", "FrameBus", "TestSupport"]),
        .testTarget(
            name: "FrameBusRecordingTests",
            dependencies: ["FrameBusRecording", "FrameBus", "ImageSources", "TestSupport"]
        ),
        // Compiles Tests/CABI/*.c with `cc` against include/framebus.h and libFrameBusC.so, and runs them as processes.
        .testTarget(
            name: "FrameBusCTests",
            dependencies: ["FrameBusC", "FrameBusRecording", "FrameBusTesting", "CFrameBusABI", "TestSupport"]
        ),
    ]
)
