// Benchmarks of the bus (FrameBus): publish → didOutput through a real SOCK_SEQPACKET connection, one frame in
// flight, at 1080p 420v and 4K BGRA (zero-copy: the size should not matter), and the wire codec of a FRAME.
//
//   cd Benchmarks && swift package benchmark --target Bus
//
// Publisher and subscriber share this process here (package-benchmark measures one process); the cross-process
// figures, with the SEQPACKET floor and a stream-socket copy for comparison, come from `framebus bench bus`.
// Malloc counts per frame are deterministic enough to gate on; time is noisy on a shared machine.
import Benchmark
import Foundation
import FrameBus
import BenchmarksTesting

private final class Waiter: SubscriberDelegate, @unchecked Sendable {
    // @unchecked: only the semaphore is shared, and it is thread-safe.
    let delivered = DispatchSemaphore(value: 0)
    func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) { delivered.signal() }
}

/// The fixture of one benchmark, made by its setup hook and closed by its teardown.
private final class FixtureBox: @unchecked Sendable {
    // @unchecked: package-benchmark runs setup, the measured closure and teardown one after another.
    var fixture: Fixture?
}

private struct Fixture {
    let publisher: Publisher
    let subscriber: Subscriber
    let pool: PixelBufferPool
    let waiter: Waiter

    init(format: PixelFormat, width: Int, height: Int) throws {
        let path = "/tmp/framebus-benchmark-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        publisher = try Publisher(configuration: .init(path: path, formats: [format]))
        pool = try PixelBufferPool(
            attributes: .init(
                width: width,
                height: height,
                pixelFormat: format,
                minimumBufferCount: 8,
                maximumBufferAge: nil,
                allocationThreshold: 8
            )
        )
        subscriber = try Subscriber(
            configuration: .init(path: path, acceptedFormats: [format], delivery: .queue(depth: 8))
        )
        waiter = Waiter()
        subscriber.setDelegate(waiter, queue: DispatchQueue(label: "benchmark.delegate"))
        let deadline = Date().addingTimeInterval(10)
        while publisher.subscriberCount < 1, Date() < deadline { usleep(1000) }
        // Announce every surface once, so the measured frames are the steady state.
        for _ in 0..<16 { try handOff() }
    }

    /// Publishes one frame and waits until the subscriber's delegate has it.
    func handOff() throws {
        var buffer: PixelBuffer?
        while buffer == nil {
            buffer = try? pool.makePixelBuffer()
            if buffer == nil { usleep(10) }  // the previous frame's release is still on its way
        }
        try publisher.publish(buffer!)
        waiter.delivered.wait()
    }

    func close() {
        subscriber.cancel()
        publisher.stop()
    }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal, .cpuTotal],
        maxDuration: .seconds(3),
        maxIterations: 20_000
    )

    let cases: [(String, PixelFormat, Int, Int)] = [
        ("1080p 420v", .yuv420BiPlanarVideoRange8, 1920, 1080),
        ("4K BGRA", .bgra8, 3840, 2160),
    ]
    for (name, format, width, height) in cases {
        let box = FixtureBox()
        Benchmark(
            "publish→didOutput \(name)",
            closure: { benchmark in
                guard let fixture = box.fixture else { return }
                for _ in benchmark.scaledIterations {
                    try fixture.handOff()
                }
            },
            setup: { box.fixture = try Fixture(format: format, width: width, height: height) },
            teardown: {
                box.fixture?.close()
                box.fixture = nil
            }
        )
    }

    Benchmark("FRAME message encode + decode") { benchmark in
        let frame = FrameMessageRoundTrip(sequence: 1, surfaceID: 2, bytesUsed: 3_110_400)
        for _ in benchmark.scaledIterations {
            blackHole(frame.run())
        }
    }
}
