import Testing

@testable import FrameBus

/// The publisher's machine when the conversion worker sheds frames, and STATUS: only peers that asked get reason 4
/// and STATUS; the others keep their documented service (PROTOCOL.md §5.8, §5.13).
@Suite struct PublisherSheddingTests {
    typealias Harness = MachineHarness
    static let compressed: UInt32 = 0x2638_7630  // '&8v0'

    static func harness() -> Harness {
        Harness { $0.formats = [Harness.nv12, compressed] }
    }

    static func drops(_ harness: Harness, _ id: Harness.ID) -> [WireDrop] {
        harness.machine.flushPendingDropsForTests()
        var harness = harness
        harness.perform([.flush(id)])
        return harness.messages(id).compactMap { if case .drop(let drop) = $0 { drop } else { nil } }
    }

    @Test func shedFramesAreWorkFellBehindOnlyForSubscribersThatAskedAndTouchNoOtherFormat() {
        var harness = Self.harness()
        let raw = harness.subscribe()
        let modern = harness.subscribe(flags: WireHello.wantsStatusFlag, formats: [Self.compressed])
        let old = harness.subscribe(formats: [Self.compressed])
        // Two frames fanned out in the published format only: the compressed ones were never made.
        for surface in [UInt64(1), 2] {
            let plan = harness.machine.beginFrame(format: Harness.nv12, width: 4, height: 2, discontinuity: false)!
            #expect(plan.formats == [Harness.nv12, Self.compressed])
            let template = WireFrame(
                sequence: plan.sequence,
                surfaceID: 0,
                presentationTime: .invalid,
                duration: .invalid,
                publishTime: harness.now,
                bytesUsed: 0,
                flags: 0
            )
            harness.perform(
                harness.machine.deliver(
                    template,
                    format: Harness.nv12,
                    representation: Harness.representation(surface),
                    isConversion: false,
                    now: harness.now
                )
            )
        }
        let (actions, subscribers) = harness.machine.shed(0...1, format: Self.compressed, now: harness.now)
        harness.perform(actions)
        #expect(subscribers == [modern, old])
        #expect(Self.drops(harness, modern) == [WireDrop(0...1, reason: .workFellBehind)])
        #expect(Self.drops(harness, old) == [WireDrop(0...1, reason: .outOfBuffers)])
        #expect(Self.drops(harness, raw).isEmpty)
        #expect(harness.messages(raw).filter { if case .frame = $0 { true } else { false } }.count == 2)
    }

    @Test func aSubscriberThatAskedHearsTheStatusAfterWelcomeAndOnEachChangeAndNoOtherDoes() {
        var harness = Self.harness()
        let modern = harness.subscribe(flags: WireHello.wantsStatusFlag)
        let old = harness.subscribe()
        func statuses(_ id: Harness.ID) -> [WireStatus] {
            harness.messages(id).compactMap { if case .status(let status) = $0 { status } else { nil } }
        }
        #expect(statuses(modern).map(\.level) == [0])
        #expect(harness.messages(modern).first.map { if case .welcome = $0 { true } else { false } } == true)
        // A change of cost alone says nothing; a new level or frame duration does.
        harness.perform(harness.machine.updateStatus(.init(cost: 400), now: harness.now))
        #expect(statuses(modern).count == 1)
        harness.perform(harness.machine.updateStatus(.init(level: 2, factors: 1, cost: 400), now: harness.now))
        let duration = WireTime(value: 1, timescale: 30, flags: 1)
        harness.perform(
            harness.machine.updateStatus(
                .init(level: 2, factors: 1, cost: 400, frameDuration: duration),
                now: harness.now
            )
        )
        #expect(statuses(modern).map(\.level) == [0, 2, 2])
        #expect(statuses(modern).last?.frameDuration == duration)
        #expect(statuses(modern).last?.cost == 400)
        #expect(statuses(old).isEmpty)
        #expect(!harness.messages(old).isEmpty)
    }

    @Test func aMonitorThatAskedGetsAStatusAfterEachReport() {
        var harness = Self.harness()
        let id = harness.connect()
        var hello = WireHello.monitor
        hello.flags = WireHello.wantsStatusFlag
        harness.receive(.hello(hello), from: id)
        let plain = harness.connect()
        harness.receive(.hello(.monitor), from: plain)
        harness.advance(milliseconds: 1001)
        let types = harness.messages(id).map(\.type)
        #expect(types == [.welcome, .monitorReport, .status, .monitorReport, .status])
        #expect(harness.messages(plain).map(\.type) == [.welcome, .monitorReport, .monitorReport])
    }
}

extension PublisherStateMachine {
    /// Moves every subscriber's pending DROP range into its outbound queue (as the flush timer would).
    func flushPendingDropsForTests() {
        for case .subscriber(let session) in connections.values { flushPendingDrop(session) }
    }
}
