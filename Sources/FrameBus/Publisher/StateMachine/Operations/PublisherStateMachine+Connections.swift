import Logging

// Connections accepted, closed, and the outbound queue the IO layer drains.

extension PublisherStateMachine {
    // MARK: Connections

    /// Whether the IO layer may accept another connection now (pending handshakes are capped; beyond the cap new
    /// connections wait in the kernel's listen backlog).
    var canAcceptConnection: Bool { !isStopped && pendingCount < limits.maximumPendingHandshakes }

    /// A connection was accepted. Nothing is sent until its HELLO is read.
    ///
    /// - Precondition: ``canAcceptConnection``.
    package mutating func connectionAccepted(_ credentials: Credentials, now: UInt64) -> ConnectionID {
        precondition(canAcceptConnection, "accepted a connection beyond the pending-handshake cap")
        let id = ConnectionID(rawValue: nextConnectionID)
        nextConnectionID &+= 1
        connections[id] = .pending(credentials, deadline: limits.reaping.handshakeDeadline(acceptedAt: now))
        pendingCount += 1
        return id
    }

    /// The connection broke or the peer closed it: everything it held is released at once.
    mutating func connectionClosed(_ id: ConnectionID, reason: String, now: UInt64) -> [Action] {
        guard let connection = connections[id] else { return [] }
        var actions: [Action] = []
        if case .subscriber(let session) = connection {
            log(
                .debug,
                "subscriber-left",
                "subscriber \(id) (pid \(session.credentials.processID)) left: \(reason); released \(session.held.count) frames",
                now: now,
                &actions
            )
        }
        forget(id)
        actions.append(.close(id))
        return actions
    }

    /// The messages waiting to be sent on a connection, oldest first.
    func outbound(of id: ConnectionID) -> ArraySlice<Outbound> {
        switch connections[id] {
        case .subscriber(let session): session.outbound[...]
        case .monitor(let monitor): monitor.outbound[...]
        case .closing(_, let outbound): outbound[...]
        case .pending, nil: []
        }
    }

    /// Whether a connection has something to send (the IO layer polls it for room to write).
    func hasOutbound(_ id: ConnectionID) -> Bool { !outbound(of: id).isEmpty }

    /// The IO layer sent the first `count` messages of ``outbound(of:)``.
    mutating func sent(_ count: Int, on id: ConnectionID, now: UInt64) -> [Action] {
        guard count > 0, let connection = connections[id] else { return [] }
        switch connection {
        case .subscriber(let session):
            removeFirst(count, of: &session.outbound)
        case .monitor(var monitor):
            removeFirst(count, of: &monitor.outbound)
            connections[id] = .monitor(monitor)
        case .closing(let deadline, var outbound):
            removeFirst(count, of: &outbound)
            if outbound.isEmpty {
                forget(id)
                return [.close(id)]
            }
            connections[id] = .closing(deadline: deadline, outbound: outbound)
        case .pending:
            break
        }
        return []
    }

    /// Removes the first `count` items of an outbound queue; what a SURFACE kept alive goes to ``released``.
    mutating func removeFirst(_ count: Int, of outbound: inout [Outbound]) {
        let count = min(count, outbound.count)
        for case .surface(_, let resource) in outbound[..<count] { released.append(resource) }
        outbound.removeFirst(count)
    }

    // MARK: What the machine let go of

    /// Hands over everything the machine let go of since the last call (``released``): released frames' resources,
    /// those of sent SURFACEs and of forgotten connections. The IO layer calls this before unlocking and drops the
    /// values after, so no buffer's last reference goes away under its lock.
    package mutating func takeReleased() -> [Resource] {
        guard !released.isEmpty else { return [] }
        var taken: [Resource] = []
        swap(&taken, &released)
        return taken
    }
}
