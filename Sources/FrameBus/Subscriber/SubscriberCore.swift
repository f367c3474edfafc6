import Dispatch
import Foundation
import SampleBuffers
import Synchronization

/// Returns one frame to the publisher, once: when the frame's image buffer goes away, or when the frame is
/// replaced before anyone saw it.
final class ReleaseToken: Sendable {
    let sequence: UInt64
    let surfaceID: UInt64
    let generation: UInt64
    private let claimed = Atomic<Bool>(false)
    private weak let sender: SubscriberSender?

    init(sequence: UInt64, surfaceID: UInt64, generation: UInt64, sender: SubscriberSender) {
        self.sequence = sequence
        self.surfaceID = surfaceID
        self.generation = generation
        self.sender = sender
        sender.heldCount.add(1, ordering: .relaxed)
        sender.frameHeld(generation: generation)
    }

    /// Releases now (idempotent).
    func release(notDelivered: Bool = false) {
        guard !claimed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        sender?.heldCount.subtract(1, ordering: .relaxed)
        sender?.sendRelease(self, notDelivered: notDelivered)
    }

    deinit { release() }
}

/// The sending half of a subscriber: RELEASE and GOODBYE, from any thread. Its lock is a leaf (nothing is called
/// while it is held but non-blocking sends), so a frame released anywhere, even under the core's lock, can send.
final class SubscriberSender: Sendable {
    private struct State {
        var socket: Socket?
        var generation: UInt64 = 0
        /// Frames of the current connection not yet released (held by the consumer or waiting for it): what the
        /// publisher counts against `maximumHeldFrames`, less the releases it has not read yet.
        var connectionHeld = 0
        var outbox = SubscriberOutbox()
        var overflowed = false
        /// Version 3: the release ring (docs/PROTOCOL.md §9), and why it broke, if it did.
        var releaseRing: ReleaseRing?
        var ringFailure: String?
    }
    private let state = Mutex(State())
    let heldCount = Atomic<Int>(0)
    let doorbell: Doorbell

    init(doorbell: Doorbell) { self.doorbell = doorbell }

    func attach(_ socket: Socket, generation: UInt64, rings: RingChannel? = nil) {
        state.withLock {
            $0.socket = socket
            $0.generation = generation
            $0.connectionHeld = 0
            $0.outbox.removeAll()
            $0.overflowed = false
            $0.releaseRing = rings.map(ReleaseRing.init(channel:))
            $0.ringFailure = nil
        }
    }

    /// Why the release ring broke (the publisher made its head or wake-up socket invalid), if it did.
    var ringFailure: String? { state.withLock { $0.ringFailure } }

    /// A frame of connection `generation` is now held.
    func frameHeld(generation: UInt64) {
        state.withLock { if $0.generation == generation { $0.connectionHeld += 1 } }
    }

    /// Frames of the current connection not yet released.
    var connectionHeld: Int { state.withLock { $0.connectionHeld } }

    func detach() {
        state.withLock {
            $0.socket = nil
            $0.outbox.removeAll()
            $0.releaseRing = nil
        }
    }

    func sendRelease(_ token: ReleaseToken, notDelivered: Bool) {
        let message = WireMessage.release(
            WireRelease(
                sequence: token.sequence,
                surfaceID: token.surfaceID,
                flags: notDelivered ? WireRelease.notDeliveredFlag : 0
            )
        ).encoded()
        let viaRing = state.withLock { state -> Bool in
            guard state.generation == token.generation else { return false }
            state.connectionHeld -= 1
            // Version 3: into the release ring (a full ring, which an honest publisher never lets happen, falls back
            // to the socket, where a RELEASE is as valid).
            guard let ring = state.releaseRing, state.outbox.isEmpty, state.ringFailure == nil else { return false }
            switch ring.send(message) {
            case .sent: return true
            case .full: return false
            case .violation(let reason):
                state.ringFailure = reason
                return true
            }
        }
        if viaRing {
            if ringFailure != nil { doorbell.ring() }
            return
        }
        send(message, generation: token.generation)
    }

