import Logging

// Publishing: frame plans, fan-out, announcing and retiring surfaces, drops.

extension PublisherStateMachine {
    // MARK: Publishing

    /// Every sequence number is used (2⁶⁴−1 of them; only reachable by reporting absurd drop counts): the
    /// publisher can publish nothing more and must be restarted.
    var isSequenceSpaceExhausted: Bool { nextSequence == .max }

    /// Starts a frame: its sequence number, its discontinuity flag, and the formats someone needs.
    ///
    /// Returns nil after ``stop(now:)``.
    package mutating func beginFrame(format: UInt32, width: UInt32, height: UInt32, discontinuity: Bool) -> FramePlan? {
        guard !isStopped, !isSequenceSpaceExhausted else { return nil }
        let sequence = nextSequence
        nextSequence &+= 1
        published.saturatingAdd(1)
        var flag = discontinuity || pendingDiscontinuity
        if let last = lastGeometry, last != (format, width, height) { flag = true }
        lastGeometry = (format, width, height)
        pendingDiscontinuity = false
        // Refilled in place: the last plan is gone by now, so its array is reused rather than a new one allocated.
        planFormats.removeAll(keepingCapacity: true)
        for case .subscriber(let session) in connections.values
        where !session.isAwaitingDeferredStart && !planFormats.contains(session.format) {
            if session.format == format {
                planFormats.insert(session.format, at: 0)
            } else {
                planFormats.append(session.format)
            }
        }
        return FramePlan(sequence: sequence, isDiscontinuity: flag, formats: planFormats)
    }

    /// Sends frame `template.sequence` in `format` to every subscriber of that format that was welcomed before
    /// the frame began; `representation` nil means the format could not be made (DROP `outOfBuffers`).
    package mutating func deliver(
        _ template: WireFrame,
        format: UInt32,
        representation: Representation?,
        isConversion: Bool,
        now: UInt64
    ) -> [Action] {
        var actions: [Action] = []
        deliver(
            template,
            format: format,
            representation: representation,
            isConversion: isConversion,
            now: now,
            into: &actions
        )
        return actions
    }

    /// Whether ``deliver(_:format:representation:isConversion:now:into:)`` of frame `sequence` in `format` on surface
    /// `surfaceID` decides the same whatever releases the subscribers' rings still hold: every subscriber it goes to
    /// is below its held-frame limit and knows the surface already (or has room to announce it without retiring an
    /// idle one), and the format's pool does not start being pinned by this frame. Releases only lower held counts and
    /// make surfaces idle, so then reaping them after the frame's wake-ups admits exactly what reaping them first
    /// would have (the publisher reaps after waking then, docs/PROTOCOL.md §9.5).
    package func admitsRegardlessOfReleases(
        sequence: UInt64,
        format: UInt32,
        surfaceID: UInt64?,
        isConversion: Bool
    ) -> Bool {
        if isConversion, conversionBudget != nil, !convertedFormats.contains(format) { return false }
        for case .subscriber(let session) in connections.values
        where session.format == format && session.firstSequence <= sequence {
            // No representation: a DROP for everyone, whatever they hold.
            guard let surfaceID else { continue }
            guard session.held.count < session.heldLimit else { return false }
            if session.announced[surfaceID] == nil && session.announced.count >= session.maximumAnnouncedSurfaces {
                return false
            }
        }
        return true
    }

