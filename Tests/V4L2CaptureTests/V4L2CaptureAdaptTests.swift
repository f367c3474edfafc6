import Foundation
import FrameBus
import Synchronization
import TestSupport
import Testing
import V4L2Capture

/// A raw subscriber's frames: each one's duration and the level its publisher last said, in arrival order.
final class AdaptDurationLog: SubscriberDelegate, @unchecked Sendable {
    // @unchecked: `entries` is a Mutex.
    struct Entry {
        var durationNanoseconds: Int64
        var level: SystemPressureState.Level?
    }

    let entries = Mutex<[Entry]>([])

    func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {
        let duration = sampleBuffer.duration
        let nanoseconds =
            duration.isNumeric && duration.timescale > 0
            ? duration.value * 1_000_000_000 / Int64(duration.timescale) : -1
        let level = subscriber.publisherStatus?.systemPressure.level
        entries.withLock { $0.append(Entry(durationNanoseconds: nanoseconds, level: level)) }
    }
}

/// Counts frames; the work is the publisher's (encoding), not ours.
final class AdaptFrameCounter: SubscriberDelegate, @unchecked Sendable {
    // @unchecked: `count` is a Mutex.
    let count = Mutex(0)

    func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {
        count.withLock { $0 += 1 }
    }
}

/// `capture --adapt` (``V4L2Capture/Configuration/adaptsToSystemPressure``) against vivid in the guest kernel, driven
/// by real pressure: the publisher's real monitor measures its real cost (the bus factor). A subscriber of the
/// compressed variant makes the publisher encode every frame, work that takes much of the frame interval in the
/// guest; the level rises, the capture publishes every second or fourth device frame and each frame says it lasts
/// that much longer. Once that subscriber leaves, the cost is the fan-out alone, the level comes down one step per
/// hold time (0.5 s) to nominal, and the frames last one device interval again.
///
/// In the device suite (an extension of it), so it never opens the device while another test of the suite has it.
extension V4L2CaptureDeviceTests {
    @Test(.enabled(if: runsDeviceTests, noDeviceReason))
    func captureAdaptLowersTheFrameRateUnderRealCostAndRestoresItAtNominal() async throws {
        try requireCaptureDevice()
        var captureConfiguration = V4L2Capture.Configuration(
            devicePath: captureDevicePath,
            pixelFormat: .yuv420BiPlanarVideoRange8,
            width: 640,
            height: 360,
            framesPerSecond: 15
        )
        captureConfiguration.bufferCount = 8
        captureConfiguration.memoryMode = .deviceBuffers
        captureConfiguration.adaptsToSystemPressure = true
        let capture = try V4L2Capture(configuration: captureConfiguration)
        let interval = try #require(capture.format.frameDuration.isNumeric ? capture.format.frameDuration : nil)
        let intervalNanoseconds = interval.value * 1_000_000_000 / Int64(interval.timescale)
        let path = temporarySocketPath("adapt")
        var configuration = capture.publisherConfiguration(path: path, offeringCompressedVariant: true)
        // Only the bus factor counts (the guest's PSI is the emulator's business), with thresholds an encoded
        // frame passes and the fan-out alone stays far below: in the guest (debug build) a 640x360 frame's encoding
        // and fan-out take ~0.9 of the interval, the fan-out alone ~0.08 (below fair's recovery bound, 0.15). A
        // hold time of 0.5 s keeps the way down short.
        var policy = SystemPressurePolicy()
        let never = SystemPressurePolicy.Thresholds(fair: nil, serious: nil, critical: nil)
        (policy.cpu, policy.memory, policy.io, policy.thermal) = (never, never, never, never)
        policy.bus = .init(fair: 0.2, serious: 0.4, critical: 0.8)
        policy.holdTime = .milliseconds(500)
        policy.sampleInterval = .milliseconds(500)
        configuration.systemPressurePolicy = policy
        let publisher = try Publisher(configuration: configuration)
        let run = CaptureRun(capture, publisher)

        var rawConfiguration = Subscriber.Configuration(path: path, acceptedFormats: [.yuv420BiPlanarVideoRange8])
        rawConfiguration.connectTimeout = .seconds(60)
        let raw = try Subscriber(configuration: rawConfiguration)
        let log = AdaptDurationLog()
        raw.setDelegate(log, queue: DispatchQueue(label: "test.adapt.raw"))
        let flowing = await eventually(timeout: 90) { log.entries.withLock { $0.count } >= 3 }
        try #require(flowing, "no raw frames: \(capture.statistics)")
        #expect(publisher.systemPressureState.level == .nominal, "\(publisher.cost)")

        // The expensive subscriber: the publisher encodes each frame for it.
        let variant = try #require(PixelFormat.yuv420BiPlanarVideoRange8.compressedVariant)
        var compressedConfiguration = Subscriber.Configuration(path: path, acceptedFormats: [variant])
        compressedConfiguration.connectTimeout = .seconds(60)
        let compressed = try Subscriber(configuration: compressedConfiguration)
        let counter = AdaptFrameCounter()
        compressed.setDelegate(counter, queue: DispatchQueue(label: "test.adapt.compressed"))
        let risen = await eventually(timeout: 90) { publisher.systemPressureState.level >= .serious }
        #expect(risen, "level \(publisher.systemPressureState), \(publisher.cost)")
        #expect(publisher.systemPressureState.factors == .bus, "\(publisher.systemPressureState)")
        let marked = log.entries.withLock { $0.count }
        // The raw subscriber sees the frame rate fall: frames lasting two or four device intervals.
        let slowed = await eventually(timeout: 60) {
            log.entries.withLock { $0.dropFirst(marked).contains { $0.durationNanoseconds >= 2 * intervalNanoseconds } }
        }
        #expect(slowed, "durations \(log.entries.withLock { $0.suffix(10).map(\.durationNanoseconds) })")
        #expect(counter.count.withLock { $0 } > 0)

        compressed.cancel()
        let calm = await eventually(timeout: 90) { publisher.systemPressureState.level == .nominal }
        #expect(calm, "level \(publisher.systemPressureState), \(publisher.cost)")
        let back = log.entries.withLock { $0.count }
        // Restored: the frames published after nominal last one device interval, and the subscriber saw nominal.
        let restored = await eventually(timeout: 60) {
            log.entries.withLock { entries in
                entries.dropFirst(back).contains {
                    $0.durationNanoseconds == intervalNanoseconds && $0.level == .nominal
                }
            }
        }
        #expect(restored, "durations \(log.entries.withLock { $0.suffix(10).map(\.durationNanoseconds) })")
        let statistics = capture.statistics
        #expect(statistics.framesSkippedForPressure > 0, "\(statistics)")
        // Seen by the subscriber: frames published while the level was serious or critical lasted longer.
        let entries = log.entries.withLock { $0 }
        #expect(entries.contains { ($0.level ?? .nominal) >= .serious && $0.durationNanoseconds > intervalNanoseconds })
        raw.cancel()
        #expect(await run.finish() == .stopped)
    }
}