    /// Sends now, or queues behind earlier messages; a full outbox marks the connection for closing.
    func send(_ bytes: [UInt8], generation: UInt64? = nil) {
        let ring = state.withLock { state -> Bool in
            guard let socket = state.socket, generation == nil || generation == state.generation,
                !state.overflowed
            else { return false }
            if state.outbox.isEmpty, case .success(.sent) = socket.send(bytes) { return false }
            if !state.outbox.enqueue(bytes) {
                state.overflowed = true
                state.outbox.removeAll()
            }
            return true
        }
        if ring { doorbell.ring() }
    }

    var hasOutbound: Bool { state.withLock { !$0.outbox.isEmpty } }

    /// Whether the outbox overflowed (the publisher stopped reading) since the connection was attached.
    var hasOverflowed: Bool { state.withLock { $0.overflowed } }

    /// Sends what waited for room.
    func flush() {
        state.withLock { state in
            guard let socket = state.socket else { return }
            while let message = state.outbox.first {
                guard case .success(.sent) = socket.send(message) else { break }
                state.outbox.removeFirst()
            }
        }
    }
}

/// A frame waiting for the consumer.
struct PendingFrame: Sendable {
    var sample: SampleBuffer
    var token: ReleaseToken
    var publishTime: UInt64
    var bytesUsed: UInt64
}

/// The state a subscriber's connection thread, its consumers and its public API share.
final class SubscriberCore: Sendable {
    /// Proof that one iteration owns the events; freed when its iterator goes away.
    final class ConsumerClaim: Sendable {
        let id: UInt64
        private weak let core: SubscriberCore?

        init(id: UInt64, core: SubscriberCore) {
            self.id = id
            self.core = core
        }

        deinit { core?.releaseClaim(id) }
    }

    struct WeakDelegate {
        weak var value: (any SubscriberDelegate)?
    }

    /// Where a delegate's callbacks run.
    enum DeliveryTarget {
        /// Asynchronously on this queue: a second thread wakes for each event.
        case queue(DispatchQueue)
        /// On the connection thread, as soon as the event is read.
        case connectionThread

        func isSame(as other: DeliveryTarget) -> Bool {
            switch (self, other) {
            case (.queue(let a), .queue(let b)): a === b
            case (.connectionThread, .connectionThread): true
            default: false
            }
        }
    }

    enum Consumer {
        case none
        case iterator(claim: UInt64, waiter: CheckedContinuation<SubscriberEventQueue<PendingFrame>.Entry?, Never>?)
        case delegate(WeakDelegate, DeliveryTarget)
        /// A thread that takes events itself (``poll(claim:)``) and is told with `wake` that one may be there.
        case poller(claim: UInt64, wake: @Sendable () -> Void)
    }

    struct State {
        var queue: SubscriberEventQueue<PendingFrame>
        var consumer = Consumer.none
        /// A delivery pass (``deliverToDelegate(on:)``) is scheduled or running on some delegate's queue. At most one
        /// is, whatever the consumer became meanwhile, so that callbacks never overlap and stay in order: a delegate
        /// set (again) while a callback of the previous one still runs gets its events after that callback.
        var isDeliveryPassActive = false
        /// The active pass is to run on the connection thread, which has not started it yet (it was asked for from
        /// another thread: the doorbell woke the connection thread, which runs it in ``runConnectionThreadPass()``).
        var isConnectionThreadPassPending = false
        /// The connection thread has returned: a pass meant for it runs on whichever thread asks for it.
        var isConnectionThreadFinished = false
        var nextClaim: UInt64 = 1
        var isCancelled = false
        /// No event will follow the waiting ones (the stream ended for good, or it was cancelled).
        var isFinished = false
        var session: Subscriber.Session?
        /// The current connection (also during its handshake), so that ``cancel()`` can close it at once.
        var socket: Socket?
        var isConnected = false
        weak var owner: Subscriber?
        var statistics = FrameStatistics()
        var latency = LatencyRecorder()
    }

    let configuration: Subscriber.Configuration
    let state: Mutex<State>
    let doorbell: Doorbell
    /// The connection thread, once it runs.
    let connectionThread = Mutex<pthread_t?>(nil)