    /// ``deliver(_:format:representation:isConversion:now:)``, appending its actions to `actions`: the publisher
    /// passes an array it keeps (emptied, its capacity kept), so a frame allocates no array for its actions.
    package mutating func deliver(
        _ template: WireFrame,
        format: UInt32,
        representation: Representation?,
        isConversion: Bool,
        now: UInt64,
        into actions: inout [Action]
    ) {
        if representation != nil && isConversion { conversions.saturatingAdd(1) }
        if isConversion, conversionBudget != nil, !convertedFormats.contains(format) {
            // A format first converted to (the producer published another): its subscribers now pin its pool.
            convertedFormats.insert(format)
            readmit()
        }
        let sequence = template.sequence
        // Sessions are objects updated in place, so the loop never writes to `connections`; subscribers found too
        // slow are failed after it (failing one rewrites its entry, which inside the loop would copy the dictionary).
        var tooSlowSubscribers: [(id: ConnectionID, queued: Int)] = []
        for (id, connection) in connections {
            guard case .subscriber(let session) = connection, session.format == format,
                session.firstSequence <= sequence
            else { continue }
            if !session.hasHadFrame { noteFirstFrame(of: session) }
            guard let representation else {
                if drop(sequence...sequence, .outOfBuffers, in: session, now: now) { actions.append(.deadlineChanged) }
                continue
            }
            let surfaceV1 = representation.surfaceV1
            let sendable =
                session.version == 1
                ? surfaceV1 != nil
                : (representation.surface.backing == .memfd || session.acceptsDMABuf)
            guard sendable else {
                // §5.8: a surface it cannot take is an `outOfBuffers` drop that says why (reason 5) when it asked.
                if drop(sequence...sequence, .outOfBuffers, in: session, now: now, unsupportedSurface: true) {
                    actions.append(.deadlineChanged)
                }
                continue
            }
            guard session.held.count < session.heldLimit else {
                if drop(sequence...sequence, .outOfBuffers, in: session, now: now) { actions.append(.deadlineChanged) }
                continue
            }
            let surfaceID = representation.surfaceID
            if session.announced[surfaceID] == nil {
                if session.announced.count >= session.maximumAnnouncedSurfaces {
                    retireOldestIdleSurface(of: session)
                }
                let message: WireMessage =
                    session.version == 1 ? .surfaceV1(surfaceV1!) : .surface(representation.surface)
                enqueue(.surface(message, representation.resource), in: session)
                session.announceCounter &+= 1
                session.announced[surfaceID] = session.announceCounter
            }
            var frame = template
            frame.surfaceID = surfaceID
            frame.bytesUsed = representation.bytesUsed
            if session.lastAttachments != frame.attachments {
                frame.flags |= WireFrame.attachmentsChangedFlag
                session.lastAttachments = frame.attachments
            }
            enqueue(.message(.frame(frame)), in: session)
            session.lastFrameSequence = sequence
            session.held[sequence] = HeldFrame(
                surfaceID: surfaceID,
                resource: representation.resource,
                sentAt: now,
                bytesUsed: representation.bytesUsed
            )
            session.delivered.saturatingAdd(1)
            session.bytesDelivered.saturatingAdd(representation.bytesUsed)
            if limits.slowSubscribers.verdict(subscriberQueuedMessages: session.outbound.count) == .evict {
                tooSlowSubscribers.append((id, session.outbound.count))
                continue
            }
            actions.append(.flush(id))
        }
        for subscriber in tooSlowSubscribers {
            actions += tooSlow(subscriber.id, queued: subscriber.queued, now: now)
        }
    }

    /// The producer lost `count` frames upstream (or drops them itself for `reason`): they use sequence numbers
    /// and every subscriber gets a DROP for them (coalesced with adjacent drops).
    ///
    /// Subscribers of `deferring` formats are left out: the conversion worker still has frames before these for them,
    /// and tells them with ``deferredDrop(_:reason:formats:now:)`` once those are out (§4.2's order).
    mutating func reportDropped(
        reason: WireDropReason,
        count: UInt64,
        now: UInt64,
        deferring: [UInt32] = []
    ) -> (ClosedRange<UInt64>, [Action])? {
        guard !isStopped, !isSequenceSpaceExhausted, count > 0 else { return nil }
        // Sequence numbers 0…2⁶⁴−2 are usable; a count past the end is cut there (and the stream is then over).
        let first = nextSequence
        let last = first.addingSaturating(count - 1) == .max ? UInt64.max - 1 : first + (count - 1)
        let range = first...last
        nextSequence = last + 1
        let used = last - first + 1
        published.saturatingAdd(used)
        droppedAtSource[reason, default: 0].saturatingAdd(used)
        if reason == .discontinuity { pendingDiscontinuity = true }
        var actions: [Action] = []
        for id in connections.keys.sorted() {
            // A deferred subscriber waiting for its start is told nothing of frames before it (§5.1.1); the
            // conversion worker tells subscribers of a format it is still making of these frames itself.
            guard case .subscriber(let session) = connections[id], !session.isAwaitingDeferredStart,
                !deferring.contains(session.format)
            else { continue }
            if drop(range, reason, in: session, now: now) { actions.append(.deadlineChanged) }
            actions.append(.flush(id))
        }
        return (range, actions)
    }

