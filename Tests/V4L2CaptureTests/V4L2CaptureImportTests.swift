import Foundation
import FrameBus
import Glibc
import Testing
import V4L2Capture

/// FNV-1a 64, as FrameBusTestPeer's `bus-subscriber --checksum` hashes a frame's packed image bytes.
func fnv1a(_ data: Data) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in data {
        hash ^= UInt64(byte)
        hash = hash &* 0x100_0000_01b3
    }
    return hash
}

/// What `framebus capture` and a subscriber in another process saw.
struct CaptureDelivery {
    var captureOutput: String
    var captureExitStatus: Int32?
    var subscriberOutput: String
    var frames: [[String: String]]
    var drops: [[String: String]]
    /// The producer's copy of each published frame's image (`--frame-dump`), by bus sequence.
    var dumped: [UInt64: Data]
}

/// Runs `framebus capture ARGUMENTS --frame-dump DIR` and `FrameBusTestPeer bus-subscriber --checksum` (another
/// process) until the subscriber has `frames` frames or drops, then stops the capture with SIGTERM. (Callers ask for
/// 5 fps: the subscriber hashes every byte, which a debug build in a TCG guest does at about 1 µs per byte.)
func captureIntoSubscriber(_ arguments: [String], frames: Int, tag: String) async throws -> CaptureDelivery {
    let path = temporarySocketPath(tag)
    let dump = FileManager.default.temporaryDirectory.appendingPathComponent("fbv4l2-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: dump) }
    let command = try ChildProcess(
        "framebus",
        ["capture", "--device", captureDevicePath, "--path", path, "--frame-dump", dump.path] + arguments
    )
    let listening = await eventually(timeout: .seconds(90)) { access(path, F_OK) == 0 || command.hasExited }
    try #require(listening && !command.hasExited, "framebus capture did not listen: \(command.output)")
    let subscriber = try ChildProcess(
        "FrameBusTestPeer",
        [
            "bus-subscriber", path, "--accept", "420v", "--queue", "3", "--checksum", "--frames", "\(frames)",
            "--timeout", "200",
        ]
    )
    let finished = await subscriber.exit(within: .seconds(220))
    kill(command.processID, SIGTERM)
    let exited = await command.exit(within: .seconds(60))
    #expect(finished, "subscriber: \(subscriber.output)")
    #expect(exited, "capture: \(command.output)")
    var dumped: [UInt64: Data] = [:]
    for name in (try? FileManager.default.contentsOfDirectory(atPath: dump.path)) ?? [] {
        guard name.hasSuffix(".raw"), let sequence = UInt64(name.dropLast(4)) else { continue }
        dumped[sequence] = try Data(contentsOf: dump.appendingPathComponent(name))
    }
    return CaptureDelivery(
        captureOutput: command.output,
        captureExitStatus: command.exitStatus,
        subscriberOutput: subscriber.output,
        frames: subscriber.records("frame"),
        drops: subscriber.records("drop"),
        dumped: dumped
    )
}

/// The subscriber got every frame bit-exact (its hash of the image equals the hash of the bytes the producer read
/// from the same surface), held as `backing` in `descriptors` descriptors, and every bus sequence between its first
/// and last event is exactly one frame or one reported drop. At least `minimum` frames: a hashing subscriber in a
/// TCG guest is slow, so how many it takes, and how many it is told it lost (`outOfBuffers`), depends on scheduling.
func expectBitExactAndAccounted(
    _ delivery: CaptureDelivery,
    backing: String,
    descriptors: Int,
    imageBytes: Int,
    atLeast minimum: Int
) throws {
    let frames = delivery.frames
    try #require(frames.count >= minimum, "received \(frames.count): \(delivery.subscriberOutput)")
    #expect(delivery.captureExitStatus == 0, "\(delivery.captureOutput)")
    let backings = Set(frames.compactMap { $0["backing"] })
    let counts = Set(frames.compactMap { $0["fds"] })
    #expect(backings == [backing], "backings \(backings)")
    #expect(counts == ["\(descriptors)"], "descriptor counts \(counts)")
    var mismatched: [UInt64] = []
    var compared = 0
    for frame in frames {
        guard let sequence = frame["seq"].flatMap({ UInt64($0) }), let hash = frame["hash"] else { continue }
        guard let image = delivery.dumped[sequence] else {
            mismatched.append(sequence)
            continue
        }
        #expect(image.count == imageBytes)
        compared += 1
        if String(fnv1a(image), radix: 16) != hash { mismatched.append(sequence) }
    }
    #expect(compared == frames.count, "frames without the producer's copy")
    #expect(mismatched.isEmpty, "differ or missing: \(mismatched.prefix(5)) of \(frames.count)")
    // Distinct images, so equal hashes mean something: vivid's pattern moves and it prints a frame counter.
    #expect(Set(frames.compactMap { $0["hash"] }).count > frames.count / 2)

    var seen: [UInt64: Int] = [:]
    for frame in frames {
        if let sequence = frame["seq"].flatMap({ UInt64($0) }) { seen[sequence, default: 0] += 1 }
    }
    for drop in delivery.drops {
        guard let first = drop["first"].flatMap({ UInt64($0) }), let last = drop["last"].flatMap({ UInt64($0) }),
            first <= last, last - first < 100_000
        else { continue }
        for sequence in first...last { seen[sequence, default: 0] += 1 }
    }
    let lowest = try #require(seen.keys.min())
    let highest = try #require(seen.keys.max())
    #expect((lowest...highest).filter { seen[$0] == nil }.isEmpty, "unaccounted sequences")
    #expect(seen.filter { $0.value > 1 }.isEmpty, "sequences both delivered and dropped")
}

extension V4L2CaptureDeviceTests {
    /// Without udmabuf, `.automatic` falls back to the device's buffers and says why; `.importedMemFD` is refused,
    /// naming the missing node.
    @Test(.enabled(if: runsDeviceTests, noDeviceReason))
    func automaticMemoryFallsBackToDeviceBuffersWithoutUDMABuf() throws {
        try requireCaptureDevice()
        var configuration = V4L2Capture.Configuration(
            devicePath: captureDevicePath,
            pixelFormat: .yuv420BiPlanarVideoRange8,
            width: 320,
            height: 180
        )
        configuration.bufferCount = 4
        configuration.udmabufDevicePath = "/dev/framebus-no-udmabuf"
        configuration.memoryMode = .automatic
        // In a function of its own, so the capture (and its buffers) are gone before the next open.
        func automatic() throws -> (V4L2Capture.MemoryMode, String) {
            let capture = try V4L2Capture(configuration: configuration)
            return (capture.memoryMode, capture.memoryModeReason)
        }
        let (mode, reason) = try automatic()
        #expect(mode == .deviceBuffers)
        #expect(reason == "MMAP: /dev/framebus-no-udmabuf absent")
        configuration.memoryMode = .importedMemFD
        #expect {
            _ = try V4L2Capture(configuration: configuration)
        } throws: { error in
            (error as? V4L2CaptureError)?.code == .surface && "\(error)".contains("/dev/framebus-no-udmabuf")
        }
    }

    /// `--memory auto` in a kernel with /dev/udmabuf and vivid: the device writes into our sealed memfds, and a
    /// subscriber in another process gets memfd surfaces (no DMA-BUF) whose bytes equal what the device wrote.
    @Test(.enabled(if: runsDeviceTests, noDeviceReason))
    func automaticMemoryImportsMemFDsThroughUDMABufAndAnotherProcessGetsThemBitExact() async throws {
        try requireCaptureDevice()
        let delivery = try await captureIntoSubscriber(
            ["--memory", "auto", "--format", "420v", "--size", "320x180", "--fps", "5"],
            frames: 16,
            tag: "udmabuf"
        )
        #expect(
            delivery.captureOutput.contains(
                "memory: udmabuf (udmabuf: /dev/udmabuf present and vivid imports DMA-BUFs)"
            ),
            "\(delivery.captureOutput)"
        )
        #expect(delivery.captureOutput.contains("frames are memfd surfaces"), "\(delivery.captureOutput)")
        try expectBitExactAndAccounted(
            delivery,
            backing: "memfd",
            descriptors: 1,
            imageBytes: 320 * 180 * 3 / 2,
            atLeast: 5
        )
    }
}