    /// Whether the caller runs on this subscriber's connection thread.
    var isOnConnectionThread: Bool {
        guard let thread = connectionThread.withLock({ $0 }) else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }
    let sender: SubscriberSender
    /// Runs tasks on the connection thread (``Subscriber/executor``).
    let executor: SubscriberExecutor

    init(configuration: Subscriber.Configuration) throws(FrameBusError) {
        self.configuration = configuration
        self.doorbell = try Doorbell()
        self.sender = SubscriberSender(doorbell: doorbell)
        self.executor = SubscriberExecutor(doorbell: doorbell)
        self.state = Mutex(State(queue: SubscriberEventQueue(depth: configuration.delivery.depth)))
    }

    /// Starts the connection thread. It holds the core (not the subscriber) and ends soon after ``cancel()``.
    func start(owner: Subscriber) {
        state.withLock { $0.owner = owner }
        let thread = Thread { [self] in
            connectionThread.withLock { $0 = pthread_self() }
            executor.attachCurrentThread()
            SubscriberConnection(core: self).run()
        }
        thread.name = "framebus.subscriber"
        thread.stackSize = 1 << 20
        thread.start()
    }

    var session: Subscriber.Session? { state.withLock { $0.session } }
    var isConnected: Bool { state.withLock { $0.isConnected } }
    var isCancelled: Bool { state.withLock { $0.isCancelled } }

    var statistics: FrameStatistics {
        let held = sender.heldCount.load(ordering: .relaxed)
        return state.withLock { state in
            var statistics = state.statistics
            statistics.heldNow = held
            statistics.queueDepth = state.queue.frameCount
            statistics.latency = state.latency.summary
            return statistics
        }
    }

    // MARK: From the connection thread

    /// A connection is being set up (before its handshake).
    func connecting(_ socket: Socket) -> Bool {
        state.withLock { state in
            guard !state.isCancelled else { return false }
            state.socket = socket
            return true
        }
    }

    /// Whether the connection thread should wait before reconnecting (the consumer has not caught up).
    var holdsReconnect: Bool { state.withLock { $0.queue.isHoldingConnectionEvents } }

    func established(_ session: Subscriber.Session, isReconnect: Bool) {
        enqueue { state in
            state.session = session
            state.isConnected = true
            // Queue mode discards nothing (docs/PROTOCOL.md §7.2): every frame the publisher lets this subscriber
            // hold may wait, and the publisher's DROP outOfBuffers is what bounds the queue.
            if case .queue = configuration.delivery { state.queue.raiseDepth(to: session.maximumHeldFrames) }
            state.queue.append(connected: session, isReconnect: isReconnect)
            return []
        }
    }

    func deliver(_ frame: PendingFrame, sequence: UInt64) {
        enqueue { state in
            let replaced = state.queue.append(frame: frame, sequence: sequence)
            state.statistics.dropped[.frameWasLate, default: 0] = Saturating.add(
                state.statistics.dropped[.frameWasLate, default: 0],
                UInt64(replaced.count)
            )
            return replaced
        }
    }

    func report(_ drop: SubscriberDrop) {
        enqueue { state in
            state.statistics.dropped[drop.reason, default: 0] = Saturating.add(
                state.statistics.dropped[drop.reason, default: 0],
                drop.frameCount
            )
            state.queue.append(drop: drop)
            return []
        }
    }

    /// The connection ended; `isFinal` when no other will follow.
    func connectionEnded(_ error: FrameBusError, isFinal: Bool) {
        enqueue { state in
            state.socket = nil
            state.isConnected = false
            guard !state.isCancelled else { return [] }
            state.queue.append(ended: error)
            if isFinal { state.isFinished = true }
            return []
        }
    }

    /// Changes the queue under the lock, then wakes the consumer and releases replaced frames outside it.
    private func enqueue(_ body: (inout State) -> [PendingFrame]) {
        let (replaced, wake) = state.withLock { state in
            let replaced = body(&state)
            return (replaced, wakeConsumer(&state))
        }
        for frame in replaced { frame.token.release(notDelivered: true) }
        perform(wake, onConnectionThread: true)
    }

    // MARK: Consumers

