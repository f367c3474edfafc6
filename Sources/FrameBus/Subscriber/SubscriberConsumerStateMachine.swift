import Dispatch

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

/// A delegate, held weakly (as `AVCaptureVideoDataOutput` holds its delegate).
struct WeakDelegate {
    weak var value: (any SubscriberDelegate)?
}

/// The consumer side of a subscriber: the event queue, who takes its events (an iteration, a delegate, a poller, or
/// no one yet), the delegate's delivery pass, and whether the stream has finished or was cancelled.
///
/// Events in, actions out: each method is one event, called under `SubscriberCore`'s lock; it changes the state and
/// returns what the caller must do after the lock is released (resume a continuation, call a poller's `wake`, start
/// a delivery pass on a queue, ring the doorbell, release frames). It does no IO, takes no lock and reads no clock,
/// so it is tested event by event (`SubscriberConsumerStateMachineTests`). `Frame` is what waits in the queue
/// (`PendingFrame`); `Waiter` is a suspended iteration (a continuation); the tests use plain values for both.
///
/// The queue is a stored property, not an enum payload, so a mutation never copies it.
struct SubscriberConsumerStateMachine<Frame, Waiter> {
    typealias Entry = SubscriberEventQueue<Frame>.Entry
    typealias Wake = @Sendable () -> Void

    /// Who takes the events.
    enum Consumer {
        /// No one yet: events wait (an iteration, a poller or a delegate may claim them).
        case none
        /// An iteration of `events`/`frames`, suspended in `next()` when `waiter` is set.
        case iterator(claim: UInt64, waiter: Waiter?)
        /// A delegate and where its callbacks run.
        case delegate(WeakDelegate, DeliveryTarget)
        /// A thread that takes events itself (``poll(claim:)``) and is told with `wake` that one may be there.
        case poller(claim: UInt64, wake: Wake)
    }

    /// Whether more events may come.
    enum Stream: Equatable {
        case open
        /// No event follows the waiting ones (the stream ended for good); they are still delivered.
        case finished
        /// `cancel()`: nothing more is delivered, and waiting frames were released.
        case cancelled
    }

    /// The delegate's delivery pass. At most one exists, whatever the consumer became meanwhile, so that callbacks
    /// never overlap and stay in order: a delegate set (again) while a callback of the previous one still runs gets
    /// its events after that callback.
    enum Pass: Equatable {
        case idle
        /// Scheduled or running on a delegate's queue, or running on the connection thread.
        case running
        /// Handed to the connection thread (with the doorbell), which has not started it yet.
        case handedOver
    }

    private(set) var queue: SubscriberEventQueue<Frame>
    private(set) var consumer = Consumer.none
    private(set) var stream = Stream.open
    private(set) var pass = Pass.idle
    /// The connection thread has returned: a pass meant for it runs on whichever thread asks for it.
    private(set) var isConnectionThreadFinished = false
    private var nextClaim: UInt64 = 1

    init(depth: Int) { queue = SubscriberEventQueue(depth: depth) }

    var isCancelled: Bool { stream == .cancelled }

    /// Whether an iteration is suspended waiting for the next event.
    var hasWaitingIterator: Bool {
        if case .iterator(_, .some) = consumer { return true }
        return false
    }

    // MARK: Actions

    /// What waking the consumer takes, after an event was appended or a consumer was set.
    enum WakeAction {
        case none
        /// Resume the suspended iteration with this entry (`nil`: the iteration ends).
        case resume(Waiter, Entry?)
        /// Call the poller's `wake`.
        case notify(Wake)
        /// Start a delivery pass on this queue (`async`).
        case startPass(DispatchQueue)
        /// Run a delivery pass here and now: the caller is the connection thread, or that thread has returned.
        case runPassHere
        /// Ring the doorbell: the connection thread runs the pass when it wakes (``connectionThreadWoke()``).
        case handOverPass
    }

    /// What ``next(claim:waiter:isTaskCancelled:)`` decided.
    enum NextAction {
        /// Return this at once (`nil`: the iteration ends); the waiter was not kept.
        case returnNow(Entry?)
        /// The waiter was kept: an event, a cancellation or the end resumes it.
        case suspended
    }

    /// What ``poll(claim:)`` found.
    enum PollAction {
        case event(Entry)
        /// Nothing waits now; `wake` will be called when something may.
        case empty
        /// No event will come (the stream ended for good, or the subscriber was cancelled, or the claim is stale).
        case finished
    }

    /// What ``setDelegate(_:target:)`` takes.
    struct SetDelegateAction {
        /// An iteration the new delegate displaced: resume it with `nil`.
        var endIteration: Waiter?
        var wake: WakeAction
    }

