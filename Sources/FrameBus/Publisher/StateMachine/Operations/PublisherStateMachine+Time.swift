import Logging

// Deadlines: handshake timeouts, drop flushes, monitor reports, closing grace.

extension PublisherStateMachine {
    // MARK: Time

    /// Time passed: handshake timeouts, pending DROP ranges, monitor reports, closing connections.
    mutating func tick(now: UInt64) -> [Action] {
        var actions: [Action] = []
        for id in connections.keys.sorted() {
            switch connections[id] {
            case .pending(let credentials, let deadline) where ReapingPolicy.isDue(deadline, now: now):
                actions += fail(
                    id,
                    .handshakeTimeout,
                    "no HELLO within \(limits.reaping.handshakeTimeout / 1_000_000) ms (pid \(credentials.processID))",
                    now: now
                )
            case .subscriber(let session):
                if let pending = session.pendingDrop,
                    limits.slowSubscribers.isDropDue(startedAt: pending.startedAt, now: now)
                {
                    flushPendingDrop(session)
                    if limits.slowSubscribers.verdict(subscriberQueuedMessages: session.outbound.count) == .evict {
                        actions += tooSlow(id, queued: session.outbound.count, now: now)
                    } else {
                        actions.append(.flush(id))
                    }
                }
            case .monitor(var monitor) where now >= monitor.nextReport:
                monitor.nextReport = now &+ limits.monitorInterval
                monitor.outbound.append(.message(.monitorReport(monitorReport(now: now, for: monitor))))
                if monitor.wantsStatus { monitor.outbound.append(.message(.status(wireStatus(for: nil, now: now)))) }
                connections[id] = .monitor(monitor)
                // A STATUS follows each report to a monitor that asked: it may have twice as many messages waiting.
                let verdict = limits.slowSubscribers.verdict(
                    monitorQueuedMessages: monitor.outbound.count,
                    wantsStatus: monitor.wantsStatus
                )
                if verdict == .evict {
                    actions += tooSlow(id, queued: monitor.outbound.count, now: now)
                } else {
                    actions.append(.flush(id))
                }
            case .closing(let deadline, _) where ReapingPolicy.isDue(deadline, now: now):
                forget(id)
                actions.append(.close(id))
            default:
                break
            }
        }
        return actions
    }

    /// The earliest time ``tick(now:)`` has something to do, or nil.
    func nextDeadline() -> UInt64? {
        var earliest: UInt64?
        func consider(_ time: UInt64) { earliest = min(earliest ?? time, time) }
        for connection in connections.values {
            switch connection {
            case .pending(_, let deadline): consider(deadline)
            case .subscriber(let session):
                if let pending = session.pendingDrop {
                    consider(limits.slowSubscribers.dropFlushDeadline(startedAt: pending.startedAt))
                }
            case .monitor(let monitor): consider(monitor.nextReport)
            case .closing(let deadline, _): consider(deadline)
            }
        }
        return earliest
    }
}
