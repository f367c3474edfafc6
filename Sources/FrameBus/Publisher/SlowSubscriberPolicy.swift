/// What a subscriber (or monitor) that falls behind gets from the publisher: the slow-subscriber policy, one value in
/// the state machine's limits, as ``HoldingPolicy`` is the admission policy (docs/PROTOCOL.md §4.5, §5.8,
/// §7.3, §8.1).
///
/// A subscriber falls behind in two ways, and each has its answer:
/// - **It holds every frame it may** (its grant, ``HoldingPolicy``): the frames it cannot take are dropped for it
///   alone, as DROP `outOfBuffers` (or another reason), never delaying anyone else. Adjacent drops are coalesced into
///   one range, sent at most ``dropFlushInterval`` after the range began, so a subscriber that misses frames for a
///   while gets a few DROP messages, not one per frame.
/// - **It stops reading its socket**: messages queue for it. When more than ``maximumQueuedMessages`` wait, it is
///   evicted: ERROR `tooSlow`, every frame it held released at once, its connection reaped after the grace period
///   (``ReapingPolicy``). A monitor is evicted past ``maximumQueuedMonitorReports`` reports (twice that when it asked
///   for STATUS, which follows each report). What waits for one peer is bounded, so a peer that never reads costs
///   bounded memory and never slows the others.
struct SlowSubscriberPolicy: Hashable, Sendable {
    /// Most messages waiting for one subscriber before it is evicted (`Publisher.Configuration.maximumQueuedMessages`).
    var maximumQueuedMessages = 256
    /// Most monitor reports waiting for one monitor before it is evicted.
    var maximumQueuedMonitorReports = 4
    /// The longest a DROP range is held back to coalesce adjacent drops, in nanoseconds
    /// (`Publisher.Configuration.dropFlushInterval`).
    var dropFlushInterval: UInt64 = 100_000_000

    /// What happens to a peer with messages waiting.
    enum Verdict: Hashable, Sendable {
        /// Send what waits.
        case keep
        /// End it with ERROR `tooSlow`.
        case evict
    }

    /// A subscriber with `queuedMessages` waiting on its socket.
    func verdict(subscriberQueuedMessages queuedMessages: Int) -> Verdict {
        queuedMessages > maximumQueuedMessages ? .evict : .keep
    }

    /// A monitor with `queuedMessages` waiting; `wantsStatus`: a STATUS follows each of its reports.
    func verdict(monitorQueuedMessages queuedMessages: Int, wantsStatus: Bool) -> Verdict {
        let (doubled, overflow) = maximumQueuedMonitorReports.multipliedReportingOverflow(by: 2)
        let limit = wantsStatus ? (overflow ? .max : doubled) : maximumQueuedMonitorReports
        return queuedMessages > limit ? .evict : .keep
    }

    /// When a DROP range that began at `startedAt` is sent at the latest (monotonic nanoseconds; saturating).
    func dropFlushDeadline(startedAt: UInt64) -> UInt64 {
        let (deadline, overflow) = startedAt.addingReportingOverflow(dropFlushInterval)
        return overflow ? .max : deadline
    }

    /// Whether a DROP range that began at `startedAt` must be sent at `now`.
    func isDropDue(startedAt: UInt64, now: UInt64) -> Bool {
        now &- startedAt >= dropFlushInterval
    }
}