    /// One step of a delivery pass.
    enum DeliveryStep {
        /// Call the delegate with this entry (without the lock), then take the next step.
        case call(Entry, any SubscriberDelegate)
        /// The delegate was set with another queue: continue the pass there (`async`).
        case move(DispatchQueue)
        /// The delegate was set for the connection thread: ring the doorbell, the connection thread continues.
        case handOver
        /// The pass ends.
        case stop
    }

    /// What ``cancel()`` takes.
    struct CancelAction {
        /// A suspended iteration: resume it with `nil`.
        var waiter: Waiter?
        /// A poller to tell.
        var pollerWake: Wake?
        /// Frames that waited: release them, not delivered.
        var frames: [Frame]
    }

    // MARK: Claims

    /// An iteration asks for the events: its claim, or `nil` when another consumer has them.
    mutating func claimIterator() -> UInt64? {
        claim { .iterator(claim: $0, waiter: nil) }
    }

    /// A poller asks for the events: its claim, or `nil` when another consumer has them.
    mutating func claimPoller(wake: @escaping Wake) -> UInt64? {
        claim { .poller(claim: $0, wake: wake) }
    }

    private mutating func claim(_ consumer: (UInt64) -> Consumer) -> UInt64? {
        guard case .none = self.consumer else { return nil }
        let id = nextClaim
        nextClaim += 1
        self.consumer = consumer(id)
        return id
    }

    /// The iteration or poller with claim `id` went away: the events are free again. Returns a suspended waiter to
    /// resume with `nil`.
    mutating func releaseClaim(_ id: UInt64) -> Waiter? {
        switch consumer {
        case .poller(id, _):
            consumer = .none
            return nil
        case .iterator(id, let waiter):
            consumer = .none
            return waiter
        default:
            return nil
        }
    }

    // MARK: Iteration

    /// The iteration with claim `claim` asks for the next event, offering `waiter` to suspend.
    mutating func next(claim: UInt64, waiter: Waiter, isTaskCancelled: Bool) -> NextAction {
        guard case .iterator(claim, nil) = consumer else { return .returnNow(nil) }
        if isTaskCancelled || stream == .cancelled { return .returnNow(nil) }
        if let entry = queue.popFirst() { return .returnNow(entry) }
        if stream == .finished { return .returnNow(nil) }
        consumer = .iterator(claim: claim, waiter: waiter)
        return .suspended
    }

    /// The task of the iteration with claim `claim` was cancelled: returns its waiter to resume with `nil`.
    mutating func iterationCancelled(claim: UInt64) -> Waiter? {
        guard case .iterator(claim, let waiter?) = consumer else { return nil }
        consumer = .iterator(claim: claim, waiter: nil)
        return waiter
    }

    // MARK: Polling

    /// The poller with claim `claim` takes the next event.
    mutating func poll(claim: UInt64) -> PollAction {
        guard case .poller(claim, _) = consumer, stream != .cancelled else { return .finished }
        if let entry = queue.popFirst() { return .event(entry) }
        return stream == .finished ? .finished : .empty
    }

    // MARK: Delegates

    /// A delegate is set (`nil`: removed) with where its callbacks run. A delegate displaces an iteration (which
    /// ends) or a poller; removing one when none is set changes nothing.
    mutating func setDelegate(_ delegate: (any SubscriberDelegate)?, target: DeliveryTarget) -> SetDelegateAction {
        var displaced: Waiter?
        if let delegate {
            if case .iterator(_, let waiter) = consumer { displaced = waiter }
            consumer = .delegate(WeakDelegate(value: delegate), target)
        } else if case .delegate = consumer {
            consumer = .none
        }
        return SetDelegateAction(endIteration: displaced, wake: wakeConsumer(onConnectionThread: false))
    }

    /// The delivery pass, running on `current`, asks what to do next. `ownerIsAlive`: the `Subscriber` that a
    /// callback names still exists.
    mutating func deliveryStep(on current: DeliveryTarget, ownerIsAlive: Bool) -> DeliveryStep {
        guard case .delegate(let weak, let target) = consumer else {
            pass = .idle
            return .stop
        }
        // A pass for a connection thread that has ended stays where it is.
        let stays: Bool
        if case .connectionThread = target { stays = isConnectionThreadFinished } else { stays = false }
        guard target.isSame(as: current) || stays else {
            switch target {
            case .queue(let queue):
                return .move(queue)
            case .connectionThread:
                pass = .handedOver
                return .handOver
            }
        }
        guard let delegate = weak.value, ownerIsAlive, stream != .cancelled, let entry = queue.popFirst() else {
            pass = .idle
            if weak.value == nil { consumer = .none }
            return .stop
        }
        return .call(entry, delegate)
    }

