import Logging

// Shedding: frames the conversion worker could not make in time, dropped for the subscribers of that format only.

extension PublisherStateMachine {
    // MARK: Shedding

    /// The conversion worker skipped frames `range` in `format` (it was still converting an earlier frame when a
    /// newer one replaced them): every subscriber of that format that was welcomed before a frame began gets a DROP
    /// for it. Subscribers of other formats, the producer's own format first, are not touched: work for one consumer
    /// never slows the others (docs/PROTOCOL.md §5.8).
    ///
    /// The worker calls this in sequence order with its deliveries, so the DROP comes after every FRAME of that
    /// format with a smaller sequence and before every larger one (§4.2).
    ///
    /// - Returns: the actions, and the subscribers that got the drop (for the publisher's shedding log line).
    package mutating func shed(
        _ range: ClosedRange<UInt64>,
        format: UInt32,
        now: UInt64
    ) -> (actions: [Action], subscribers: [ConnectionID]) {
        var actions: [Action] = []
        var subscribers: [ConnectionID] = []
        for id in connections.keys.sorted() {
            guard case .subscriber(let session) = connections[id], session.format == format else { continue }
            // Never a frame it was sent already (a worker that delivered just before the publisher stopped).
            let after = session.lastFrameSequence.map { $0 &+ 1 } ?? 0
            guard max(session.firstSequence, after) <= range.upperBound else { continue }
            let first = max(range.lowerBound, session.firstSequence, after)
            let dropped = first...range.upperBound
            session.shed.saturatingAdd(WireDrop(dropped, reason: .outOfBuffers).frameCount)
            if drop(dropped, .workFellBehind, in: session, now: now) { actions.append(.deadlineChanged) }
            actions.append(.flush(id))
            subscribers.append(id)
        }
        return (actions, subscribers)
    }

    /// The second half of ``reportDropped(reason:count:now:deferring:)`` for the subscribers of `formats`, once the
    /// conversion worker has carried out what it had for them before the loss was reported. Subscribers welcomed since
    /// the report get nothing (their first sequence is past the range).
    package mutating func deferredDrop(
        _ range: ClosedRange<UInt64>,
        reason: WireDropReason,
        formats: [UInt32],
        now: UInt64
    ) -> [Action] {
        var actions: [Action] = []
        for id in connections.keys.sorted() {
            guard case .subscriber(let session) = connections[id], formats.contains(session.format),
                session.firstSequence <= range.upperBound
            else { continue }
            if drop(max(range.lowerBound, session.firstSequence)...range.upperBound, reason, in: session, now: now) {
                actions.append(.deadlineChanged)
            }
            actions.append(.flush(id))
        }
        return actions
    }

    /// The formats of subscribers that receive converted frames (not the format last published): the conversion
    /// worker serves them.
    var convertedSessionFormats: [UInt32] {
        var formats: [UInt32] = []
        for case .subscriber(let session) in connections.values
        where session.format != lastGeometry?.format && !formats.contains(session.format) {
            formats.append(session.format)
        }
        return formats
    }
}

extension WireDropReason {
    /// How the publisher's log names the DROP of a shed frame.
    static let shedName = "workFellBehind (outOfBuffers to a peer that did not ask for STATUS)"
}

// STATUS: system pressure, cost and frame duration for the peers that asked (PROTOCOL.md §5.13).

extension PublisherStateMachine {
    /// What STATUS says, kept by the machine so that a subscriber welcomed later hears the current state at once. The
    /// IO layer updates it (``updateStatus(_:now:)``).
    package struct StatusFields: Hashable, Sendable {
        var level: UInt16 = 0
        var factors: UInt16 = 0
        var cost = WireStatus.unknownCost
        var frameDuration = WireTime.invalid
        /// Frames shed for every subscriber since the publisher started.
        var framesShed: UInt64 = 0

        package init(
            level: UInt16 = 0,
            factors: UInt16 = 0,
            cost: UInt32 = WireStatus.unknownCost,
            frameDuration: WireTime = .invalid,
            framesShed: UInt64 = 0
        ) {
            self.level = level
            self.factors = factors
            self.cost = cost
            self.frameDuration = frameDuration
            self.framesShed = framesShed
        }
    }

    /// The STATUS for one subscriber (its own shed count) or, with nil, for a monitor (everyone's).
    func wireStatus(for session: SubscriberSession?, now: UInt64) -> WireStatus {
        WireStatus(
            level: status.level,
            factors: status.factors,
            cost: status.cost,
            frameDuration: status.frameDuration,
            time: now,
            framesShed: session?.shed ?? status.framesShed
        )
    }

    /// New status fields: when the pressure level, its factors or the frame duration changed, every subscriber that
    /// asked gets a STATUS (a change of cost alone waits for the next one, or the monitors' report).
    package mutating func updateStatus(_ fields: StatusFields, now: UInt64) -> [Action] {
        let changed =
            fields.level != status.level || fields.factors != status.factors
            || fields.frameDuration != status.frameDuration
        status = fields
        guard changed else { return [] }
        var actions: [Action] = []
        for id in connections.keys.sorted() {
            guard case .subscriber(let session) = connections[id], session.wantsStatus else { continue }
            enqueue(.message(.status(wireStatus(for: session, now: now))), in: session)
            if limits.slowSubscribers.verdict(subscriberQueuedMessages: session.outbound.count) == .evict {
                actions += tooSlow(id, queued: session.outbound.count, now: now)
            } else {
                actions.append(.flush(id))
            }
        }
        return actions
    }
}