    enum Wake {
        case none
        case resume(
            CheckedContinuation<SubscriberEventQueue<PendingFrame>.Entry?, Never>,
            SubscriberEventQueue<PendingFrame>.Entry?
        )
        case deliver(DeliveryTarget)
        case notify(@Sendable () -> Void)
    }

    private func wakeConsumer(_ state: inout State) -> Wake {
        switch state.consumer {
        case .none, .iterator(_, waiter: nil):
            return .none
        case .poller(_, let wake):
            return state.queue.isEmpty && !state.isFinished && !state.isCancelled ? .none : .notify(wake)
        case .iterator(let claim, .some(let waiter)):
            if let entry = take(&state) {
                state.consumer = .iterator(claim: claim, waiter: nil)
                return .resume(waiter, entry)
            }
            if state.isFinished || state.isCancelled {
                state.consumer = .iterator(claim: claim, waiter: nil)
                return .resume(waiter, nil)
            }
            return .none
        case .delegate(_, let target):
            guard !state.isDeliveryPassActive, !state.queue.isEmpty, !state.isCancelled else { return .none }
            state.isDeliveryPassActive = true
            return .deliver(target)
        }
    }

    /// `onConnectionThread`: whether the caller is the connection thread (enqueueing what it read), which runs a
    /// connection-thread pass at once; any other thread hands it over with the doorbell.
    private func perform(_ wake: Wake, onConnectionThread: Bool) {
        switch wake {
        case .none: break
        case .resume(let waiter, let entry):
            // An iteration under `withTaskExecutorPreference(executor)` resumes here, on this thread, at once.
            if onConnectionThread {
                executor.handOver { waiter.resume(returning: entry) }
            } else {
                waiter.resume(returning: entry)
            }
        case .notify(let wake): wake()
        case .deliver(.queue(let queue)): queue.async { self.deliverToDelegate(on: .queue(queue)) }
        case .deliver(.connectionThread):
            let runsHere =
                onConnectionThread
                || state.withLock { state in
                    if !state.isConnectionThreadFinished { state.isConnectionThreadPassPending = true }
                    return state.isConnectionThreadFinished
                }
            if runsHere { deliverToDelegate(on: .connectionThread) } else { doorbell.ring() }
        }
    }

    /// Called by the connection thread as it returns: a pass handed over from now on runs where it is asked for.
    func connectionThreadFinished() {
        state.withLock { $0.isConnectionThreadFinished = true }
        runConnectionThreadPass()
        executor.finish()
    }

    /// Called by the connection thread whenever it wakes: runs a delivery pass another thread handed over.
    func runConnectionThreadPass() {
        let pending = state.withLock { state in
            defer { state.isConnectionThreadPassPending = false }
            return state.isConnectionThreadPassPending
        }
        if pending { deliverToDelegate(on: .connectionThread) }
        executor.runJobs()
    }

    /// Takes the next event for a consumer, recording delivery statistics for a frame.
    private func take(_ state: inout State) -> SubscriberEventQueue<PendingFrame>.Entry? {
        guard let entry = state.queue.popFirst() else { return nil }
        if case .frame(let frame, _) = entry {
            state.latency.record(nanoseconds: ProcessInfoShim.monotonicNanoseconds() &- frame.publishTime)
            state.statistics.delivered += 1
            state.statistics.bytesDelivered = Saturating.add(state.statistics.bytesDelivered, frame.bytesUsed)
        }
        return entry
    }

    func claim() throws(FrameBusError) -> ConsumerClaim {
        try claim("Subscriber.events") { .iterator(claim: $0, waiter: nil) }
    }

    /// Makes `consumer(id)` the consumer if there is none; otherwise throws
    /// ``FrameBusError/Code-swift.struct/concurrentConsumer``.
    private func claim(_ operation: String, as consumer: (UInt64) -> Consumer) throws(FrameBusError) -> ConsumerClaim {
        let id: UInt64? = state.withLock { state in
            guard case .none = state.consumer else { return nil }
            let id = state.nextClaim
            state.nextClaim += 1
            state.consumer = consumer(id)
            return id
        }
        guard let id else {
            throw FrameBusError(
                .concurrentConsumer,
                operation,
                message: "another iteration or a delegate already consumes this subscriber's events"
            )
        }
        return ConsumerClaim(id: id, core: self)
    }

