import Foundation
import Synchronization
import Testing
import TestSupport

@testable import FrameBus

/// A delegate's callbacks: on its own queue, one at a time, in order, across replacing and removing the delegate; and
/// a delegate that is slow (or blocked) never stops the subscriber from reading its socket.
@Suite(.timeLimit(.minutes(5))) struct SubscriberDelegateTests {
    static let format = PixelFormat.yuv420BiPlanarVideoRange8

    /// What every delegate of one test saw, in the order the callbacks ran.
    final class CallbackLog: @unchecked Sendable {
        // @unchecked: everything mutable is guarded by `lock`.
        struct Call: Equatable {
            var delegate: String
            var sequence: UInt64
            /// Whether the callback ran on the queue the delegate was set with.
            var isOnItsQueue: Bool
        }
        private let lock = NSLock()
        private var calls: [Call] = []
        private var running = 0
        private var mostRunning = 0
        private var drops: [DroppedFrameReason: Int] = [:]
        private var endings: [FrameBusError] = []

        func enter(_ call: Call) {
            lock.withLock {
                calls.append(call)
                running += 1
                mostRunning = max(mostRunning, running)
            }
        }

        func leave() { lock.withLock { running -= 1 } }
        func dropped(_ reason: DroppedFrameReason, count: Int) { lock.withLock { drops[reason, default: 0] += count } }
        func ended(_ error: FrameBusError) { lock.withLock { endings.append(error) } }

        var snapshot: [Call] { lock.withLock { calls } }
        /// Most callbacks that ran at the same time.
        var concurrency: Int { lock.withLock { mostRunning } }
        func droppedCount(_ reason: DroppedFrameReason) -> Int { lock.withLock { drops[reason, default: 0] } }
        var ending: FrameBusError? { lock.withLock { endings.last } }

        func sequences(of delegate: String) -> [UInt64] {
            snapshot.filter { $0.delegate == delegate }.map(\.sequence)
        }
    }

    /// Records each callback and whether it runs on its own queue; blocks in the first frame when asked to.
    final class RecordingDelegate: SubscriberDelegate, @unchecked Sendable {
        // @unchecked: constants and semaphores only.
        let name: String
        let queue: DispatchQueue
        let log: CallbackLog
        let blocksInFirstFrame: Bool
        let entered = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        private static let queueKey = DispatchSpecificKey<String>()
        private let isFirst = Mutex(true)

        init(_ name: String, log: CallbackLog, blocksInFirstFrame: Bool = false) {
            self.name = name
            self.log = log
            self.blocksInFirstFrame = blocksInFirstFrame
            self.queue = DispatchQueue(label: "delegate-\(name)")
            queue.setSpecific(key: Self.queueKey, value: name)
        }

        func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {
            log.enter(
                .init(
                    delegate: name,
                    sequence: sampleBuffer.busSequenceNumber ?? .max,
                    isOnItsQueue: DispatchQueue.getSpecific(key: Self.queueKey) == name
                )
            )
            defer { log.leave() }
            let isFirstFrame = isFirst.withLock { first in
                defer { first = false }
                return first
            }
            if blocksInFirstFrame, isFirstFrame {
                entered.signal()
                proceed.wait()
            }
        }

        func subscriber(_ subscriber: Subscriber, didDrop sampleBuffer: SampleBuffer) {
            guard let reason = sampleBuffer.droppedFrameReason else { return }
            log.dropped(reason, count: Int(sampleBuffer.busDroppedFrameCount ?? 0))
        }

        func subscriber(_ subscriber: Subscriber, didEndWith error: FrameBusError) { log.ended(error) }
    }

    struct Bus {
        let publisher: Publisher
        let subscriber: Subscriber
        let pool: PixelBufferPool

        init(
            _ tag: String,
            delivery: Subscriber.Delivery,
            configure: (inout Subscriber.Configuration) -> Void = { _ in }
        ) throws {
            let path = temporaryBusPath(tag)
            var configuration = Publisher.Configuration(path: path, formats: [SubscriberDelegateTests.format])
            // The only subscriber: its share of the pool is the whole budget.
            configuration.maximumSubscribers = 1
            // These tests count every event a consumer gets: no system pressure events, which a loaded machine (CI's
            // CPU hogs) would otherwise send between the frames (SystemPressureSubscriberTests test those).
            configuration.systemPressurePolicy = nil
            publisher = try Publisher(configuration: configuration)
            pool = try PixelBufferPool(
                attributes: .init(
                    width: 64,
                    height: 48,
                    pixelFormat: SubscriberDelegateTests.format,
                    allocationThreshold: 16
                )
            )
            var subscriberConfiguration = Subscriber.Configuration(
                path: path,
                acceptedFormats: [SubscriberDelegateTests.format],
                delivery: delivery
            )
            configure(&subscriberConfiguration)
            subscriber = try Subscriber(configuration: subscriberConfiguration)
        }

        func publish(_ index: Int) throws {
            let buffer = try publisher.makePixelBuffer(from: pool)
            _ = try fillFrame(buffer, index: index)
            try publisher.publish(buffer)
        }

        func stop() {
            subscriber.cancel()
            publisher.stop()
        }
    }

    @Test func aDelegateReplacedDuringACallbackIsCalledOnItsOwnQueueOnlyAfterThatCallback() async throws {
        let bus = try Bus("replace", delivery: .queue(depth: 8))
        defer { bus.stop() }
        let log = CallbackLog()
        let first = RecordingDelegate("first", log: log, blocksInFirstFrame: true)
        let second = RecordingDelegate("second", log: log)
        bus.subscriber.setDelegate(first, queue: first.queue)
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        try bus.publish(0)
        #expect(await signalled(first.entered, within: 20))
        for index in 1...3 { try bus.publish(index) }
        #expect(await eventually { bus.subscriber.statistics.queueDepth == 3 })
        // Replaced while the first delegate's callback is still running on the first queue.
        bus.subscriber.setDelegate(second, queue: second.queue)
        first.proceed.signal()
        #expect(await eventually { log.sequences(of: "second").count == 3 }, "\(log.snapshot)")
        #expect(log.sequences(of: "first") == [0])
        #expect(log.sequences(of: "second") == [1, 2, 3])
        #expect(log.snapshot.allSatisfy { $0.isOnItsQueue }, "\(log.snapshot)")
        #expect(log.concurrency == 1)
    }

    @Test func aDelegateRemovedAndSetAgainDuringACallbackNeverRunsTwoCallbacksAtOnce() async throws {
        let bus = try Bus("remove", delivery: .queue(depth: 8))
        defer { bus.stop() }
        let log = CallbackLog()
        let first = RecordingDelegate("first", log: log, blocksInFirstFrame: true)
        let second = RecordingDelegate("second", log: log)
        bus.subscriber.setDelegate(first, queue: first.queue)
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        try bus.publish(0)
        #expect(await signalled(first.entered, within: 20))
        bus.subscriber.setDelegate(nil, queue: first.queue)
        for index in 1...2 { try bus.publish(index) }
        #expect(await eventually { bus.subscriber.statistics.queueDepth == 2 })
        bus.subscriber.setDelegate(second, queue: second.queue)
        // Every callback of the second delegate runs on its (serial) queue, and a pass that setDelegate (wrongly)
        // started would have been put on that queue before setDelegate returned: once a block queued now has run,
        // such a pass has run too. An event, not a time.
        await withCheckedContinuation { (drained: CheckedContinuation<Void, Never>) in
            second.queue.async { drained.resume() }
        }
        #expect(log.sequences(of: "second").isEmpty, "a callback ran while another was still running")
        first.proceed.signal()
        #expect(await eventually { log.sequences(of: "second").count == 2 }, "\(log.snapshot)")
        #expect(log.snapshot.map(\.sequence) == [0, 1, 2])
        #expect(log.snapshot.allSatisfy { $0.isOnItsQueue }, "\(log.snapshot)")
        #expect(log.concurrency == 1)
    }

    @Test func aDelegateRemovedDuringACallbackLeavesTheEventsToAnIteration() async throws {
        let bus = try Bus("iterate", delivery: .queue(depth: 8))
        defer { bus.stop() }
        let log = CallbackLog()
        let first = RecordingDelegate("first", log: log, blocksInFirstFrame: true)
        bus.subscriber.setDelegate(first, queue: first.queue)
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        try bus.publish(0)
        #expect(await signalled(first.entered, within: 20))
        bus.subscriber.setDelegate(nil, queue: first.queue)
        for index in 1...2 { try bus.publish(index) }
        #expect(await eventually { bus.subscriber.statistics.queueDepth == 2 })
        var events = bus.subscriber.frames.makeAsyncIterator()
        let next = try await events.next()
        #expect(next?.busSequenceNumber == 1)
        first.proceed.signal()
        let last = try await events.next()
        #expect(last?.busSequenceNumber == 2)
        #expect(log.sequences(of: "first") == [0])
    }

    @Test func aBlockedDelegateDoesNotStopReadingLateFramesAreReplacedAndReleased() async throws {
        let bus = try Bus("slow", delivery: .latestOnly)
        defer { bus.stop() }
        let log = CallbackLog()
        let delegate = RecordingDelegate("slow", log: log, blocksInFirstFrame: true)
        bus.subscriber.setDelegate(delegate, queue: delegate.queue)
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        try bus.publish(0)
        #expect(await signalled(delegate.entered, within: 20))
        // While the callback is blocked the subscriber still reads: each newer frame replaces the waiting one, which
        // goes back to the publisher at once. Held: the frame in the callback and the one waiting. (The next frame
        // only once the publisher has the replaced one back, so that none is dropped for our share.)
        for index in 1...5 {
            try bus.publish(index)
            #expect(await eventually { bus.publisher.heldFrameCount <= 2 }, "held \(bus.publisher.heldFrameCount)")
        }
        #expect(
            await eventually { bus.subscriber.statistics.dropped[.frameWasLate] == 4 },
            "\(bus.subscriber.statistics)"
        )
        #expect(await eventually { bus.publisher.heldFrameCount == 2 }, "held \(bus.publisher.heldFrameCount)")
        #expect(bus.subscriber.statistics.queueDepth == 1)
        delegate.proceed.signal()
        #expect(await eventually { log.sequences(of: "slow") == [0, 5] }, "\(log.snapshot)")
        #expect(await eventually { log.droppedCount(.frameWasLate) == 4 })
        #expect(log.concurrency == 1)
    }

    @Test func aPublisherFloodingWhileTheDelegateIsBlockedIsCutOffWithBoundedMemory() async throws {
        let path = temporaryBusPath("flood-blocked")
        let peer = try await startPeer(["hostile-publisher", path, "never-read"])
        try #require(await eventually { peer.output.contains("listening") }, "the hostile publisher did not start")
        var configuration = Subscriber.Configuration(path: path, acceptedFormats: [Self.format])
        configuration.connectTimeout = .seconds(20)
        let subscriber = try Subscriber(configuration: configuration)
        defer { subscriber.cancel() }
        let log = CallbackLog()
        let delegate = RecordingDelegate("blocked", log: log, blocksInFirstFrame: true)
        subscriber.setDelegate(delegate, queue: delegate.queue)
        #expect(await signalled(delegate.entered, within: 30))
        // The publisher writes frames as fast as it can and never reads our releases. With the callback blocked,
        // the subscriber must read on (replacing the waiting frame), fill its bounded outbox and hang up.
        #expect(await eventually(timeout: 60) { peer.output.contains("closed after") }, "\(peer.output)")
        let statistics = subscriber.statistics
        #expect(statistics.queueDepth <= 1)
        #expect(statistics.heldNow <= 2, "\(statistics)")
        #expect((statistics.dropped[.frameWasLate] ?? 0) > 0, "\(statistics)")
        delegate.proceed.signal()
        #expect(await eventually { log.ending != nil })
        #expect(log.ending?.code == .protocolViolation, "\(String(describing: log.ending))")
        #expect(log.ending?.message?.contains("stopped reading") == true, "\(String(describing: log.ending))")
    }
}
