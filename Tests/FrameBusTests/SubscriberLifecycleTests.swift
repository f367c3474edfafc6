import Foundation
import Glibc
import Logging
import Testing
import TestSupport

@testable import FrameBus

/// Creating, iterating, delegating and cancelling a subscriber (items 4 and 8, and what an async consumer needs).
@Suite(.timeLimit(.minutes(5))) struct SubscriberLifecycleTests {
    static let format = PixelFormat.yuv420BiPlanarVideoRange8

    func makePool() throws -> PixelBufferPool {
        try PixelBufferPool(attributes: .init(width: 64, height: 48, pixelFormat: Self.format, allocationThreshold: 8))
    }

    func publishOne(_ publisher: Publisher, pool: PixelBufferPool, index: Int = 0) throws {
        let buffer = try publisher.makePixelBuffer(from: pool)
        _ = try fillFrame(buffer, index: index)
        try publisher.publish(buffer)
    }

    /// The next event that is not a drop, or nil.
    func nextEvent(_ iterator: inout Subscriber.Events.Iterator) async throws -> SubscriberEvent? {
        while let event = try await iterator.next() {
            if case .dropped = event { continue }
            if case .systemPressureChanged = event { continue }
            return event
        }
        return nil
    }

    @Test(arguments: [false, true])
    func aSubscriberMadeBeforeItsPublisherWaitsForIt(reconnects: Bool) async throws {
        let path = temporaryBusPath("early")
        var configuration = Subscriber.Configuration(path: path, acceptedFormats: [Self.format])
        configuration.reconnects = reconnects
        configuration.connectTimeout = .seconds(60)
        // No publisher yet: the subscriber is made anyway, without blocking, and not connected.
        let subscriber = try Subscriber(configuration: configuration)
        defer { subscriber.cancel() }
        #expect(!subscriber.isConnected)
        #expect(subscriber.session == nil)

        let publisher = try Publisher(configuration: .init(path: path, formats: [Self.format]))
        defer { publisher.stop() }
        var events = subscriber.events.makeAsyncIterator()
        guard case .connected(let session)? = try await nextEvent(&events) else {
            Issue.record("no connected event")
            return
        }
        #expect(session.format == Self.format)
        #expect(subscriber.session == session)
        try publishOne(publisher, pool: try makePool())
        guard case .frame(let frame)? = try await nextEvent(&events) else {
            Issue.record("no frame")
            return
        }
        #expect(frame.busSequenceNumber == 0)
    }

    @Test func withoutAPublisherTheStreamEndsWithTimedOut() async throws {
        var configuration = Subscriber.Configuration(path: temporaryBusPath("nobody"), acceptedFormats: [Self.format])
        configuration.connectTimeout = .milliseconds(200)
        let subscriber = try Subscriber(configuration: configuration)
        var events: [SubscriberEvent] = []
        for try await event in subscriber.events { events.append(event) }
        guard events.count == 1, case .ended(let error) = events[0] else {
            Issue.record("\(events)")
            return
        }
        #expect(error.code == .timedOut)
        // The frames view throws the same error.
        await #expect(throws: FrameBusError.self) {
            let fresh = try Subscriber(configuration: configuration)
            for try await _ in fresh.frames {}
        }
    }

    @Test func aPublisherRunningAsAUserWeDoNotAllowIsRefusedBeforeTheHandshake() async throws {
        let path = temporaryBusPath("impostor")
        let publisher = try Publisher(configuration: .init(path: path, formats: [Self.format]))
        defer { publisher.stop() }
        var configuration = Subscriber.Configuration(path: path, acceptedFormats: [Self.format])
        configuration.allowedPublisherUserIDs = [getuid() &+ 4242]
        let subscriber = try Subscriber(configuration: configuration)
        var events: [SubscriberEvent] = []
        for try await event in subscriber.events { events.append(event) }
        guard events.count == 1, case .ended(let error) = events[0] else {
            Issue.record("\(events)")
            return
        }
        #expect(error.code == .permissionDenied)
        #expect(error.message?.contains("uid \(getuid())") == true)
        // It never said HELLO, so the publisher never had a subscriber.
        #expect(publisher.subscriberCount == 0)
    }

    /// Collects log messages (a swift-log handler).
    struct CollectingLogHandler: LogHandler {
        final class Box: @unchecked Sendable {
            // @unchecked: `messages` is only touched under `lock`.
            let lock = NSLock()
            var messages: [String] = []
        }
        let box: Box
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            box.lock.withLock { box.messages.append("\(event.message)") }
        }
    }

    @Test func aPublisherThatFailsTheSameWayOnEveryReconnectIsLoggedOnce() async throws {
        let path = temporaryBusPath("repeat")
        let publisher = try Publisher(configuration: .init(path: path, formats: [Self.format]))
        defer { publisher.stop() }
        let box = CollectingLogHandler.Box()
        var configuration = Subscriber.Configuration(
            path: path,
            acceptedFormats: [Self.format],
            logger: Logger(label: "test") { _ in CollectingLogHandler(box: box) }
        )
        configuration.allowedPublisherUserIDs = [getuid() &+ 4242]
        configuration.reconnects = true
        configuration.reconnectInterval = .milliseconds(1)
        let subscriber = try Subscriber(configuration: configuration)
        defer { subscriber.cancel() }
        var refusals = 0
        for try await event in subscriber.events {
            guard case .ended(let error) = event else { continue }
            #expect(error.code == .permissionDenied)
            refusals += 1
            if refusals == 30 { break }
        }
        #expect(refusals == 30)
        // Once, plus at most a summary and a repeat per 10 s on a very slow machine; without the limit, 30.
        #expect(box.lock.withLock { box.messages.count } < 10, "\(box.lock.withLock { box.messages })")
    }

    @Test func theDefaultAllowsOnlyOurOwnUser() throws {
        let configuration = Subscriber.Configuration(path: "/unused", acceptedFormats: [Self.format])
        #expect(configuration.allowedPublisherUserIDs == [getuid()])
        var none = configuration
        none.allowedPublisherUserIDs = []
        #expect(throws: FrameBusError.self) { _ = try Subscriber(configuration: none) }
    }

    @Test func nextInAnAlreadyCancelledTaskReturnsNil() async throws {
        var configuration = Subscriber.Configuration(
            path: temporaryBusPath("cancelled"),
            acceptedFormats: [Self.format]
        )
        configuration.reconnects = true  // nothing would ever end the stream by itself
        let subscriber = try Subscriber(configuration: configuration)
        defer { subscriber.cancel() }
        let task = Task {
            while !Task.isCancelled { await Task.yield() }
            var noFrame = false
            do {
                var frames = subscriber.frames.makeAsyncIterator()
                noFrame = try await frames.next() == nil
            }
            var events = subscriber.events.makeAsyncIterator()
            return (noFrame, try await events.next() == nil)
        }
        task.cancel()
        let (noFrame, noEvent) = try await task.value
        #expect(noFrame)
        #expect(noEvent)
    }

    @Test func cancellingTheWaitingTaskEndsItsIteration() async throws {
        var configuration = Subscriber.Configuration(path: temporaryBusPath("waiting"), acceptedFormats: [Self.format])
        configuration.reconnects = true
        let subscriber = try Subscriber(configuration: configuration)
        defer { subscriber.cancel() }
        let task = Task { () async throws -> Bool in
            var events = subscriber.events.makeAsyncIterator()
            return try await events.next() == nil
        }
        #expect(await eventually { subscriber.hasWaitingConsumer })
        task.cancel()
        #expect(try await task.value)
    }

    @Test func aSecondConcurrentIterationFailsAndTheFirstGoesOn() async throws {
        let path = temporaryBusPath("second")
        let publisher = try Publisher(configuration: .init(path: path, formats: [Self.format]))
        defer { publisher.stop() }
        let subscriber = try Subscriber(
            configuration: .init(path: path, acceptedFormats: [Self.format], delivery: .queue(depth: 4))
        )
        defer { subscriber.cancel() }
        let first = Task { () async throws -> UInt64? in
            for try await frame in subscriber.frames { return frame.busSequenceNumber }
            return nil
        }
        #expect(await eventually { subscriber.hasWaitingConsumer })
        var second = subscriber.frames.makeAsyncIterator()
        do {
            _ = try await second.next()
            Issue.record("the second iteration did not fail")
        } catch {
            #expect(error.code == .concurrentConsumer)
        }
        var events = subscriber.events.makeAsyncIterator()
        await #expect(throws: FrameBusError.self) { _ = try await events.next() }
        // The first iteration was not ended by the second: it gets the frame.
        #expect(await eventually { publisher.subscriberCount == 1 })
        try publishOne(publisher, pool: try makePool())
        #expect(try await first.value == 0)
        // Once the first loop is over, a new one may start.
        var third = subscriber.events.makeAsyncIterator()
        let next = Task { try await third.next() }
        subscriber.cancel()
        _ = try await next.value
    }

    @Test func cancelIsIdempotentAndEndsIterationAndTheConnection() async throws {
        let path = temporaryBusPath("cancel")
        let publisher = try Publisher(configuration: .init(path: path, formats: [Self.format]))
        defer { publisher.stop() }
        let subscriber = try Subscriber(configuration: .init(path: path, acceptedFormats: [Self.format]))
        #expect(await eventually { publisher.subscriberCount == 1 })
        let iteration = Task { () async throws -> Int in
            var count = 0
            for try await _ in subscriber.frames { count += 1 }
            return count
        }
        #expect(await eventually { subscriber.hasWaitingConsumer })
        subscriber.cancel()
        subscriber.cancel()
        #expect(try await iteration.value == 0)
        #expect(!subscriber.isConnected)
        #expect(await eventually { publisher.subscriberCount == 0 })
        subscriber.cancel()
    }

    final class Owner: SubscriberDelegate, @unchecked Sendable {
        // @unchecked: `subscriber` is set once, before any callback can run; `frames` is guarded by `lock`.
        var subscriber: Subscriber?
        let lock = NSLock()
        var frames = 0

        func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {
            lock.withLock { frames += 1 }
        }
    }

    final class BlockingDelegate: SubscriberDelegate, @unchecked Sendable {
        // @unchecked: the semaphores are thread-safe; nothing else is mutable.
        let entered = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)

        func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {
            entered.signal()
            proceed.wait()
        }
    }

    @Test func cancelAndDeinitDoNotWaitForADelegateCallbackThatIsBlocked() async throws {
        let path = temporaryBusPath("blocked")
        let publisher = try Publisher(configuration: .init(path: path, formats: [Self.format]))
        defer { publisher.stop() }
        let delegate = BlockingDelegate()
        var subscriber: Subscriber? = try Subscriber(configuration: .init(path: path, acceptedFormats: [Self.format]))
        subscriber?.setDelegate(delegate, queue: DispatchQueue(label: "blocked"))
        #expect(await eventually { publisher.subscriberCount == 1 })
        try publishOne(publisher, pool: try makePool())
        #expect(await signalled(delegate.entered, within: 20))
        // The callback is blocked until we let it go, which we do only after these return: if either waited for
        // the delegate's queue, this test would never finish.
        subscriber?.cancel()
        subscriber?.cancel()
        subscriber = nil
        delegate.proceed.signal()
        #expect(await eventually { publisher.subscriberCount == 0 })
    }

    @Test func anOwnerThatIsItsSubscribersDelegateIsFreed() throws {
        weak var weakOwner: Owner?
        weak var weakSubscriber: Subscriber?
        do {
            let owner = Owner()
            let subscriber = try Subscriber(
                configuration: .init(path: temporaryBusPath("owner"), acceptedFormats: [Self.format])
            )
            owner.subscriber = subscriber
            subscriber.setDelegate(owner, queue: DispatchQueue(label: "owner"))
            weakOwner = owner
            weakSubscriber = subscriber
        }
        #expect(weakOwner == nil)
        #expect(weakSubscriber == nil)
    }

    @Test func aDelegateOnTheMainQueueGetsFramesAndCancelFromMainDoesNotDeadlock() async throws {
        let path = temporaryBusPath("main")
        let publisher = try Publisher(configuration: .init(path: path, formats: [Self.format]))
        defer { publisher.stop() }
        let subscriber = try Subscriber(
            configuration: .init(path: path, acceptedFormats: [Self.format], delivery: .queue(depth: 8))
        )
        let owner = Owner()
        subscriber.setDelegate(owner, queue: .main)
        #expect(await eventually { publisher.subscriberCount == 1 })
        let pool = try makePool()
        // One at a time: with a pool of 8 and 16 possible subscribers, each may hold one frame (its share).
        for index in 0..<3 {
            try publishOne(publisher, pool: pool, index: index)
            #expect(await eventually { owner.lock.withLock { owner.frames } == index + 1 })
            // The next frame only once the publisher has this one back (else it is dropped for our share).
            #expect(await eventually { publisher.heldFrameCount == 0 })
        }
        #expect(owner.lock.withLock { owner.frames } == 3)
        // Cancelling on the main queue while more frames arrive for it must not wait for the main queue.
        for index in 3..<6 { try publishOne(publisher, pool: pool, index: index) }
        await MainActor.run {
            subscriber.cancel()
            subscriber.cancel()
        }
        #expect(!subscriber.isConnected)
    }
}

