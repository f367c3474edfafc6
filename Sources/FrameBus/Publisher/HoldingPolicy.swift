/// How many frames each subscriber may hold at once: the publisher's admission budget (docs/PROTOCOL.md §7.3),
/// one value in ``Publisher/Configuration/holdingPolicy``, as iceoryx2 names its publisher's delivery strategy.
///
/// A frame a subscriber holds pins a buffer of the pool it came from, so subscribers together may pin at most a
/// **budget** of each pool: for the producer's pool its `allocationThreshold` minus ``producerReserve`` (learnt from
/// the pool ``Publisher/makePixelBuffer(from:)`` or ``Publisher/nextPixelBuffer(from:)`` is given), or ``budget``
/// when set. A bigger pool is a bigger budget; a pool only allocates the buffers that are used, so a large
/// threshold costs memory only while subscribers really hold frames. A pool of converted frames (another format
/// for some subscribers) holds the whole budget plus the frame being converted, unless
/// ``Publisher/Configuration/conversionBufferLimit`` caps it, in which case its own budget is admitted the same way.
///
/// **Admission.** A subscriber asking for queue depth *d* wants *d* + ``extraHeldFrames`` frames (the queue, plus
/// frames in its consumer's hands); a latest-only one wants at least 3 (one in its consumer's hands, one waiting,
/// one arriving to replace the waiting one), so a busy latest-only consumer always has a newer frame replace the
/// waiting one. It gets what it wants while the budget has it after keeping the **fair minimum** *m* for every
/// subscriber still to come (up to the publisher's `maximumSubscribers`), else what is left. *m* is
/// ``minimumHeldFrames`` (3), lowered to budget ÷ `maximumSubscribers` (at least 1) when the budget cannot give
/// every subscriber that many; when fewer than `maximumSubscribers` × *m* frames exist, at most budget ÷ *m*
/// subscribers are admitted. A subscriber that leaves gives its frames back to the budget. What one subscriber
/// holds never exceeds its grant, so a hoarder costs only itself.
///
/// With the defaults and `framebus publish`'s default pool (2 + 3 × 16 + 16 buffers): every one of 16 subscribers
/// gets at least 3, and one recorder asking for `queue(depth: 16)` gets 16 whenever it connects.
public struct HoldingPolicy: Hashable, Sendable {
    /// Frames all subscribers together may hold from the producer's pool; nil: the pool's allocation threshold minus
    /// ``producerReserve``, learnt from ``Publisher/makePixelBuffer(from:)`` (no bound until then).
    public var budget: Int?
    /// Buffers of the producer's pool never counted in the budget: one being filled, one being published (0…65535).
    public var producerReserve: Int
    /// Frames a subscriber may hold beyond the queue depth it asks for (0…65535, default 2, so that a latest-only
    /// subscriber wants exactly the 3 it needs; what it gets is capped at 255).
    public var extraHeldFrames: Int
    /// The fair minimum kept in the budget for each subscriber still to come (1…255).
    public var minimumHeldFrames: Int

    /// The most frames one subscriber is ever granted: a subscriber keeps at most 256 surfaces (docs/PROTOCOL.md
    /// §8.2), and its announced-surface limit must exceed what it holds.
    public static let largestGrant = 255
    /// What a latest-only subscriber needs so that a newer frame can replace the waiting one while its consumer works
    /// on a third.
    public static let latestOnlyFrames = 3

    /// Creates a policy (the defaults are the reference publisher's, docs/PROTOCOL.md §8.1).
    public init(budget: Int? = nil, producerReserve: Int = 2, extraHeldFrames: Int = 2, minimumHeldFrames: Int = 3) {
        self.budget = budget
        self.producerReserve = producerReserve
        self.extraHeldFrames = extraHeldFrames
        self.minimumHeldFrames = minimumHeldFrames
    }

    /// What a subscriber was granted.
    public struct Grant: Hashable, Sendable {
        /// Frames it may hold at once (WELCOME's `maximumHeldFrames`), 1…``HoldingPolicy/largestGrant``.
        public var maximumHeldFrames: Int
        /// Its queue depth (WELCOME's `queueDepth`): 1 for latest-only, else at most the depth asked for and at most
        /// ``maximumHeldFrames``.
        public var queueDepth: Int
    }

