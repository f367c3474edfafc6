import Logging

// The held-frame budget: what each subscriber may hold (``HoldingPolicy``).

extension PublisherStateMachine {
    // MARK: The held-frame budget (docs/PROTOCOL.md §7.3, ``HoldingPolicy``)

    /// The most surfaces any subscriber keeps mapped (docs/PROTOCOL.md §8.2).
    static var subscriberSurfaceLimit: Int { 256 }

    /// Frames subscribers of one format may hold together from that format's pool of converted frames when
    /// `conversionBufferLimit` caps it (the limit less the frame being converted); nil otherwise: the pool is as large
    /// as everything subscribers may hold, so only the held-frame budget binds.
    var conversionBudget: Int? { limits.conversionBufferLimit.map { max(1, $0 - 1) } }

    /// How many buffers a pool of converted frames may have: the configured limit, else every frame subscribers may
    /// hold together (the held-frame budget, and never more than `maximumSubscribers` × 255) plus the one being
    /// converted. A pool allocates only the buffers in use.
    var conversionPoolCapacity: Int {
        if let limit = limits.conversionBufferLimit { return limit }
        let most = min(max(limits.maximumSubscribers, 1), Int(UInt16.max)) * HoldingPolicy.largestGrant
        return min(limits.heldFrameBudget ?? most, most) + 1
    }

    /// Subscribers admitted at once (the held-frame budget's capacity).
    var subscriberCapacity: Int {
        limits.holding.subscriberCapacity(budget: limits.heldFrameBudget, maximumSubscribers: limits.maximumSubscribers)
    }

    var holdingDescription: String {
        let budget = limits.heldFrameBudget.map { "\($0) frames" } ?? "unbounded"
        return "budget \(budget), at most \(subscriberCapacity) subscribers"
    }

    /// Whether subscribers of `format` may get converted frames, and so pin that format's conversion pool: every
    /// compressed format (a producer publishes raw frames; their FourCCs start with `&`, docs/PROTOCOL.md §6), and
    /// any format a frame was converted to.
    func isConversionTarget(_ format: UInt32) -> Bool {
        convertedFormats.contains(format) || format >> 24 == 0x26
    }

    /// What a subscriber of `format` is granted against the held-frame budget and, when its conversion pool is
    /// capped, that pool's budget, given those admitted before it; nil when one of them cannot admit it.
    func grant(
        requestedDepth: Int,
        isLatestOnly: Bool,
        format: UInt32,
        before admitted: [SubscriberSession]
    ) -> HoldingPolicy.Grant? {
        let policy = limits.holding
        guard
            var grant = policy.grant(
                requestedDepth: requestedDepth,
                isLatestOnly: isLatestOnly,
                budget: limits.heldFrameBudget,
                committed: admitted.reduce(0) { $0 + $1.heldLimit },
                admitted: admitted.count,
                maximumSubscribers: limits.maximumSubscribers
            )
        else { return nil }
        if let conversionBudget, isConversionTarget(format) {
            let inFormat = admitted.filter { $0.format == format }
            guard
                let converted = policy.grant(
                    requestedDepth: requestedDepth,
                    isLatestOnly: isLatestOnly,
                    budget: conversionBudget,
                    committed: inFormat.reduce(0) { $0 + $1.heldLimit },
                    admitted: inFormat.count,
                    maximumSubscribers: limits.maximumSubscribers
                )
            else { return nil }
            grant.maximumHeldFrames = min(grant.maximumHeldFrames, converted.maximumHeldFrames)
            grant.queueDepth = min(grant.queueDepth, converted.queueDepth)
        }
        return grant
    }

    /// What a new subscriber of `format` is granted; nil when the budgets cannot admit it.
    func admit(requestedDepth: Int, isLatestOnly: Bool, format: UInt32) -> HoldingPolicy.Grant? {
        var admitted: [SubscriberSession] = []
        for case .subscriber(let session) in connections.values { admitted.append(session) }
        return grant(requestedDepth: requestedDepth, isLatestOnly: isLatestOnly, format: format, before: admitted)
    }

    /// Learns the budget from the producer's pool (its allocation threshold), unless one is configured or known.
    ///
    /// Subscribers welcomed before (the producer had not asked for a buffer yet) are admitted again against it.
    package mutating func learnPoolCapacity(_ allocationThreshold: Int) {
        guard limits.heldFrameBudget == nil else { return }
        limits.heldFrameBudget = max(1, allocationThreshold - limits.producerReserve)
        readmit()
    }

    /// Admits every subscriber again against the budgets as they are now, in the order they came: each may then hold
    /// at most its new grant (at least 1), never more than WELCOME said (`maximumHeldFrames` is an upper bound,
    /// docs/PROTOCOL.md §7.3).
    func readmit() {
        var admitted: [SubscriberSession] = []
        for id in connections.keys.sorted() {
            guard case .subscriber(let session) = connections[id] else { continue }
            let grant = grant(
                requestedDepth: Int(session.queueDepth),
                isLatestOnly: session.deliveryMode == 0,
                format: session.format,
                before: admitted
            )
            session.heldLimit = max(1, min(session.maximumHeldFrames, grant?.maximumHeldFrames ?? 1))
            admitted.append(session)
        }
    }
}
