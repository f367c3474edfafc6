import Dispatch
import Foundation
import SampleBuffers
import Synchronization

/// A frame waiting for the consumer.
struct PendingFrame: Sendable {
    var sample: SampleBuffer
    var token: ReleaseToken
    var publishTime: UInt64
    var bytesUsed: UInt64
}

/// The state a subscriber's connection thread, its consumers and its public API share: the IO and locking layer
/// around ``SubscriberConsumerStateMachine``. Every consumer event runs the machine under the lock and carries out
/// the action it returns after the lock is released (resuming a continuation, calling a poller's `wake`, a delegate's
/// callbacks, `DispatchQueue.async`, the doorbell, releasing frames).
final class SubscriberCore: Sendable {
    typealias Waiter = CheckedContinuation<SubscriberEventQueue<PendingFrame>.Entry?, Never>
    typealias Consumers = SubscriberConsumerStateMachine<PendingFrame, Waiter>

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

    struct State {
        var consumers: Consumers
        var session: Subscriber.Session?
        /// The publisher's last STATUS on the current connection (nil before one, and after it ends).
        var publisherStatus: PublisherStatus?
        /// The current connection (also during its handshake), so that ``cancel()`` can close it at once.
        var socket: Socket?
        var isConnected = false
        weak var owner: Subscriber?
        var statistics = FrameStatistics()
        var latency = LatencyRecorder()

        /// Records delivery statistics for an entry the machine handed to a consumer.
        mutating func taken(_ entry: Consumers.Entry?) {
            guard case .frame(let frame, _) = entry else { return }
            latency.record(nanoseconds: ProcessInfoShim.monotonicNanoseconds() &- frame.publishTime)
            statistics.delivered += 1
            statistics.bytesDelivered = Saturating.add(statistics.bytesDelivered, frame.bytesUsed)
        }

        mutating func taken(_ wake: Consumers.WakeAction) {
            if case .resume(_, let entry) = wake { taken(entry) }
        }
    }

    let configuration: Subscriber.Configuration
    let state: Mutex<State>
    let doorbell: Doorbell
    /// How the connection thread slept and woke (written by it only; read by anyone).
    let wakeUpCounts = WakeUpCounters()
    /// The connection thread, once it runs.
    let connectionThread = Mutex<pthread_t?>(nil)
    /// The connection thread's kernel id (`gettid`), once it runs; 0 before (tests read its scheduler slice).
    let connectionThreadID = Atomic<Int32>(0)
    /// Delegate calls with a frame made by a connection-thread delivery pass: the connection thread compares it
    /// around each delivery to learn whether the frame's consumer runs there
    /// (``Subscriber/Configuration/connectionThreadSlice``).
    let framesConsumedOnConnectionThread = Atomic<UInt64>(0)

    /// Whether the caller runs on this subscriber's connection thread.
    var isOnConnectionThread: Bool {
        guard let thread = connectionThread.withLock({ $0 }) else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }
    let sender: SubscriberSender
    /// Runs tasks on the connection thread (``Subscriber/executor``).
    let executor: SubscriberExecutor
    /// Who runs the connection loop: the connection thread, or a caller waiting in a ``Subscriber/BlockingPoller``.
    let leadership = ConnectionLeadership()

    init(configuration: Subscriber.Configuration) throws(FrameBusError) {
        self.configuration = configuration
        self.doorbell = try Doorbell()
        self.sender = SubscriberSender(doorbell: doorbell)
        self.executor = SubscriberExecutor(doorbell: doorbell)
        self.state = Mutex(State(consumers: Consumers(depth: configuration.delivery.depth)))
    }

    /// Starts the connection thread. It holds the core (not the subscriber) and ends soon after ``cancel()``.
    func start(owner: Subscriber) {
        state.withLock { $0.owner = owner }
        let thread = Thread { [self] in
            connectionThread.withLock { $0 = pthread_self() }
            connectionThreadID.store(Syscall.currentThreadID, ordering: .relaxed)
            executor.attachCurrentThread()
            SubscriberConnection(core: self).run()
        }
        thread.name = "framebus.subscriber"
        thread.stackSize = 1 << 20
        thread.start()
    }