@Suite(.timeLimit(.minutes(5))) struct SocketPathTests {
    @Test func theDefaultLivesInTheUsersRuntimeDirectory() throws {
        let environment = ["XDG_RUNTIME_DIR": "/run/user/1000"]
        #expect(try SocketPath.path(name: "camera", environment: environment) == "/run/user/1000/camera.sock")
        // The publisher's default and ours meet.
        #expect(try SocketPath.path(name: "framebus", environment: environment) == "/run/user/1000/framebus.sock")
    }

    @Test(arguments: ["", "../camera", "a/b", ".hidden", "bell\u{07}", String(repeating: "x", count: 65)])
    func badStreamNamesAreRefused(_ name: String) {
        #expect(throws: FrameBusError.self) {
            _ = try SocketPath.path(name: name, environment: ["XDG_RUNTIME_DIR": "/run/user/1"])
        }
    }

    @Test func itIsTheFramebusSocketInTheRuntimeDirectory() throws {
        guard let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else {
            // Without one, the private fallback (SocketPathFallbackTests).
            #expect(try SocketPath.default().hasSuffix("/framebus-\(getuid())/framebus.sock"))
            return
        }
        #expect(try SocketPath.default() == runtime + "/framebus.sock")
    }
}

extension Subscriber {
    /// Whether an iteration is suspended waiting for the next event (for tests that must act while it waits).
    var hasWaitingConsumer: Bool {
        core.state.withLock { $0.consumers.hasWaitingIterator }
    }
}
