import Testing
import TestSupport

@testable import FrameBus

/// The slow-subscriber policy (docs/PROTOCOL.md §4.5, §5.8): when a peer that stops reading is evicted, and when a
/// coalesced DROP range must go out. Queue lengths and times may be anything, so no input may trap.
@Suite(.timeLimit(.minutes(5))) struct SlowSubscriberPolicyTests {
    @Test(arguments: [(0, false), (255, false), (256, false), (257, true), (Int.max, true)])
    func aSubscriberIsEvictedOnlyPastItsQueueLimit(_ example: (queued: Int, evicted: Bool)) {
        let policy = SlowSubscriberPolicy()
        #expect(policy.maximumQueuedMessages == 256, "the reference publisher's limit (docs/PROTOCOL.md §8.1)")
        #expect(policy.verdict(subscriberQueuedMessages: example.queued) == (example.evicted ? .evict : .keep))
    }

    @Test func aMonitorThatAskedForStatusMayHaveTwiceAsManyMessagesWaiting() {
        let policy = SlowSubscriberPolicy()
        #expect(policy.verdict(monitorQueuedMessages: 4, wantsStatus: false) == .keep)
        #expect(policy.verdict(monitorQueuedMessages: 5, wantsStatus: false) == .evict)
        #expect(policy.verdict(monitorQueuedMessages: 8, wantsStatus: true) == .keep)
        #expect(policy.verdict(monitorQueuedMessages: 9, wantsStatus: true) == .evict)
        // A limit that doubles past Int.max saturates instead of trapping.
        var huge = policy
        huge.maximumQueuedMonitorReports = .max
        #expect(huge.verdict(monitorQueuedMessages: .max, wantsStatus: true) == .keep)
    }

    @Test func aDropRangeIsDueOnceTheFlushIntervalHasPassed() {
        let policy = SlowSubscriberPolicy()
        let start: UInt64 = 7_000_000_000
        #expect(policy.dropFlushDeadline(startedAt: start) == start + 100_000_000)
        #expect(!policy.isDropDue(startedAt: start, now: start))
        #expect(!policy.isDropDue(startedAt: start, now: start + 99_999_999))
        #expect(policy.isDropDue(startedAt: start, now: start + 100_000_000))
        #expect(policy.dropFlushDeadline(startedAt: .max - 1) == .max, "saturates")
    }

    @Test func thePublishersConfigurationSetsTheThresholdsTheMachineUses() throws {
        var configuration = Publisher.Configuration(path: "/unused", formats: [.yuv420BiPlanarVideoRange8])
        configuration.maximumQueuedMessages = 9
        configuration.dropFlushInterval = .milliseconds(250)
        configuration.handshakeTimeout = .seconds(2)
        configuration.closeGracePeriod = .milliseconds(300)
        let limits = configuration.limits
        #expect(limits.slowSubscribers.maximumQueuedMessages == 9)
        #expect(limits.slowSubscribers.dropFlushInterval == 250_000_000)
        #expect(limits.reaping.handshakeTimeout == 2_000_000_000)
        #expect(limits.reaping.closeGracePeriod == 300_000_000)
    }
}
