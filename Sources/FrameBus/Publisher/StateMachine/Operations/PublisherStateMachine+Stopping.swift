import Logging

// Ending the stream, and failing one connection.

extension PublisherStateMachine {
    // MARK: Ending

    /// Stops: END_OF_STREAM to subscribers and monitors, ERROR `shuttingDown` to handshakes; every held frame is
    /// released. The IO layer sends what it can once and closes every connection. Idempotent.
    mutating func stop(now: UInt64) -> [Action] {
        guard !isStopped else { return [] }
        isStopped = true
        let last = nextSequence == 0 ? UInt64.max : nextSequence - 1
        let end = WireMessage.endOfStream(WireEndOfStream(lastSequence: last, reason: 0))
        var actions: [Action] = []
        for id in connections.keys.sorted() {
            var outbound: [Outbound]
            switch connections[id] {
            case .pending:
                outbound = [.message(.error(WireErrorMessage(.shuttingDown, "publisher shutting down")))]
            case .subscriber(let session):
                flushPendingDrop(session)
                // Frames already queued are dropped with the rest: the subscriber stops holding them at EOF.
                outbound = session.outbound.filter {
                    if case .message(.drop) = $0 { return true } else { return false }
                }
                outbound.append(.message(end))
            case .monitor:
                outbound = [.message(end)]
            case .closing(_, let queued):
                outbound = queued
            case nil:
                continue
            }
            forget(id)
            connections[id] = .closing(deadline: now, outbound: outbound)
            actions.append(.flush(id))
            actions.append(.close(id))
        }
        return actions
    }

    /// Forgets a connection after the IO layer closed it following ``stop(now:)``.
    mutating func closedAfterStop(_ id: ConnectionID) {
        forget(id)
    }

    // MARK: Failing

    /// Sends an ERROR and closes: the connection releases everything it holds now and sends nothing else.
    mutating func fail(_ id: ConnectionID, _ code: WireErrorCode, _ reason: String, now: UInt64) -> [Action] {
        guard let connection = connections[id] else { return [] }
        var actions: [Action] = []
        let who: String
        switch connection {
        case .pending(let credentials, _): who = "connection \(id) (pid \(credentials.processID))"
        case .subscriber(let session): who = "subscriber \(id) (pid \(session.credentials.processID))"
        case .monitor(let monitor): who = "monitor \(id) (pid \(monitor.credentials.processID))"
        case .closing: return []
        }
        log(.warning, "\(code)", "closing \(who): \(code): \(reason)", now: now, &actions)
        forget(id)
        connections[id] = .closing(
            deadline: limits.reaping.closingDeadline(failedAt: now),
            outbound: [.message(.error(WireErrorMessage(code, reason)))]
        )
        actions.append(.flush(id))
        return actions
    }

    mutating func tooSlow(_ id: ConnectionID, queued: Int, now: UInt64) -> [Action] {
        fail(id, .tooSlow, "stopped reading: \(queued) messages queued", now: now)
    }

    /// Removes a connection's session and fixes the counts; its held frames and queued SURFACEs go to ``released``.
    mutating func forget(_ id: ConnectionID) {
        guard let connection = connections.removeValue(forKey: id) else { return }
        switch connection {
        case .pending: pendingCount -= 1
        case .subscriber(let session):
            for frame in session.held.values { released.append(frame.resource) }
            session.held.removeAll()
            removeFirst(session.outbound.count, of: &session.outbound)
            subscriberCount -= 1
            departed.delivered.saturatingAdd(session.delivered)
            departed.bytesDelivered.saturatingAdd(session.bytesDelivered)
            departed.droppedLate.saturatingAdd(session.droppedLate)
            departed.droppedOutOfBuffers.saturatingAdd(session.droppedOutOfBuffers)
            departed.droppedDiscontinuity.saturatingAdd(session.droppedDiscontinuity)
        case .monitor: monitorCount -= 1
        case .closing(_, var outbound): removeFirst(outbound.count, of: &outbound)
        }
    }

    /// Debug lines pass; warnings and worse are rate-limited per key (a flood of bad peers writes a few lines).
    mutating func log(
        _ level: Logger.Level,
        _ key: String,
        _ message: String,
        now: UInt64,
        _ actions: inout [Action]
    ) {
        if level <= .debug {
            actions.append(.log(level, message))
            return
        }
        if let line = logLimiter.admit(key: key, message: message, now: now, interval: limits.logInterval) {
            actions.append(.log(level, line))
        }
    }
}
