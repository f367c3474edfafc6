import Testing

@testable import FrameBus

/// The subscriber's state machine and event queue with STATUS and DROP reason 4 (PROTOCOL.md §5.8, §5.13).
@Suite struct SubscriberStatusTests {
    typealias Tests = SubscriberStateMachineTests

    static let status = WireStatus(
        level: 3,
        factors: 0b1_0101,
        cost: 2500,
        frameDuration: WireTime(value: 1, timescale: 15, flags: 1),
        time: 1,
        framesShed: 4
    )

    @Test func aStatusIsKeptAndAReasonFourDropIsWorkFellBehind() {
        var machine = Tests.activeMachine()
        let action = machine.received(.status(Self.status))
        let expected = PublisherStatus(
            systemPressure: SystemPressureState(level: .critical, factors: [.cpu, .io, .bus]),
            cost: 2.5,
            frameDuration: MediaTime(value: 1, timescale: 15),
            framesShed: 4
        )
        #expect(action == .status(expected))
        #expect(
            machine.received(Tests.drop(3, 4, .workFellBehind))
                == .reportDrop(SubscriberDrop(reason: .workFellBehind, sequences: 3...4))
        )
    }

    /// A subscriber that did not ask for STATUS treats STATUS and reason 4 as any unknown message or reason.
    @Test(arguments: [true, false])
    func aSubscriberThatDidNotAskRefusesStatusAndReasonFour(status: Bool) {
        var machine = Tests.activeMachine()
        machine.receivesStatus = false
        let action = machine.received(status ? .status(Self.status) : Tests.drop(3, 4, .workFellBehind))
        #expect(Tests.replyCode(action) == .malformedMessage, "\(action)")
    }

    /// However often the publisher's state changes, one pressure event at most waits, the newest.
    @Test func onlyTheNewestPressureStateWaits() {
        var queue = SubscriberEventQueue<Int>(depth: 4)
        queue.append(drop: SubscriberDrop(reason: .outOfBuffers, sequences: 1...1))
        for level in SystemPressureState.Level.allCases {
            queue.append(systemPressure: SystemPressureState(level: level, factors: .cpu))
        }
        #expect(queue.entries.count == 2)
        guard case .systemPressure(let state) = queue.entries.last else {
            Issue.record("no pressure entry")
            return
        }
        #expect(state.level == .shutdown)
    }
}