    /// The connection thread woke (or is returning): whether it is to run the pass handed over to it.
    mutating func connectionThreadWoke() -> Bool {
        guard pass == .handedOver else { return false }
        pass = .running
        return true
    }

    /// The connection thread returns: from now on a pass meant for it runs where it is asked for. Returns whether
    /// the caller is to run a pass handed over to it.
    mutating func connectionThreadFinished() -> Bool {
        isConnectionThreadFinished = true
        return connectionThreadWoke()
    }

    // MARK: Events from the connection thread

    /// A connection's handshake completed. `raisingDepthTo`: queue mode lets every frame the publisher lets this
    /// subscriber hold wait (docs/PROTOCOL.md §7.2).
    mutating func connected(
        _ session: Subscriber.Session,
        isReconnect: Bool,
        raisingDepthTo depth: Int?,
        onConnectionThread: Bool
    ) -> WakeAction {
        if stream != .cancelled {
            if let depth { queue.raiseDepth(to: depth) }
            queue.append(connected: session, isReconnect: isReconnect)
        }
        return wakeConsumer(onConnectionThread: onConnectionThread)
    }

    /// A frame arrived. `released`: frames to release, not delivered (those it replaced in a latest-only or full
    /// queue, counted in `late`; or the frame itself, after ``cancel()``).
    mutating func frame(
        _ frame: Frame,
        sequence: UInt64,
        onConnectionThread: Bool
    ) -> (released: [Frame], late: Int, wake: WakeAction) {
        guard stream != .cancelled else { return ([frame], 0, .none) }
        let replaced = queue.append(frame: frame, sequence: sequence)
        return (replaced, replaced.count, wakeConsumer(onConnectionThread: onConnectionThread))
    }

    /// The publisher reported a drop (or the connection thread noticed one).
    mutating func dropped(_ drop: SubscriberDrop, onConnectionThread: Bool) -> WakeAction {
        if stream != .cancelled { queue.append(drop: drop) }
        return wakeConsumer(onConnectionThread: onConnectionThread)
    }

    /// The publisher's system pressure changed (only the newest waits: an older one still waiting is replaced).
    mutating func systemPressureChanged(_ pressure: SystemPressureState, onConnectionThread: Bool) -> WakeAction {
        if stream != .cancelled { queue.append(systemPressure: pressure) }
        return wakeConsumer(onConnectionThread: onConnectionThread)
    }

    /// The connection ended; `isFinal` when no other will follow.
    mutating func ended(_ error: FrameBusError, isFinal: Bool, onConnectionThread: Bool) -> WakeAction {
        if stream != .cancelled {
            queue.append(ended: error)
            if isFinal { stream = .finished }
        }
        return wakeConsumer(onConnectionThread: onConnectionThread)
    }

    // MARK: Cancelling

    /// `cancel()`: `nil` if it was cancelled before.
    mutating func cancel() -> CancelAction? {
        guard stream != .cancelled else { return nil }
        stream = .cancelled
        var action = CancelAction(waiter: nil, pollerWake: nil, frames: queue.removeAllFrames())
        switch consumer {
        case .iterator(let claim, let waiter):
            action.waiter = waiter
            consumer = .iterator(claim: claim, waiter: nil)
        case .poller(_, let wake):
            action.pollerWake = wake
        case .none, .delegate:
            break
        }
        return action
    }

    // MARK: Waking

    /// Who must be woken now that an event waits or the consumer changed. `onConnectionThread`: the caller is the
    /// connection thread, which runs a connection-thread pass at once.
    private mutating func wakeConsumer(onConnectionThread: Bool) -> WakeAction {
        switch consumer {
        case .none, .iterator(_, waiter: nil):
            return .none
        case .poller(_, let wake):
            return queue.isEmpty && stream == .open ? .none : .notify(wake)
        case .iterator(let claim, .some(let waiter)):
            if let entry = queue.popFirst() {
                consumer = .iterator(claim: claim, waiter: nil)
                return .resume(waiter, entry)
            }
            guard stream == .open else {
                consumer = .iterator(claim: claim, waiter: nil)
                return .resume(waiter, nil)
            }
            return .none
        case .delegate(_, let target):
            guard pass == .idle, !queue.isEmpty, stream != .cancelled else { return .none }
            switch target {
            case .queue(let queue):
                pass = .running
                return .startPass(queue)
            case .connectionThread where onConnectionThread || isConnectionThreadFinished:
                pass = .running
                return .runPassHere
            case .connectionThread:
                pass = .handedOver
                return .handOverPass
            }
        }
    }
}
