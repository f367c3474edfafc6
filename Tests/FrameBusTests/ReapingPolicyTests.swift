import Testing
import TestSupport

@testable import FrameBus

/// The reaping policy (docs/PROTOCOL.md §4.1, §4.5): when a silent connection or a failed one is let go of; its
/// deadlines saturate rather than wrap, so a clock near the end of its range never reaps a connection at once.
@Suite(.timeLimit(.minutes(5))) struct ReapingPolicyTests {
    @Test func aSilentConnectionIsReapedAtTheHandshakeTimeoutAndNotBefore() {
        let policy = ReapingPolicy()
        let accepted: UInt64 = 1_000
        let deadline = policy.handshakeDeadline(acceptedAt: accepted)
        #expect(deadline == accepted + 5_000_000_000)
        #expect(!ReapingPolicy.isDue(deadline, now: deadline - 1))
        #expect(ReapingPolicy.isDue(deadline, now: deadline))
    }

    @Test func aFailedConnectionGetsTheGracePeriodToReadItsError() {
        var policy = ReapingPolicy()
        policy.closeGracePeriod = 0
        #expect(ReapingPolicy.isDue(policy.closingDeadline(failedAt: 42), now: 42), "no grace: closed at once")
        policy.closeGracePeriod = 1_000_000_000
        #expect(policy.closingDeadline(failedAt: 42) == 1_000_000_042)
    }

    @Test func deadlinesNearTheEndOfTheClockSaturate() {
        let policy = ReapingPolicy()
        #expect(policy.handshakeDeadline(acceptedAt: .max - 10) == .max)
        #expect(policy.closingDeadline(failedAt: .max) == .max)
        #expect(!ReapingPolicy.isDue(.max, now: .max - 1))
    }

    @Test func theMachineReapsASilentConnectionAtTheConfiguredTimeout() {
        var harness = MachineHarness { $0.reaping.handshakeTimeout = 2_000_000 }
        let silent = harness.connect()
        harness.advance(milliseconds: 1)
        #expect(harness.errors(silent).isEmpty)
        harness.advance(milliseconds: 1)
        #expect(harness.errors(silent).map(\.code) == [WireErrorCode.handshakeTimeout.rawValue])
        #expect(harness.closed.contains(silent))
    }
}