    var session: Subscriber.Session? { state.withLock { $0.session } }
    var publisherStatus: PublisherStatus? { state.withLock { $0.publisherStatus } }
    var isConnected: Bool { state.withLock { $0.isConnected } }
    var isCancelled: Bool { state.withLock { $0.consumers.isCancelled } }

    var statistics: FrameStatistics {
        let held = sender.heldCount.load(ordering: .relaxed)
        return state.withLock { state in
            var statistics = state.statistics
            statistics.heldNow = held
            statistics.queueDepth = state.consumers.queue.frameCount
            statistics.latency = state.latency.summary
            return statistics
        }
    }

    // MARK: From the connection thread

    /// A connection is being set up (before its handshake).
    func connecting(_ socket: Socket) -> Bool {
        state.withLock { state in
            guard !state.consumers.isCancelled else { return false }
            state.socket = socket
            return true
        }
    }

    /// Whether the connection thread should wait before reconnecting (the consumer has not caught up).
    var holdsReconnect: Bool { state.withLock { $0.consumers.queue.isHoldingConnectionEvents } }

    func established(_ session: Subscriber.Session, isReconnect: Bool) {
        let wake = state.withLock { state in
            state.session = session
            state.isConnected = true
            // Queue mode discards nothing (docs/PROTOCOL.md §7.2): every frame the publisher lets this subscriber
            // hold may wait, and the publisher's DROP outOfBuffers is what bounds the queue.
            let depth: Int? = if case .queue = configuration.delivery { session.maximumHeldFrames } else { nil }
            let wake = state.consumers.connected(
                session,
                isReconnect: isReconnect,
                raisingDepthTo: depth,
                onConnectionThread: true
            )
            state.taken(wake)
            return wake
        }
        perform(wake, onConnectionThread: true)
    }

    /// Hands a frame to the consumers (on the connection thread). Returns whether its consumer ran right here: a
    /// delegate on the connection thread, or an iteration under ``executor`` (its jobs ran in the hand-over).
    @discardableResult
    func deliver(_ frame: PendingFrame, sequence: UInt64) -> Bool {
        let calls = framesConsumedOnConnectionThread.load(ordering: .relaxed)
        let jobs = executor.jobsRun.load(ordering: .relaxed)
        let (released, wake) = state.withLock { state in
            let (released, late, wake) = state.consumers.frame(frame, sequence: sequence, onConnectionThread: true)
            state.statistics.dropped[.frameWasLate, default: 0] = Saturating.add(
                state.statistics.dropped[.frameWasLate, default: 0],
                UInt64(late)
            )
            state.taken(wake)
            return (released, wake)
        }
        for frame in released { frame.token.release(notDelivered: true) }
        perform(wake, onConnectionThread: true)
        return framesConsumedOnConnectionThread.load(ordering: .relaxed) != calls
            || executor.jobsRun.load(ordering: .relaxed) != jobs
    }

    func report(_ drop: SubscriberDrop) {
        let wake = state.withLock { state in
            state.statistics.dropped[drop.reason, default: 0] = Saturating.add(
                state.statistics.dropped[drop.reason, default: 0],
                drop.frameCount
            )
            let wake = state.consumers.dropped(drop, onConnectionThread: true)
            state.taken(wake)
            return wake
        }
        perform(wake, onConnectionThread: true)
    }

    /// A STATUS arrived: kept for ``Subscriber/publisherStatus``; a new pressure state is an event.
    func statusReceived(_ status: PublisherStatus) {
        let wake = state.withLock { state -> Consumers.WakeAction? in
            let previous = state.publisherStatus?.systemPressure
            state.publisherStatus = status
            guard previous != status.systemPressure else { return nil }
            let wake = state.consumers.systemPressureChanged(status.systemPressure, onConnectionThread: true)
            state.taken(wake)
            return wake
        }
        if let wake { perform(wake, onConnectionThread: true) }
    }

