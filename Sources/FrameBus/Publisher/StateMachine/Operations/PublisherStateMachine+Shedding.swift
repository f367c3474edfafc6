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
            guard case .subscriber(let session) = connections[id], session.format == format,
                session.firstSequence <= range.upperBound
            else { continue }
            let first = max(range.lowerBound, session.firstSequence)
            let dropped = first...range.upperBound
            session.shed.saturatingAdd(WireDrop(dropped, reason: .outOfBuffers).frameCount)
            if drop(dropped, shedReason(for: session), in: session, now: now) { actions.append(.deadlineChanged) }
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

    /// The DROP reason a subscriber gets for a frame shed because the work for it fell behind: `outOfBuffers` (the
    /// publisher could not make its format in time), the meaning version 1…3 subscribers already know (§5.8).
    func shedReason(for session: SubscriberSession) -> WireDropReason {
        .outOfBuffers
    }
}

extension WireDropReason {
    /// How the publisher's log names the DROP of a shed frame.
    static let shedName = "outOfBuffers"
}