    func releaseClaim(_ id: UInt64) {
        let waiter = state.withLock { state -> CheckedContinuation<SubscriberEventQueue<PendingFrame>.Entry?, Never>? in
            if case .poller(id, _) = state.consumer {
                state.consumer = .none
                return nil
            }
            guard case .iterator(id, let waiter) = state.consumer else { return nil }
            state.consumer = .none
            return waiter
        }
        waiter?.resume(returning: nil)
    }

    /// What ``poll(claim:)`` found.
    enum PollResult {
        case event(SubscriberEvent)
        /// Nothing waits now; `wake` will be called when something may.
        case empty
        /// No event will come (the stream ended for good, or the subscriber was cancelled).
        case finished
    }

    /// Claims the events for a thread that takes them itself with ``poll(claim:)``, without a task or a queue in
    /// between: `wake` is called (on the connection thread, or on whichever thread cancels) whenever an event may
    /// be waiting; it must only signal the polling thread (it runs with no lock of the subscriber held, but
    /// delays reading while it runs). Fails as ``claim()`` does when another consumer has the events.
    func claimPoller(wake: @escaping @Sendable () -> Void) throws(FrameBusError) -> ConsumerClaim {
        try claim("Subscriber.makePoller") { .poller(claim: $0, wake: wake) }
    }

    /// Takes the next waiting event, never waiting itself.
    func poll(claim: ConsumerClaim) -> PollResult {
        let entry: SubscriberEventQueue<PendingFrame>.Entry?? = state.withLock { state in
            guard case .poller(claim.id, _) = state.consumer, !state.isCancelled else { return .some(nil) }
            if let entry = take(&state) { return .some(entry) }
            return state.isFinished ? .some(nil) : nil
        }
        switch entry {
        case .some(.some(let entry)): return .event(Self.event(entry))
        case .some(.none): return .finished
        case .none: return .empty
        }
    }

