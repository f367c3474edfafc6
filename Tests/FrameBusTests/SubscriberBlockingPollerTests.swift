import Foundation
import Synchronization
import Testing
import TestSupport

@testable import FrameBus

/// `Subscriber.BlockingPoller`, behind the C interface's `fb_subscriber_next_event`: a waiting thread runs the
/// subscriber's connection loop itself (leader/follower), the connection thread takes it back when the caller goes
/// away or the session ends, and interrupting or cancelling ends a wait in progress.
@Suite(.timeLimit(.minutes(5))) struct SubscriberBlockingPollerTests {
    typealias Bus = SubscriberDelegateTests.Bus

    /// What a waiting thread saw: the frames' sequence numbers and the other events, by name.
    struct Taken: Sendable, Equatable {
        var frames: [UInt64] = []
        var others: [String] = []
        var last: String = ""
    }

    /// Calls `next` until `frames` frames came or a call returns something other than an event.
    static func take(
        _ frames: Int,
        from poller: Subscriber.BlockingPoller,
        timeoutNanoseconds: Int64 = 20_000_000_000
    ) -> Taken {
        var taken = Taken()
        while taken.frames.count < frames {
            switch poller.next(timeoutNanoseconds: timeoutNanoseconds) {
            case .event(.frame(let sample)): taken.frames.append(sample.busSequenceNumber ?? .max)
            case .event(.connected): taken.others.append("connected")
            case .event(.reconnected): taken.others.append("reconnected")
            case .event(.dropped): taken.others.append("dropped")
            case .event(.ended): taken.others.append("ended")
            case .event(.systemPressureChanged): break  // the publisher's status: not what these tests count
            case .finished: taken.last = "finished"; return taken
            case .timedOut: taken.last = "timedOut"; return taken
            case .interrupted: taken.last = "interrupted"; return taken
            case .busy: taken.last = "busy"; return taken
            }
        }
        return taken
    }

    /// How the session wakes its reader: version 3 with futex wake-ups, version 3 with wake-up sockets, version 2
    /// (socket datagrams). A waiting thread sleeps in `futex_waitv` in the first, in `poll` in the others.
    enum WakeMode: String, CaseIterable, Sendable {
        case futex, wakeUpSocket, version2
    }

    @Test(arguments: WakeMode.allCases)
    func aWaitingThreadReadsTheFramesItself(mode: WakeMode) async throws {
        let bus = try Bus("blocking-lead-\(mode.rawValue)", delivery: .queue(depth: 8)) { configuration in
            configuration.usesFutexWakeUps = mode == .futex
            configuration.usesSharedMemoryRings = mode != .version2
        }
        defer { bus.stop() }
        let poller = try bus.subscriber.makeBlockingPoller()
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        let count = 20
        let waiter = Task { try await onDedicatedThread { Self.take(count, from: poller) } }
        for index in 0..<count {
            try bus.publish(index)
            // One frame at a time, so the waiting thread is asleep in the loop when the next one is published.
            #expect(await eventually { bus.subscriber.statistics.delivered == UInt64(index + 1) })
        }
        let taken = try await waiter.value
        #expect(taken.frames == (0..<UInt64(count)).map { $0 })
        let session = try #require(bus.subscriber.session)
        #expect(session.protocolVersion == (mode == .version2 ? 2 : 3))
        #expect(session.usesFutexWakeUps == (mode == .futex))
        #expect(poller.callerTurns > 0)
        // The publisher woke the waiting thread itself: the frames went through its turns, not the connection thread.
        #expect(poller.framesReadByCallers > 0, "no frame was read on the waiting thread")
    }

    @Test func theConnectionThreadTakesTheLoopBackFromACallerThatStoppedCalling() async throws {
        let bus = try Bus("blocking-away", delivery: .latestOnly)
        defer { bus.stop() }
        let poller = try bus.subscriber.makeBlockingPoller()
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        try bus.publish(0)
        let first = try await onDedicatedThread { Self.take(1, from: poller) }
        #expect(first.frames == [0])
        // Nobody calls now: the connection thread must read on, replacing the frame that waits (latest-only).
        for index in 1...4 {
            try bus.publish(index)
            #expect(await eventually { bus.publisher.heldFrameCount <= 1 })
        }
        #expect(await eventually { bus.subscriber.statistics.dropped[.frameWasLate] == 3 })
        let last = try await onDedicatedThread { Self.take(1, from: poller) }
        #expect(last.frames == [4])
        #expect(last.others == ["dropped"])
    }

    @Test func aZeroTimeoutReadsWhatThePublisherAlreadySent() async throws {
        let bus = try Bus("blocking-zero", delivery: .queue(depth: 8))
        defer { bus.stop() }
        let poller = try bus.subscriber.makeBlockingPoller()
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        try bus.publish(0)
        // Polling without waiting: each call reads what came (the loop is free or the connection thread reads).
        let taken = try await onDedicatedThread { () -> [UInt64] in
            let end = ProcessInfoShim.monotonicNanoseconds() + 20_000_000_000
            var frames: [UInt64] = []
            while frames.isEmpty, ProcessInfoShim.monotonicNanoseconds() < end {
                if case .event(.frame(let sample)) = poller.next(timeoutNanoseconds: 0) {
                    frames.append(sample.busSequenceNumber ?? .max)
                }
            }
            return frames
        }
        #expect(taken == [0])
        #expect(try await onDedicatedThread { poller.next(timeoutNanoseconds: 0) }.isTimedOut)
    }

    @Test func interruptEndsAWaitInProgressAndResumeWaitsAgain() async throws {
        let bus = try Bus("blocking-interrupt", delivery: .queue(depth: 8))
        defer { bus.stop() }
        let poller = try bus.subscriber.makeBlockingPoller()
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        let waiter = Task { try await onDedicatedThread { Self.take(1, from: poller, timeoutNanoseconds: -1) } }
        // Interrupted once the thread waits (it leads the loop, asleep on the ring, or waits for the loop).
        #expect(await eventually { poller.callerTurns > 0 })
        poller.interrupt()
        let interrupted = try await waiter.value
        #expect(interrupted.last == "interrupted")
        #expect(interrupted.frames.isEmpty)
        #expect(try await onDedicatedThread { poller.next(timeoutNanoseconds: -1) }.isInterrupted)
        poller.resume()
        try bus.publish(0)
        #expect(try await onDedicatedThread { Self.take(1, from: poller) }.frames == [0])
    }

    @Test func cancellingEndsAWaitInProgress() async throws {
        let bus = try Bus("blocking-cancel", delivery: .queue(depth: 8))
        defer { bus.stop() }
        let poller = try bus.subscriber.makeBlockingPoller()
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        let waiter = Task { try await onDedicatedThread { Self.take(1, from: poller, timeoutNanoseconds: -1) } }
        #expect(await eventually { poller.callerTurns > 0 })
        bus.subscriber.cancel()
        let taken = try await waiter.value
        #expect(taken.last == "finished")
        #expect(await eventually { bus.publisher.subscriberCount == 0 })
    }

    @Test func aSessionThatEndsDuringACallersTurnIsFollowedByTheNextOne() async throws {
        let path = temporaryBusPath("blocking-reconnect")
        var publisherConfiguration = Publisher.Configuration(path: path, formats: [SubscriberDelegateTests.format])
        publisherConfiguration.maximumSubscribers = 1
        let pool = try PixelBufferPool(
            attributes: .init(width: 64, height: 48, pixelFormat: SubscriberDelegateTests.format, allocationThreshold: 8)
        )
        var configuration = Subscriber.Configuration(
            path: path,
            acceptedFormats: [SubscriberDelegateTests.format],
            delivery: .queue(depth: 8)
        )
        configuration.reconnects = true
        configuration.reconnectInterval = .milliseconds(20)
        let subscriber = try Subscriber(configuration: configuration)
        defer { subscriber.cancel() }
        let poller = try subscriber.makeBlockingPoller()
        var publisher = try Publisher(configuration: publisherConfiguration)
        #expect(await eventually { publisher.subscriberCount == 1 })
        let waiter = Task { try await onDedicatedThread { Self.take(2, from: poller) } }
        #expect(await eventually { poller.callerTurns > 0 })
        // The publisher goes while the waiting thread runs the loop: it reads the end, and gives the loop back to
        // the connection thread, which connects to the next publisher.
        publisher.stop()
        publisher = try Publisher(configuration: publisherConfiguration)
        defer { publisher.stop() }
        #expect(await eventually { publisher.subscriberCount == 1 })
        for index in 0..<2 {
            let buffer = try publisher.makePixelBuffer(from: pool)
            _ = try fillFrame(buffer, index: index)
            try publisher.publish(buffer)
        }
        let taken = try await waiter.value
        #expect(taken.frames == [0, 1])
        #expect(taken.others == ["connected", "ended", "reconnected"])
    }
}

extension Subscriber.BlockingPoller.Result {
    var isTimedOut: Bool { if case .timedOut = self { true } else { false } }
    var isInterrupted: Bool { if case .interrupted = self { true } else { false } }
}