    /// The frames a subscriber asks for: its depth plus ``extraHeldFrames`` (at least ``latestOnlyFrames`` for
    /// latest-only), at most ``largestGrant``. Any input gives an answer.
    public func wantedFrames(requestedDepth: Int, isLatestOnly: Bool) -> Int {
        let depth = isLatestOnly ? 1 : Self.clamp(requestedDepth, 1, Self.largestGrant)
        let wanted = depth + Self.clamp(extraHeldFrames, 0, Self.largestGrant)
        return min(isLatestOnly ? max(wanted, Self.latestOnlyFrames) : wanted, Self.largestGrant)
    }

    /// The fair minimum under `budget`: ``minimumHeldFrames``, or budget ÷ `maximumSubscribers` if that is less (at
    /// least 1).
    public func fairMinimum(budget: Int, maximumSubscribers: Int) -> Int {
        let share = max(1, budget) / max(1, maximumSubscribers)
        return Self.clamp(share, 1, Self.clamp(minimumHeldFrames, 1, Self.largestGrant))
    }

    /// Subscribers admitted at once: `maximumSubscribers`, or fewer when `budget` cannot keep the fair minimum for
    /// each; without a budget, `maximumSubscribers`.
    public func subscriberCapacity(budget: Int?, maximumSubscribers: Int) -> Int {
        let most = max(1, maximumSubscribers)
        guard let budget else { return most }
        let budgetFrames = max(1, budget)
        return max(1, min(most, budgetFrames / fairMinimum(budget: budgetFrames, maximumSubscribers: most)))
    }

    /// Admits one more subscriber: what it gets, or nil when `budget` cannot admit it (ERROR `tooManySubscribers`).
    ///
    /// Pure arithmetic on any input (a requested depth comes from a peer): nothing traps, and the grants of
    /// subscribers admitted one after another never add up to more than `budget` while none leaves.
    ///
    /// - Parameters:
    ///   - requestedDepth: the depth asked for (HELLO's `queueDepth`); ignored for latest-only.
    ///   - isLatestOnly: latest-only delivery.
    ///   - budget: the frames subscribers may hold together; nil: no bound.
    ///   - committed: frames granted to the subscribers already admitted.
    ///   - admitted: how many those are.
    ///   - maximumSubscribers: the publisher's `maximumSubscribers`.
    public func grant(
        requestedDepth: Int,
        isLatestOnly: Bool,
        budget: Int?,
        committed: Int,
        admitted: Int,
        maximumSubscribers: Int
    ) -> Grant? {
        let wanted = wantedFrames(requestedDepth: requestedDepth, isLatestOnly: isLatestOnly)
        let most = max(1, maximumSubscribers)
        let admitted = max(0, admitted)
        guard admitted < subscriberCapacity(budget: budget, maximumSubscribers: most) else { return nil }
        var held = wanted
        if let budget {
            let budgetFrames = max(1, budget)
            let minimum = fairMinimum(budget: budgetFrames, maximumSubscribers: most)
            let stillToCome = subscriberCapacity(budget: budgetFrames, maximumSubscribers: most) - admitted - 1
            // stillToCome < capacity ≤ budget ÷ minimum, so the product fits; the subtractions are checked.
            let reserved = stillToCome * minimum
            let (afterCommitted, overflowA) = budgetFrames.subtractingReportingOverflow(max(0, committed))
            let (left, overflowB) = afterCommitted.subtractingReportingOverflow(reserved)
            guard !overflowA, !overflowB, left >= 1 else { return nil }
            held = min(wanted, left)
        }
        let depth = isLatestOnly ? 1 : min(Self.clamp(requestedDepth, 1, Self.largestGrant), held)
        return Grant(maximumHeldFrames: held, queueDepth: depth)
    }

    private static func clamp(_ value: Int, _ lower: Int, _ upper: Int) -> Int { min(max(value, lower), upper) }
}
