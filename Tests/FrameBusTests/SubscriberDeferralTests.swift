import Testing

@testable import FrameBus

/// The subscriber's side of deferral (docs/PROTOCOL.md §5.1.1): the HELLO's flag, and the fallback for a publisher
/// older than it, as events in, actions out.
@Suite struct SubscriberDeferralTests {
    static let format = PixelFormat.yuv420BiPlanarVideoRange8

    static func hello(_ message: WireMessage) -> WireHello? {
        if case .hello(let hello) = message { return hello }
        return nil
    }

    @Test(arguments: [(false, false), (true, false), (false, true), (true, true)])
    func theHelloSaysDeferredOnlyWhenAskedAndKeepsItsOtherFlags(deferred: Bool, acceptsDMABuf: Bool) throws {
        var machine = SubscriberStateMachine(acceptedFormats: [Self.format], delivery: .latestOnly)
        machine.isDeferred = deferred
        machine.acceptsDMABuf = acceptsDMABuf
        let hello = try #require(Self.hello(machine.connected(offeringRings: true)))
        #expect((hello.flags & WireHello.deferredFlag != 0) == deferred)
        #expect((hello.flags & WireHello.acceptsDMABufFlag != 0) == acceptsDMABuf)
    }

    @Test func aPublisherThatRefusesTheFlagGetsTheNextHelloWithoutItOnce() throws {
        var machine = SubscriberStateMachine(acceptedFormats: [Self.format], delivery: .latestOnly)
        machine.isDeferred = true
        _ = machine.connected(offeringRings: true)
        // What a publisher older than the flag answers (its HELLO decoder refuses unknown flags).
        _ = machine.received(.error(WireErrorMessage(.malformedMessage, "HELLO: flags 0x3")))
        #expect(machine.retriesWithoutOptionalFlags)
        let retry = try #require(Self.hello(machine.connected(offeringRings: true)))
        #expect(retry.flags & WireHello.deferredFlag == 0)
        #expect(retry.flags & WireHello.knowsUnsupportedSurfaceFlag == 0)
        #expect(retry.version == WireProtocol.ringVersion)
        // A later connection (a newer publisher may have replaced it) asks again.
        machine.closed()
        let later = try #require(Self.hello(machine.connected(offeringRings: true)))
        #expect(later.flags & WireHello.deferredFlag != 0)
    }

    @Test(arguments: [
        (true, WireErrorCode.malformedMessage, "expected HELLO"),
        (true, WireErrorCode.noCommonFormat, "flags 0x2"),
    ])
    func otherRefusalsAreNotRetriedWithoutTheFlag(deferred: Bool, code: WireErrorCode, reason: String) {
        var machine = SubscriberStateMachine(acceptedFormats: [Self.format], delivery: .latestOnly)
        machine.isDeferred = deferred
        _ = machine.connected(offeringRings: true)
        _ = machine.received(.error(WireErrorMessage(code, reason)))
        #expect(!machine.retriesWithoutOptionalFlags)
    }

    @Test func aSubscriberThatIsNotDeferredAlsoRetriesWithoutItsOptionalFlagAtAnOlderPublisher() throws {
        var machine = SubscriberStateMachine(acceptedFormats: [Self.format], delivery: .latestOnly)
        let first = try #require(Self.hello(machine.connected(offeringRings: true)))
        #expect(first.flags & WireHello.knowsUnsupportedSurfaceFlag != 0)
        // An older publisher's HELLO decoder refuses bit 3 as an unknown flag.
        _ = machine.received(.error(WireErrorMessage(.malformedMessage, "HELLO: flags 0x9")))
        #expect(machine.retriesWithoutOptionalFlags)
        let retry = try #require(Self.hello(machine.connected(offeringRings: true)))
        #expect(retry.flags & ~WireHello.acceptsDMABufFlag == 0)
    }
}
