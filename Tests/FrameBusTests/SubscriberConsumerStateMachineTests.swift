import Dispatch
import TestSupport
import Testing

@testable import FrameBus

/// The subscriber's consumer machine (`SubscriberConsumerStateMachine`), driven directly: no locks, no threads, no
/// continuations. Frames are `Int`s (`f10` is frame 10), a suspended iteration is a `String` (its name).
@Suite(.timeLimit(.minutes(2))) struct SubscriberConsumerStateMachineTests {
    typealias Machine = SubscriberConsumerStateMachine<Int, String>

    final class Delegate: SubscriberDelegate {
        let name: String
        init(_ name: String) { self.name = name }
        func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {}
    }

    /// Kept alive for the whole suite (delegates are held weakly).
    static let a = Delegate("A")
    static let b = Delegate("B")
    static let q1 = DispatchQueue(label: "Q1")
    static let q2 = DispatchQueue(label: "Q2")
    static let session = Subscriber.Session(format: .bgra8, streamID: 1, subscriberID: 1, maximumHeldFrames: 4)
    static let end = FrameBusError(.endOfStream, "test")

    // MARK: Rendering

    static func name(_ target: DeliveryTarget) -> String {
        switch target {
        case .queue(let queue): queue.label
        case .connectionThread: "thread"
        }
    }

    static func name(_ entry: Machine.Entry?) -> String {
        switch entry {
        case nil: "nil"
        case .frame(let frame, _): "f\(frame)"
        case .connected: "conn"
        case .dropped: "drop"
        case .systemPressure: "pressure"
        case .ended: "end"
        }
    }

    static func describe(_ machine: Machine) -> String {
        let consumer =
            switch machine.consumer {
            case .none: "none"
            case .iterator(let claim, nil): "iter#\(claim)"
            case .iterator(let claim, let waiter?): "iter#\(claim)(\(waiter))"
            case .poller(let claim, _): "poller#\(claim)"
            case .delegate(let weak, let target):
                "\((weak.value as? Delegate)?.name ?? "gone")@\(name(target))"
            }
        let queue = machine.queue.entries.map { name($0) }.joined(separator: ",")
        return "\(consumer) \(machine.pass) \(machine.stream) [\(queue)]"
            + (machine.isConnectionThreadFinished ? " threadEnded" : "")
    }

    static func describe(_ wake: Machine.WakeAction) -> String {
        switch wake {
        case .none: "-"
        case .resume(let waiter, let entry): "resume(\(waiter),\(name(entry)))"
        case .notify: "notify"
        case .startPass(let queue): "startPass(\(queue.label))"
        case .runPassHere: "runPassHere"
        case .handOverPass: "handOverPass"
        }
    }

    // MARK: States

    /// Every state the table starts from, each reached by events from a new machine.
    enum State: String, CaseIterable {
        /// No consumer yet, a frame waiting.
        case idle
        /// An iteration that is not suspended, a frame waiting.
        case iterating
        /// An iteration suspended in `next()`.
        case waiting
        /// A poller, a frame waiting.
        case polling
        /// A delegate on Q1, nothing waiting, no pass.
        case delegateIdle
        /// A delegate on Q1 inside a callback (for f10), f11 waiting.
        case delivering
        /// A delegate on the connection thread, its pass handed over by the doorbell, f10 waiting.
        case handedOver
        /// An iteration; the stream ended for good with f10 and the end still waiting.
        case finishedWithFrames
        /// An iteration, then `cancel()` (f10 was released).
        case cancelled
        /// The delegate was removed during a callback: no consumer, the pass still runs, f11 waiting.
        case passWithoutDelegate

        func make() -> Machine {
            var m = Machine(depth: 4)
            let t = SubscriberConsumerStateMachineTests.self
            switch self {
            case .idle:
                _ = m.frame(10, sequence: 10, onConnectionThread: true)
            case .iterating:
                _ = m.claimIterator()
                _ = m.frame(10, sequence: 10, onConnectionThread: true)
            case .waiting:
                _ = m.claimIterator()
                _ = m.next(claim: 1, waiter: "w", isTaskCancelled: false)
            case .polling:
                _ = m.claimPoller(wake: {})
                _ = m.frame(10, sequence: 10, onConnectionThread: true)
            case .delegateIdle:
                _ = m.setDelegate(t.a, target: .queue(t.q1))
            case .delivering, .passWithoutDelegate:
                _ = m.setDelegate(t.a, target: .queue(t.q1))
                _ = m.frame(10, sequence: 10, onConnectionThread: true)
                _ = m.frame(11, sequence: 11, onConnectionThread: true)
                _ = m.deliveryStep(on: .queue(t.q1), ownerIsAlive: true)
                if self == .passWithoutDelegate { _ = m.setDelegate(nil, target: .queue(t.q1)) }
            case .handedOver:
                _ = m.frame(10, sequence: 10, onConnectionThread: true)
                _ = m.setDelegate(t.a, target: .connectionThread)
            case .finishedWithFrames:
                _ = m.claimIterator()
                _ = m.frame(10, sequence: 10, onConnectionThread: true)
                _ = m.ended(t.end, isFinal: true, onConnectionThread: true)
            case .cancelled:
                _ = m.claimIterator()
                _ = m.frame(10, sequence: 10, onConnectionThread: true)
                _ = m.cancel()
            }
            return m
        }
    }

    @Test(arguments: State.allCases) func eachStateIsWhatItsNameSays(_ state: State) {
        let expected: [State: String] = [
            .idle: "none idle open [f10]",
            .iterating: "iter#1 idle open [f10]",
            .waiting: "iter#1(w) idle open []",
            .polling: "poller#1 idle open [f10]",
            .delegateIdle: "A@Q1 idle open []",
            .delivering: "A@Q1 running open [f11]",
            .handedOver: "A@thread handedOver open [f10]",
            .finishedWithFrames: "iter#1 idle finished [f10,end]",
            .cancelled: "iter#1 idle cancelled []",
            .passWithoutDelegate: "none running open [f11]",
        ]
        #expect(Self.describe(state.make()) == expected[state])
    }

    // MARK: Events

    enum Event: String, CaseIterable {
        case claimIterator, claimPoller, releaseClaim, next, iterationCancelled, poll
        /// `setDelegate(B, queue: Q2)`, `setDelegate(B)` (from another thread), `setDelegate(nil)`.
        case setDelegateQ2, setDelegateThread, removeDelegate
        /// From the connection thread.
        case connected, frame, dropped, ended
        /// The pass takes a step on Q1 (the subscriber still exists).
        case deliveryStep
        case threadWoke, threadFinished, cancel

        /// Applies the event; returns its action, rendered.
        func apply(to m: inout Machine) -> String {
            let t = SubscriberConsumerStateMachineTests.self
            switch self {
            case .claimIterator: return m.claimIterator().map { "claimed#\($0)" } ?? "refused"
            case .claimPoller: return m.claimPoller(wake: {}).map { "claimed#\($0)" } ?? "refused"
            case .releaseClaim: return m.releaseClaim(1).map { "resume(\($0),nil)" } ?? "-"
            case .next:
                switch m.next(claim: 1, waiter: "n", isTaskCancelled: false) {
                case .returnNow(let entry): return "return(\(t.name(entry)))"
                case .suspended: return "suspended"
                }
            case .iterationCancelled: return m.iterationCancelled(claim: 1).map { "resume(\($0),nil)" } ?? "-"
            case .poll:
                switch m.poll(claim: 1) {
                case .event(let entry): return "event(\(t.name(entry)))"
                case .empty: return "empty"
                case .finished: return "finished"
                }
            case .setDelegateQ2, .setDelegateThread, .removeDelegate:
                let action =
                    switch self {
                    case .setDelegateQ2: m.setDelegate(t.b, target: .queue(t.q2))
                    case .setDelegateThread: m.setDelegate(t.b, target: .connectionThread)
                    default: m.setDelegate(nil, target: .queue(t.q2))
                    }
                return (action.endIteration.map { "end(\($0))+" } ?? "") + t.describe(action.wake)
            case .connected:
                return t.describe(
                    m.connected(t.session, isReconnect: false, raisingDepthTo: nil, onConnectionThread: true)
                )
            case .frame:
                let (released, late, wake) = m.frame(20, sequence: 20, onConnectionThread: true)
                let release = released.isEmpty ? "" : "release\(released)+"
                return release + (late > 0 ? "late\(late)+" : "") + t.describe(wake)
            case .dropped:
                let drop = SubscriberDrop(reason: .outOfBuffers, sequences: 5...5)
                return t.describe(m.dropped(drop, onConnectionThread: true))
            case .ended: return t.describe(m.ended(t.end, isFinal: true, onConnectionThread: true))
            case .deliveryStep:
                switch m.deliveryStep(on: .queue(t.q1), ownerIsAlive: true) {
                case .call(let entry, let delegate):
                    return "call(\(t.name(entry)),\((delegate as? Delegate)?.name ?? "?"))"
                case .move(let queue): return "move(\(queue.label))"
                case .handOver: return "handOver"
                case .stop: return "stop"
                }
            case .threadWoke: return m.connectionThreadWoke() ? "run" : "-"
            case .threadFinished: return m.connectionThreadFinished() ? "run" : "-"
            case .cancel:
                guard let action = m.cancel() else { return "-" }
                var parts = ["release\(action.frames)"]
                if let waiter = action.waiter { parts.append("resume(\(waiter),nil)") }
                if action.pollerWake != nil { parts.append("notify") }
                return parts.joined(separator: "+")
            }
        }
    }

    // MARK: The table

    /// (state, event) → (action, state after); "=" is the state before, unchanged.
    static let table: [State: [Event: (String, String)]] = [
        .idle: [
            .claimIterator: ("claimed#1", "iter#1 idle open [f10]"),
            .claimPoller: ("claimed#1", "poller#1 idle open [f10]"),
            .releaseClaim: ("-", "="),
            .next: ("return(nil)", "="),
            .iterationCancelled: ("-", "="),
            .poll: ("finished", "="),
            .setDelegateQ2: ("startPass(Q2)", "B@Q2 running open [f10]"),
            .setDelegateThread: ("handOverPass", "B@thread handedOver open [f10]"),
            .removeDelegate: ("-", "="),
            .connected: ("-", "none idle open [f10,conn]"),
            .frame: ("-", "none idle open [f10,f20]"),
            .dropped: ("-", "none idle open [f10,drop]"),
            .ended: ("-", "none idle finished [f10,end]"),
            .deliveryStep: ("stop", "="),
            .threadWoke: ("-", "="),
            .threadFinished: ("-", "none idle open [f10] threadEnded"),
            .cancel: ("release[10]", "none idle cancelled []"),
        ],
        .iterating: [
            .claimIterator: ("refused", "="),
            .claimPoller: ("refused", "="),
            .releaseClaim: ("-", "none idle open [f10]"),
            .next: ("return(f10)", "iter#1 idle open []"),
            .iterationCancelled: ("-", "="),
            .poll: ("finished", "="),
            .setDelegateQ2: ("startPass(Q2)", "B@Q2 running open [f10]"),
            .setDelegateThread: ("handOverPass", "B@thread handedOver open [f10]"),
            .removeDelegate: ("-", "="),
            .connected: ("-", "iter#1 idle open [f10,conn]"),
            .frame: ("-", "iter#1 idle open [f10,f20]"),
            .dropped: ("-", "iter#1 idle open [f10,drop]"),
            .ended: ("-", "iter#1 idle finished [f10,end]"),
            .deliveryStep: ("stop", "="),
            .threadWoke: ("-", "="),
            .threadFinished: ("-", "iter#1 idle open [f10] threadEnded"),
            .cancel: ("release[10]", "iter#1 idle cancelled []"),
        ],
        .waiting: [
            .claimIterator: ("refused", "="),
            .claimPoller: ("refused", "="),
            .releaseClaim: ("resume(w,nil)", "none idle open []"),
            .next: ("return(nil)", "="),
            .iterationCancelled: ("resume(w,nil)", "iter#1 idle open []"),
            .poll: ("finished", "="),
            .setDelegateQ2: ("end(w)+-", "B@Q2 idle open []"),
            .setDelegateThread: ("end(w)+-", "B@thread idle open []"),
            .removeDelegate: ("-", "="),
            .connected: ("resume(w,conn)", "iter#1 idle open []"),
            .frame: ("resume(w,f20)", "iter#1 idle open []"),
            .dropped: ("resume(w,drop)", "iter#1 idle open []"),
            .ended: ("resume(w,end)", "iter#1 idle finished []"),
            .deliveryStep: ("stop", "="),
            .threadWoke: ("-", "="),
            .threadFinished: ("-", "iter#1(w) idle open [] threadEnded"),
            .cancel: ("release[]+resume(w,nil)", "iter#1 idle cancelled []"),
        ],
        .polling: [
            .claimIterator: ("refused", "="),
            .claimPoller: ("refused", "="),
            .releaseClaim: ("-", "none idle open [f10]"),
            .next: ("return(nil)", "="),
            .iterationCancelled: ("-", "="),
            .poll: ("event(f10)", "poller#1 idle open []"),
            .setDelegateQ2: ("startPass(Q2)", "B@Q2 running open [f10]"),
            .setDelegateThread: ("handOverPass", "B@thread handedOver open [f10]"),
            // Removing a delegate when a poller has the events keeps the poller, which is told again that f10 waits.
            .removeDelegate: ("notify", "="),
            .connected: ("notify", "poller#1 idle open [f10,conn]"),
            .frame: ("notify", "poller#1 idle open [f10,f20]"),
            .dropped: ("notify", "poller#1 idle open [f10,drop]"),
            .ended: ("notify", "poller#1 idle finished [f10,end]"),
            .deliveryStep: ("stop", "="),
            .threadWoke: ("-", "="),
            .threadFinished: ("-", "poller#1 idle open [f10] threadEnded"),
            .cancel: ("release[10]+notify", "poller#1 idle cancelled []"),
        ],
        .delegateIdle: [
            .claimIterator: ("refused", "="),
            .claimPoller: ("refused", "="),
            .releaseClaim: ("-", "="),
            .next: ("return(nil)", "="),
            .iterationCancelled: ("-", "="),
            .poll: ("finished", "="),
            .setDelegateQ2: ("-", "B@Q2 idle open []"),
            .setDelegateThread: ("-", "B@thread idle open []"),
            .removeDelegate: ("-", "none idle open []"),
            .connected: ("startPass(Q1)", "A@Q1 running open [conn]"),
            .frame: ("startPass(Q1)", "A@Q1 running open [f20]"),
            .dropped: ("startPass(Q1)", "A@Q1 running open [drop]"),
            .ended: ("startPass(Q1)", "A@Q1 running finished [end]"),
            .deliveryStep: ("stop", "="),
            .threadWoke: ("-", "="),
            .threadFinished: ("-", "A@Q1 idle open [] threadEnded"),
            .cancel: ("release[]", "A@Q1 idle cancelled []"),
        ],
        .delivering: [
            .claimIterator: ("refused", "="),
            .claimPoller: ("refused", "="),
            .releaseClaim: ("-", "="),
            .next: ("return(nil)", "="),
            .iterationCancelled: ("-", "="),
            .poll: ("finished", "="),
            // Replaced during a callback: no second pass; the running one moves (see below).
            .setDelegateQ2: ("-", "B@Q2 running open [f11]"),
            .setDelegateThread: ("-", "B@thread running open [f11]"),
            .removeDelegate: ("-", "none running open [f11]"),
            .connected: ("-", "A@Q1 running open [f11,conn]"),
            .frame: ("-", "A@Q1 running open [f11,f20]"),
            .dropped: ("-", "A@Q1 running open [f11,drop]"),
            .ended: ("-", "A@Q1 running finished [f11,end]"),
            .deliveryStep: ("call(f11,A)", "A@Q1 running open []"),
            .threadWoke: ("-", "="),
            .threadFinished: ("-", "A@Q1 running open [f11] threadEnded"),
            .cancel: ("release[11]", "A@Q1 running cancelled []"),
        ],
        .handedOver: [
            .claimIterator: ("refused", "="),
            .claimPoller: ("refused", "="),
            .releaseClaim: ("-", "="),
            .next: ("return(nil)", "="),
            .iterationCancelled: ("-", "="),
            .poll: ("finished", "="),
            .setDelegateQ2: ("-", "B@Q2 handedOver open [f10]"),
            .setDelegateThread: ("-", "B@thread handedOver open [f10]"),
            .removeDelegate: ("-", "none handedOver open [f10]"),
            .connected: ("-", "A@thread handedOver open [f10,conn]"),
            .frame: ("-", "A@thread handedOver open [f10,f20]"),
            .dropped: ("-", "A@thread handedOver open [f10,drop]"),
            .ended: ("-", "A@thread handedOver finished [f10,end]"),
            .deliveryStep: ("handOver", "="),
            .threadWoke: ("run", "A@thread running open [f10]"),
            .threadFinished: ("run", "A@thread running open [f10] threadEnded"),
            .cancel: ("release[10]", "A@thread handedOver cancelled []"),
        ],
        .finishedWithFrames: [
            .claimIterator: ("refused", "="),
            .claimPoller: ("refused", "="),
            .releaseClaim: ("-", "none idle finished [f10,end]"),
            .next: ("return(f10)", "iter#1 idle finished [end]"),
            .iterationCancelled: ("-", "="),
            .poll: ("finished", "="),
            .setDelegateQ2: ("startPass(Q2)", "B@Q2 running finished [f10,end]"),
            .setDelegateThread: ("handOverPass", "B@thread handedOver finished [f10,end]"),
            .removeDelegate: ("-", "="),
            .connected: ("-", "iter#1 idle finished [f10,end,conn]"),
            .frame: ("-", "iter#1 idle finished [f10,end,f20]"),
            .dropped: ("-", "iter#1 idle finished [f10,end,drop]"),
            .ended: ("-", "iter#1 idle finished [f10,end,end]"),
            .deliveryStep: ("stop", "="),
            .threadWoke: ("-", "="),
            .threadFinished: ("-", "iter#1 idle finished [f10,end] threadEnded"),
            .cancel: ("release[10]", "iter#1 idle cancelled [end]"),
        ],
        .cancelled: [
            .claimIterator: ("refused", "="),
            .claimPoller: ("refused", "="),
            .releaseClaim: ("-", "none idle cancelled []"),
            .next: ("return(nil)", "="),
            .iterationCancelled: ("-", "="),
            .poll: ("finished", "="),
            .setDelegateQ2: ("-", "B@Q2 idle cancelled []"),
            .setDelegateThread: ("-", "B@thread idle cancelled []"),
            .removeDelegate: ("-", "="),
            .connected: ("-", "="),
            .frame: ("release[20]+-", "="),
            .dropped: ("-", "="),
            .ended: ("-", "="),
            .deliveryStep: ("stop", "="),
            .threadWoke: ("-", "="),
            .threadFinished: ("-", "iter#1 idle cancelled [] threadEnded"),
            .cancel: ("-", "="),
        ],
        .passWithoutDelegate: [
            .claimIterator: ("claimed#1", "iter#1 running open [f11]"),
            .claimPoller: ("claimed#1", "poller#1 running open [f11]"),
            .releaseClaim: ("-", "="),
            .next: ("return(nil)", "="),
            .iterationCancelled: ("-", "="),
            .poll: ("finished", "="),
            .setDelegateQ2: ("-", "B@Q2 running open [f11]"),
            .setDelegateThread: ("-", "B@thread running open [f11]"),
            .removeDelegate: ("-", "="),
            .connected: ("-", "none running open [f11,conn]"),
            .frame: ("-", "none running open [f11,f20]"),
            .dropped: ("-", "none running open [f11,drop]"),
            .ended: ("-", "none running finished [f11,end]"),
            .deliveryStep: ("stop", "none idle open [f11]"),
            .threadWoke: ("-", "="),
            .threadFinished: ("-", "none running open [f11] threadEnded"),
            .cancel: ("release[11]", "none running cancelled []"),
        ],
    ]

    @Test func theTableCoversEveryStateAndEvent() {
        for state in State.allCases {
            let row = Self.table[state] ?? [:]
            let missing = Event.allCases.filter { row[$0] == nil }
            #expect(missing.isEmpty, "\(state): no entry for \(missing)")
        }
    }

    @Test(arguments: State.allCases) func everyEventInEveryState(_ state: State) {
        for event in Event.allCases {
            guard let (action, after) = Self.table[state]?[event] else { continue }
            var machine = state.make()
            let before = Self.describe(machine)
            let got = event.apply(to: &machine)
            #expect(got == action, "\(state) × \(event): action")
            #expect(Self.describe(machine) == (after == "=" ? before : after), "\(state) × \(event): state")
        }
    }

    // MARK: Sequences

    /// `cancel()` while a callback runs: the waiting frame is released at once, and the pass stops at its next step
    /// instead of calling the delegate again.
    @Test func cancelDuringDelivery() {
        var m = State.delivering.make()
        let cancel = m.cancel()
        #expect(cancel?.frames == [11])
        #expect(cancel?.waiter == nil)
        guard case .stop = m.deliveryStep(on: .queue(Self.q1), ownerIsAlive: true) else {
            Issue.record("the pass went on after cancel()")
            return
        }
        #expect(m.pass == .idle)
        let second = m.cancel()
        #expect(second == nil, "a second cancel() is a no-op")
    }

    /// A delegate replaced during a callback gets the waiting events after that callback, from the same pass, moved
    /// to its own queue; and no second pass was started meanwhile.
    @Test func delegateReplacementDuringACallback() {
        var m = State.delivering.make()
        let set = m.setDelegate(Self.b, target: .queue(Self.q2))
        guard case .none = set.wake else {
            Issue.record("a second pass was started: \(Self.describe(set.wake))")
            return
        }
        _ = m.frame(12, sequence: 12, onConnectionThread: true)  // no pass starts either
        #expect(Self.describe(m) == "B@Q2 running open [f11,f12]")
        guard case .move(let queue) = m.deliveryStep(on: .queue(Self.q1), ownerIsAlive: true) else {
            Issue.record("the pass did not move to the new delegate's queue")
            return
        }
        #expect(queue === Self.q2)
        var calls: [String] = []
        while case .call(let entry, let delegate) = m.deliveryStep(on: .queue(Self.q2), ownerIsAlive: true) {
            calls.append("\(Self.name(entry))→\((delegate as? Delegate)?.name ?? "?")")
        }
        #expect(calls == ["f11→B", "f12→B"])
        #expect(m.pass == .idle)
    }

    /// Replaced by a connection-thread delegate during a callback: the pass is handed to the connection thread
    /// (doorbell), which runs it; once that thread has returned, a pass stays where it runs.
    @Test func delegateMovedToTheConnectionThreadDuringACallback() {
        var m = State.delivering.make()
        _ = m.setDelegate(Self.b, target: .connectionThread)
        guard case .handOver = m.deliveryStep(on: .queue(Self.q1), ownerIsAlive: true) else {
            Issue.record("the pass was not handed over")
            return
        }
        #expect(m.pass == .handedOver)
        let runs = m.connectionThreadWoke()
        let runsAgain = m.connectionThreadWoke()
        #expect(runs)
        #expect(!runsAgain, "a pass is handed over once")
        guard case .call(.frame(11, _), _) = m.deliveryStep(on: .connectionThread, ownerIsAlive: true) else {
            Issue.record("the connection thread did not deliver f11")
            return
        }
        // The thread returns; a delegate on it, set later from another thread, is served there.
        _ = m.deliveryStep(on: .connectionThread, ownerIsAlive: true)
        let runsAtTheEnd = m.connectionThreadFinished()
        #expect(!runsAtTheEnd)
        _ = m.frame(13, sequence: 13, onConnectionThread: false)
        #expect(Self.describe(m) == "B@thread running open [f13] threadEnded")
        guard case .call(.frame(13, _), _) = m.deliveryStep(on: .queue(Self.q1), ownerIsAlive: true) else {
            Issue.record("after the connection thread ended, the pass did not stay where it runs")
            return
        }
    }

    /// A second consumer of another kind is refused while one has the events, and accepted once it is gone.
    @Test func aConsumerKindSwitchIsRefusedUntilTheClaimIsReleased() {
        var m = Machine(depth: 2)
        let poller = m.claimPoller(wake: {})
        let iterator = m.claimIterator()
        let secondPoller = m.claimPoller(wake: {})
        let stale = m.releaseClaim(2)  // a stale claim changes nothing
        let iteratorAgain = m.claimIterator()
        _ = m.releaseClaim(1)
        let iteratorAfterRelease = m.claimIterator()
        #expect(poller == 1)
        #expect(iterator == nil)
        #expect(secondPoller == nil)
        #expect(stale == nil)
        #expect(iteratorAgain == nil)
        #expect(iteratorAfterRelease == 2)
        // The poller's claim is stale: it polls nothing more.
        _ = m.frame(1, sequence: 1, onConnectionThread: true)
        guard case .finished = m.poll(claim: 1) else {
            Issue.record("a released poller still took events")
            return
        }
        #expect(m.queue.frameCount == 1)
    }

    /// The stream ends for good with frames pending: the iteration gets them, then the end, then `nil`, and is
    /// never suspended after the end.
    @Test func terminationWithFramesPending() {
        var m = Machine(depth: 4)
        let claim = m.claimIterator() ?? 0
        _ = m.frame(1, sequence: 1, onConnectionThread: true)
        _ = m.frame(2, sequence: 2, onConnectionThread: true)
        _ = m.ended(Self.end, isFinal: true, onConnectionThread: true)
        var got: [String] = []
        for _ in 0..<5 {
            switch m.next(claim: claim, waiter: "n", isTaskCancelled: false) {
            case .returnNow(let entry): got.append(Self.name(entry))
            case .suspended: got.append("suspended")
            }
        }
        #expect(got == ["f1", "f2", "end", "nil", "nil"])
        #expect(!m.hasWaitingIterator)
    }

    /// A cancelled task is never suspended, and a delegate that went away (it is held weakly) ends the pass and
    /// frees the events; so does a subscriber that went away.
    @Test func cancelledTasksAndVanishedDelegatesAndOwners() {
        var m = State.iterating.make()
        guard case .returnNow(nil) = m.next(claim: 1, waiter: "n", isTaskCancelled: true) else {
            Issue.record("a cancelled task was given an event or suspended")
            return
        }
        #expect(m.queue.frameCount == 1)

        var n = Machine(depth: 4)
        do {
            let temporary = Delegate("T")
            _ = n.setDelegate(temporary, target: .queue(Self.q1))
        }
        _ = n.frame(1, sequence: 1, onConnectionThread: true)
        #expect(n.pass == .running)
        guard case .stop = n.deliveryStep(on: .queue(Self.q1), ownerIsAlive: true) else {
            Issue.record("a released delegate was called")
            return
        }
        #expect(Self.describe(n) == "none idle open [f1]")
        let claim = n.claimIterator()
        #expect(claim == 1)

        var o = State.delegateIdle.make()
        _ = o.frame(1, sequence: 1, onConnectionThread: true)
        guard case .stop = o.deliveryStep(on: .queue(Self.q1), ownerIsAlive: false) else {
            Issue.record("a delegate was called for a subscriber that is gone")
            return
        }
        #expect(Self.describe(o) == "A@Q1 idle open [f1]")
    }
}