    func nextEvent(claim: ConsumerClaim) async -> SubscriberEvent? {
        let entry = await withTaskCancellationHandler {
            await withCheckedContinuation {
                (continuation: CheckedContinuation<SubscriberEventQueue<PendingFrame>.Entry?, Never>) in
                let immediate: SubscriberEventQueue<PendingFrame>.Entry?? = state.withLock { state in
                    guard case .iterator(claim.id, nil) = state.consumer else { return .some(nil) }
                    // Checked under the lock that the cancellation handler takes, so a cancellation is never
                    // missed: either it ran before (and the task is marked cancelled) or it will find the waiter.
                    if Task.isCancelled || state.isCancelled { return .some(nil) }
                    if let entry = take(&state) { return .some(entry) }
                    if state.isFinished { return .some(nil) }
                    state.consumer = .iterator(claim: claim.id, waiter: continuation)
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock {
                state -> CheckedContinuation<SubscriberEventQueue<PendingFrame>.Entry?, Never>? in
                guard case .iterator(claim.id, let waiter?) = state.consumer else { return nil }
                state.consumer = .iterator(claim: claim.id, waiter: nil)
                return waiter
            }
            waiter?.resume(returning: nil)
        }
        return entry.map(Self.event)
    }

    private static func event(_ entry: SubscriberEventQueue<PendingFrame>.Entry) -> SubscriberEvent {
        switch entry {
        case .connected(let session, let isReconnect): isReconnect ? .reconnected(session) : .connected(session)
        case .frame(let frame, _): .frame(frame.sample)
        case .dropped(let drop): .dropped(drop)
        case .ended(let error): .ended(error)
        }
    }

    func setDelegate(_ delegate: (any SubscriberDelegate)?, target: DeliveryTarget) {
        let (waiter, wake) = state.withLock {
            state -> (CheckedContinuation<SubscriberEventQueue<PendingFrame>.Entry?, Never>?, Wake) in
            var waiter: CheckedContinuation<SubscriberEventQueue<PendingFrame>.Entry?, Never>?
            if case .iterator(_, let pending) = state.consumer { waiter = pending }
            if let delegate {
                state.consumer = .delegate(WeakDelegate(value: delegate), target)
            } else if case .delegate = state.consumer {
                state.consumer = .none
            }
            return (waiter, wakeConsumer(&state))
        }
        waiter?.resume(returning: nil)
        perform(wake, onConnectionThread: false)
    }

    /// Runs on the delegate's queue: hands waiting events to the delegate one by one, never holding the lock
    /// during a callback. If the delegate was set with another queue meanwhile, the pass moves there (it stays the
    /// only one), so every callback runs on the queue its delegate was set with.
    private func deliverToDelegate(on current: DeliveryTarget) {
        enum Step {
            case call(SubscriberEventQueue<PendingFrame>.Entry, any SubscriberDelegate, Subscriber)
            case move(DeliveryTarget)
            case stop
        }
        while true {
            let step: Step = state.withLock { state in
                guard case .delegate(let weak, let target) = state.consumer else {
                    state.isDeliveryPassActive = false
                    return .stop
                }
                // A pass for a connection thread that has ended stays where it is.
                let stays: Bool
                if case .connectionThread = target { stays = state.isConnectionThreadFinished } else { stays = false }
                guard target.isSame(as: current) || stays else {
                    if case .connectionThread = target { state.isConnectionThreadPassPending = true }
                    return .move(target)
                }
                guard let delegate = weak.value, let owner = state.owner, !state.isCancelled,
                    let entry = take(&state)
                else {
                    state.isDeliveryPassActive = false
                    if weak.value == nil { state.consumer = .none }
                    return .stop
                }
                return .call(entry, delegate, owner)
            }
            switch step {
            case .stop:
                return
            case .move(.queue(let queue)):
                queue.async { self.deliverToDelegate(on: .queue(queue)) }
                return
            case .move(.connectionThread):
                doorbell.ring()
                return
            case .call(.connected(let session, _), let delegate, let owner):
                delegate.subscriber(owner, didConnect: session)
            case .call(.frame(let frame, _), let delegate, let owner):
                delegate.subscriber(owner, didOutput: frame.sample)
            case .call(.dropped(let drop), let delegate, let owner):
                delegate.subscriber(owner, didDrop: Self.marker(for: drop))
            case .call(.ended(let error), let delegate, let owner):
                delegate.subscriber(owner, didEndWith: error)
            }
        }
    }

    /// The drop marker a delegate gets: a sample buffer without an image.
    static func marker(for drop: SubscriberDrop) -> SampleBuffer {
        var attachments = SampleAttachments()
        attachments[.busSequenceNumber] = .integer(Int64(bitPattern: drop.sequences.lowerBound))
        attachments[.busLastSequenceNumber] = .integer(Int64(bitPattern: drop.sequences.upperBound))
        attachments[.busDroppedFrameCount] = .integer(Int64(clamping: drop.frameCount))
        return SampleBuffer(
            droppedFrameReason: drop.reason,
            info: drop.reason == .discontinuity ? .upstreamLoss : nil,
            timing: .invalid,
            attachments: attachments
        )
    }

    // MARK: Cancelling

    func cancel() {
        var pollerWake: (@Sendable () -> Void)?
        let (socket, waiter, frames) = state.withLock {
            state -> (Socket?, CheckedContinuation<SubscriberEventQueue<PendingFrame>.Entry?, Never>?, [PendingFrame])
            in
            guard !state.isCancelled else { return (nil, nil, []) }
            state.isCancelled = true
            state.isFinished = true
            state.isConnected = false
            var waiter: CheckedContinuation<SubscriberEventQueue<PendingFrame>.Entry?, Never>?
            if case .iterator(let claim, let pending) = state.consumer {
                waiter = pending
                state.consumer = .iterator(claim: claim, waiter: nil)
            }
            if case .poller(_, let wake) = state.consumer { pollerWake = wake }
            defer { state.socket = nil }
            return (state.socket, waiter, state.queue.removeAllFrames())
        }
        // GOODBYE releases everything we hold at the publisher; nothing is sent after it.
        sender.send(WireMessage.goodbye(reason: 0).encoded())
        sender.detach()
        socket?.shutdown()
        for frame in frames { frame.token.release(notDelivered: true) }
        waiter?.resume(returning: nil)
        pollerWake?()
        doorbell.ring()
    }
}