/// A multi-planar capture device: vivid loaded with `multiplanar=2` (scripts/v4l2-guest-tests reloads it so before
/// this suite). NV12M (one buffer per plane) and single-plane NV12 on the multi-planar API, in both memory modes,
/// bit-exact into another process.
@Suite(.serialized, .timeLimit(.minutes(6))) struct V4L2MultiplanarTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var memory: String
        var deviceFormat: String
        var backing: String
        var descriptors: Int
        var testDescription: String { "\(deviceFormat) --memory \(memory)" }
    }

    @Test(
        .enabled(if: runsDeviceTests, noDeviceReason),
        arguments: [
            Case(memory: "mmap", deviceFormat: "NM12", backing: "dmabuf:0", descriptors: 2),
            Case(memory: "udmabuf", deviceFormat: "NM12", backing: "memfd", descriptors: 2),
            Case(memory: "auto", deviceFormat: "NV12", backing: "memfd", descriptors: 1),
        ]
    )
    func framesReachAnotherProcessBitExact(_ test: Case) async throws {
        try requireCaptureDevice()
        let delivery = try await captureIntoSubscriber(
            [
                "--memory", test.memory, "--device-format", test.deviceFormat, "--format", "420v", "--size",
                "320x180", "--fps", "5",
            ],
            frames: 16,
            tag: "mplane"
        )
        let output = delivery.captureOutput
        #expect(output.contains("\(test.deviceFormat) 320x180 as 420v"), "\(output)")
        #expect(output.contains("multi-planar device"), "\(output)")
        #expect(output.contains("memory: \(test.memory == "mmap" ? "mmap" : "udmabuf") ("), "\(output)")
        try expectBitExactAndAccounted(
            delivery,
            backing: test.backing,
            descriptors: test.descriptors,
            imageBytes: 320 * 180 * 3 / 2,
            atLeast: 5
        )
    }

    /// The library's view of NV12M: two memory planes with their own strides and sizes, each plane of the surface
    /// in its own buffer.
    @Test(.enabled(if: runsDeviceTests, noDeviceReason))
    func nv12mNegotiatesTwoMemoryPlanes() throws {
        try requireCaptureDevice()
        var configuration = V4L2Capture.Configuration(
            devicePath: captureDevicePath,
            pixelFormat: .yuv420BiPlanarVideoRange8,
            width: 320,
            height: 180
        )
        configuration.devicePixelFormat = .nv12m
        configuration.memoryMode = .importedMemFD
        configuration.bufferCount = 4
        let capture = try V4L2Capture(configuration: configuration)
        #expect(capture.isMultiplanar)
        #expect(capture.memoryMode == .importedMemFD)
        #expect(capture.format.devicePixelFormat == .nv12m)
        #expect(capture.format.memoryPlaneBytesPerLine.count == 2)
        #expect(capture.format.memoryPlaneSizes.count == 2)
        #expect(capture.format.memoryPlaneSizes[0] >= 320 * 180 && capture.format.memoryPlaneSizes[1] >= 320 * 90)
    }
}
