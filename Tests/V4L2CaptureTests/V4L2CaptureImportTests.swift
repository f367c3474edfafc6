import Foundation
import FrameBus
import Glibc
import Synchronization
import TestSupport
import Testing
import V4L2Capture

/// A subscriber delegate that keeps, for every frame, a copy of its image (rows without padding) and what held it,
/// and every dropped range it is told of.
final class DeliveryCollector: SubscriberDelegate, @unchecked Sendable {
    // @unchecked: `state` is a Mutex.
    struct Received: Sendable {
        var image: Data
        var backing: String
        var descriptors: Int
    }
    private let state = Mutex<(frames: [UInt64: Received], drops: [ClosedRange<UInt64>])>(([:], []))

    var frames: [UInt64: Received] { state.withLock { $0.frames } }
    var drops: [ClosedRange<UInt64>] { state.withLock { $0.drops } }
    var frameCount: Int { state.withLock { $0.frames.count } }

    func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {
        guard let buffer = sampleBuffer.imageBuffer, let sequence = sampleBuffer.busSequenceNumber else { return }
        var image = Data()
        do {
            try buffer.lock(.readOnly)
            defer { try? buffer.unlock(.readOnly) }
            for index in 0..<buffer.planeCount {
                let plane = buffer.planeLayout(index)
                let rowBytes = plane.width * plane.bytesPerElement
                try buffer.withUnsafeBytes(ofPlane: index) { bytes in
                    guard let base = bytes.baseAddress else { return }
                    for row in 0..<plane.height {
                        image.append(Data(bytes: base + row * plane.bytesPerRow, count: rowBytes))
                    }
                }
            }
        } catch {
            return
        }
        let backing: String
        switch buffer.surface.backing {
        case .memfd: backing = "memfd"
        case .dmaBuf(let modifier): backing = "dmabuf:\(modifier)"
        }
        let received = Received(image: image, backing: backing, descriptors: buffer.surface.descriptorCount)
        state.withLock { $0.frames[sequence] = received }
    }

    func subscriber(_ subscriber: Subscriber, didDrop sampleBuffer: SampleBuffer) {
        guard let range = sampleBuffer.busSequenceRange, range.count < 100_000 else { return }
        state.withLock { $0.drops.append(range) }
    }
}

/// What `framebus capture` published and what a subscriber of it received.
struct CaptureDelivery {
    var captureOutput: String
    var captureExitStatus: Int32?
    var frames: [UInt64: DeliveryCollector.Received]
    var drops: [ClosedRange<UInt64>]
    /// The producer's copy of each published frame's image (`--frame-dump`), by bus sequence.
    var dumped: [UInt64: Data]
}

/// Runs `framebus capture ARGUMENTS --frame-dump DIR` in another process and subscribes to it from this one until
/// `frames` frames arrived (however many were dropped on the way), then stops the capture with SIGTERM. (The
/// subscriber is this test process: a process start in the TCG guest costs seconds.)
func captureIntoSubscriber(_ arguments: [String], frames: Int, tag: String) async throws -> CaptureDelivery {
    let path = temporarySocketPath(tag)
    let dump = FileManager.default.temporaryDirectory.appendingPathComponent("fbv4l2-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: dump) }
    let command = try await startFramebus(
        ["capture", "--device", captureDevicePath, "--path", path, "--frame-dump", dump.path] + arguments
    )
    let listening = await eventually(timeout: 90) { access(path, F_OK) == 0 || command.hasExited }
    try #require(listening && !command.hasExited, "framebus capture did not listen: \(command.output)")
    var configuration = Subscriber.Configuration(path: path, acceptedFormats: [.yuv420BiPlanarVideoRange8])
    configuration.delivery = .queue(depth: 3)
    configuration.connectTimeout = .seconds(60)
    let subscriber = try Subscriber(configuration: configuration)
    let collector = DeliveryCollector()
    subscriber.setDelegate(collector, queue: DispatchQueue(label: "test.subscriber.\(tag)"))
    let enough = await eventually(timeout: 150) { collector.frameCount >= frames }
    subscriber.cancel()
    command.send(SIGTERM)
    let exited = await command.waitForExit(timeout: 60)
    #expect(enough, "\(collector.frameCount) frames: \(command.output)")
    #expect(exited, "capture: \(command.output)")
    var dumped: [UInt64: Data] = [:]
    for name in (try? FileManager.default.contentsOfDirectory(atPath: dump.path)) ?? [] {
        guard name.hasSuffix(".raw"), let sequence = UInt64(name.dropLast(4)) else { continue }
        dumped[sequence] = try Data(contentsOf: dump.appendingPathComponent(name))
    }
    return CaptureDelivery(
        captureOutput: command.output,
        captureExitStatus: command.terminationStatus,
        frames: collector.frames,
        drops: collector.drops,
        dumped: dumped
    )
}

/// The subscriber got every frame bit-exact (its copy of the image equals the bytes the producer read from the same
/// surface), held as `backing` in `descriptors` descriptors, and every bus sequence between its first and last
/// event is exactly one frame or one reported drop; `minimum` frames were waited for (how many were dropped on the
/// way, as `outOfBuffers`, depends on scheduling).
func expectBitExactAndAccounted(
    _ delivery: CaptureDelivery,
    backing: String,
    descriptors: Int,
    imageBytes: Int,
    atLeast minimum: Int
) throws {
    let frames = delivery.frames
    try #require(frames.count >= minimum, "received \(frames.count): \(delivery.captureOutput)")
    #expect(delivery.captureExitStatus == 0, "\(delivery.captureOutput)")
    let backings = Set(frames.values.map(\.backing))
    let counts = Set(frames.values.map(\.descriptors))
    #expect(backings == [backing], "backings \(backings)")
    #expect(counts == [descriptors], "descriptor counts \(counts)")
    var mismatched: [UInt64] = []
    for (sequence, frame) in frames {
        #expect(frame.image.count == imageBytes)
        if delivery.dumped[sequence] != frame.image { mismatched.append(sequence) }
    }
    #expect(mismatched.isEmpty, "differ or missing: \(mismatched.sorted().prefix(5)) of \(frames.count)")
    // Distinct images, so equality means something: vivid's pattern moves and it prints a frame counter.
    #expect(Set(frames.values.map(\.image)).count > frames.count / 2)

    var seen: [UInt64: Int] = [:]
    for sequence in frames.keys { seen[sequence, default: 0] += 1 }
    for range in delivery.drops {
        for sequence in range { seen[sequence, default: 0] += 1 }
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
    /// subscriber in another process than the capture gets memfd surfaces (no DMA-BUF) whose bytes equal what the
    /// device wrote.
    @Test(.enabled(if: runsDeviceTests, noDeviceReason))
    func automaticMemoryImportsMemFDsThroughUDMABufAndAnotherProcessGetsThemBitExact() async throws {
        try requireCaptureDevice()
        let delivery = try await captureIntoSubscriber(
            ["--memory", "auto", "--format", "420v", "--size", "320x180", "--fps", "15"],
            frames: 12,
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
            atLeast: 12
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
                "320x180", "--fps", "15",
            ],
            frames: 12,
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
            atLeast: 12
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