    /// The producer's pool freed a surface for good: retire it everywhere it is announced and not held.
    mutating func surfaceFreed(_ surfaceID: UInt64) -> [Action] {
        var actions: [Action] = []
        for id in connections.keys.sorted() {
            guard case .subscriber(let session) = connections[id], session.announced[surfaceID] != nil,
                !session.held.values.contains(where: { $0.surfaceID == surfaceID })
            else { continue }
            session.announced[surfaceID] = nil
            enqueue(.message(.retireSurface(surfaceID: surfaceID)), in: session)
            actions.append(.flush(id))
        }
        return actions
    }

    mutating func retireOldestIdleSurface(of session: SubscriberSession) {
        var heldSurfaces = Set<UInt64>()
        for frame in session.held.values { heldSurfaces.insert(frame.surfaceID) }
        // maximumAnnouncedSurfaces > maximumHeldFrames, so an idle one exists whenever the limit is reached.
        guard
            let oldest = session.announced.filter({ !heldSurfaces.contains($0.key) }).min(by: { $0.value < $1.value })
        else { return }
        session.announced[oldest.key] = nil
        enqueue(.message(.retireSurface(surfaceID: oldest.key)), in: session)
    }

    /// Records dropped frames for one subscriber: extends the pending range or sends it and starts another.
    @discardableResult
    mutating func drop(
        _ range: ClosedRange<UInt64>,
        _ reason: WireDropReason,
        in session: SubscriberSession,
        now: UInt64,
        unsupportedSurface: Bool = false
    ) -> Bool {
        // Reason 4 goes only to a subscriber that said it knows it; any other gets outOfBuffers (PROTOCOL.md §5.8).
        let reason: WireDropReason = reason == .workFellBehind && !session.wantsStatus ? .outOfBuffers : reason
        let count = WireDrop(range, reason: reason).frameCount
        switch reason {
        case .frameWasLate: session.droppedLate.saturatingAdd(count)
        // The monitor's record has one counter for both: the publisher could not give the frame to this subscriber.
        case .outOfBuffers, .workFellBehind: session.droppedOutOfBuffers.saturatingAdd(count)
        case .discontinuity: session.droppedDiscontinuity.saturatingAdd(count)
        }
        if unsupportedSurface { session.droppedUnsupportedSurface.saturatingAdd(count) }
        let wireReason =
            unsupportedSurface && session.knowsUnsupportedSurface
            ? WireDropReason.unsupportedSurfaceRawValue : reason.rawValue
        if var pending = session.pendingDrop, pending.wireReason == wireReason, pending.range.upperBound < .max,
            pending.range.upperBound + 1 == range.lowerBound
        {
            pending.range = pending.range.lowerBound...range.upperBound
            session.pendingDrop = pending
            return false
        }
        flushPendingDrop(session)
        session.pendingDrop = PendingDrop(range: range, reason: reason, startedAt: now, wireReason: wireReason)
        return true
    }

    func flushPendingDrop(_ session: SubscriberSession) {
        guard let pending = session.pendingDrop else { return }
        session.pendingDrop = nil
        session.outbound.append(
            .message(
                .drop(
                    WireDrop(
                        firstSequence: pending.range.lowerBound,
                        lastSequence: pending.range.upperBound,
                        reason: pending.wireReason
                    )
                )
            )
        )
    }

    /// Queues a message after any pending DROP, so drops stay in sequence order (docs/PROTOCOL.md §4.2).
    func enqueue(_ item: Outbound, in session: SubscriberSession) {
        flushPendingDrop(session)
        session.outbound.append(item)
    }
}