/// The consumer machine under a real `Subscriber` (its connection thread trying to connect to no one).
@Suite(.timeLimit(.minutes(2))) struct SubscriberConsumerTests {
    /// Removing a delegate while an iteration waits leaves the iteration waiting: it is not ended, and `cancel()`
    /// then ends it exactly once. (`SubscriberCore` used to resume the waiting continuation with `nil` here while
    /// keeping it, so the end of the iteration or `cancel()` resumed it a second time.)
    @Test func removingADelegateWhileAnIterationWaitsLeavesTheIterationWaiting() async throws {
        var configuration = Subscriber.Configuration(
            path: temporaryBusPath("consumer-nil-delegate"),
            acceptedFormats: [.yuv420BiPlanarVideoRange8]
        )
        configuration.reconnects = true
        let subscriber = try Subscriber(configuration: configuration)
        defer { subscriber.cancel() }
        let task = Task { () async throws -> Bool in
            var events = subscriber.events.makeAsyncIterator()
            return try await events.next() == nil
        }
        try #require(await eventually { subscriber.hasWaitingConsumer })
        subscriber.setDelegate(nil, queue: .global())
        #expect(subscriber.hasWaitingConsumer, "removing no delegate ended the iteration")
        subscriber.cancel()
        #expect(try await task.value)
        #expect(!subscriber.hasWaitingConsumer)
    }
}