    /// The connection ended; `isFinal` when no other will follow.
    func connectionEnded(_ error: FrameBusError, isFinal: Bool) {
        let wake = state.withLock { state in
            state.publisherStatus = nil
            state.socket = nil
            state.isConnected = false
            let wake = state.consumers.ended(error, isFinal: isFinal, onConnectionThread: true)
            state.taken(wake)
            return wake
        }
        perform(wake, onConnectionThread: true)
    }

    /// Carries out a wake-up. `onConnectionThread`: whether the caller is the connection thread (enqueueing what it
    /// read), where a resumed iteration under the executor's preference runs at once.
    private func perform(_ wake: Consumers.WakeAction, onConnectionThread: Bool) {
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
        case .startPass(let queue): queue.async { self.deliverToDelegate(on: .queue(queue)) }
        case .runPassHere: deliverToDelegate(on: .connectionThread)
        case .handOverPass: doorbell.ring()
        }
    }

    /// Called by the connection thread as it returns: a pass handed over from now on runs where it is asked for.
    func connectionThreadFinished() {
        if state.withLock({ $0.consumers.connectionThreadFinished() }) { deliverToDelegate(on: .connectionThread) }
        executor.runJobs()
        executor.finish()
    }

    /// Called by the connection thread whenever it wakes: runs a delivery pass another thread handed over.
    func runConnectionThreadPass() {
        if state.withLock({ $0.consumers.connectionThreadWoke() }) { deliverToDelegate(on: .connectionThread) }
        executor.runJobs()
    }

    // MARK: Consumers

    func claim() throws(FrameBusError) -> ConsumerClaim {
        guard let id = state.withLock({ $0.consumers.claimIterator() }) else {
            throw Self.concurrentConsumer("Subscriber.events")
        }
        return ConsumerClaim(id: id, core: self)
    }

    private static func concurrentConsumer(_ operation: String) -> FrameBusError {
        FrameBusError(
            .concurrentConsumer,
            operation,
            message: "another iteration or a delegate already consumes this subscriber's events"
        )
    }

    func releaseClaim(_ id: UInt64) {
        state.withLock { $0.consumers.releaseClaim(id) }?.resume(returning: nil)
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
        guard let id = state.withLock({ $0.consumers.claimPoller(wake: wake) }) else {
            throw Self.concurrentConsumer("Subscriber.makePoller")
        }
        return ConsumerClaim(id: id, core: self)
    }

    /// Takes the next waiting event, never waiting itself.
    func poll(claim: ConsumerClaim) -> PollResult {
        let action = state.withLock { state in
            let action = state.consumers.poll(claim: claim.id)
            if case .event(let entry) = action { state.taken(entry) }
            return action
        }
        switch action {
        case .event(let entry): return .event(Self.event(entry))
        case .empty: return .empty
        case .finished: return .finished
        }
    }

    func nextEvent(claim: ConsumerClaim) async -> SubscriberEvent? {
        let entry = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Waiter) in
                let action = state.withLock { state in
                    // `Task.isCancelled` is read under the lock that the cancellation handler takes, so a
                    // cancellation is never missed: either it ran before (and the task is marked cancelled) or it
                    // will find the waiter.
                    let action = state.consumers.next(
                        claim: claim.id,
                        waiter: continuation,
                        isTaskCancelled: Task.isCancelled
                    )
                    if case .returnNow(let entry) = action { state.taken(entry) }
                    return action
                }
                if case .returnNow(let entry) = action { continuation.resume(returning: entry) }
            }
        } onCancel: {
            state.withLock { $0.consumers.iterationCancelled(claim: claim.id) }?.resume(returning: nil)
        }
        return entry.map(Self.event)
    }

    private static func event(_ entry: SubscriberEventQueue<PendingFrame>.Entry) -> SubscriberEvent {
        switch entry {
        case .connected(let session, let isReconnect): isReconnect ? .reconnected(session) : .connected(session)
        case .frame(let frame, _): .frame(frame.sample)
        case .dropped(let drop): .dropped(drop)
        case .systemPressure(let state): .systemPressureChanged(state)
        case .ended(let error): .ended(error)
        }
    }

    func setDelegate(_ delegate: (any SubscriberDelegate)?, target: DeliveryTarget) {
        let action = state.withLock { state in
            let action = state.consumers.setDelegate(delegate, target: target)
            state.taken(action.wake)
            return action
        }
        action.endIteration?.resume(returning: nil)
        perform(action.wake, onConnectionThread: false)
    }

    /// Runs on the delegate's queue: hands waiting events to the delegate one by one, never holding the lock
    /// during a callback. If the delegate was set with another queue meanwhile, the pass moves there (it stays the
    /// only one), so every callback runs on the queue its delegate was set with.
    private func deliverToDelegate(on current: DeliveryTarget) {
        while true {
            let (step, owner) = state.withLock { state in
                let owner = state.owner
                let step = state.consumers.deliveryStep(on: current, ownerIsAlive: owner != nil)
                if case .call(let entry, _) = step { state.taken(entry) }
                return (step, owner)
            }
            switch step {
            case .stop:
                return
            case .move(let queue):
                queue.async { self.deliverToDelegate(on: .queue(queue)) }
                return
            case .handOver:
                doorbell.ring()
                return
            case .call(let entry, let delegate):
                // The machine was told whether the owner was alive; this reference keeps it so for the callback.
                guard let owner else { preconditionFailure("a delegate call for a subscriber that is gone") }
                switch entry {
                case .connected(let session, _): delegate.subscriber(owner, didConnect: session)
                case .frame(let frame, _):
                    if case .connectionThread = current {
                        framesConsumedOnConnectionThread.add(1, ordering: .relaxed)
                    }
                    delegate.subscriber(owner, didOutput: frame.sample)
                case .dropped(let drop): delegate.subscriber(owner, didDrop: Self.marker(for: drop))
                case .systemPressure(let state): delegate.subscriber(owner, didChangeSystemPressure: state)
                case .ended(let error): delegate.subscriber(owner, didEndWith: error)
                }
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
        let (socket, action) = state.withLock { state -> (Socket?, Consumers.CancelAction?) in
            guard let action = state.consumers.cancel() else { return (nil, nil) }
            state.isConnected = false
            defer { state.socket = nil }
            return (state.socket, action)
        }
        guard let action else { return }
        // GOODBYE releases everything we hold at the publisher; nothing is sent after it.
        sender.send(WireMessage.goodbye(reason: 0).encoded())
        sender.detach()
        socket?.shutdown()
        for frame in action.frames { frame.token.release(notDelivered: true) }
        action.waiter?.resume(returning: nil)
        action.pollerWake?()
        doorbell.ring()
        leadership.poke()
    }
}

/// How a subscriber's connection thread slept and woke, as counts (docs/PROTOCOL.md §9.5, §9.8).
package struct WakeUpCounts: Hashable, Sendable {
    /// Sleeps on the ring with the wake-up socket polled (datagram-woken sessions).
    package var socketSleeps: UInt64 = 0
    /// Of those, the wake-up socket was readable when `poll` returned.
    package var socketWakeUps: UInt64 = 0
    /// Sleeps on the ring's futex word (futex-woken sessions).
    package var futexSleeps: UInt64 = 0
    /// Of those, the publisher's `FUTEX_WAKE` ended it.
    package var futexWakeUps: UInt64 = 0
    /// Of those, the liveness interval ended it (the socket was then read).
    package var futexTimeouts: UInt64 = 0
    /// The timeout of the last futex sleep, in nanoseconds (the liveness interval, backed off while idle, §9.8).
    package var lastLivenessInterval: Int64 = 0
    /// Times the session socket was read until it would block (or ended).
    package var socketReads: UInt64 = 0
    /// Datagrams read from the session socket.
    package var socketMessages: UInt64 = 0
    /// Messages read from the announce ring (FRAME and DROP).
    package var ringMessages: UInt64 = 0
}

/// ``WakeUpCounts`` kept by the connection thread, read from anywhere.
final class WakeUpCounters: Sendable {
    private let counts = Mutex(WakeUpCounts())
    var snapshot: WakeUpCounts { counts.withLock { $0 } }
    func update(_ body: (inout WakeUpCounts) -> Void) { counts.withLock { body(&$0) } }
}
