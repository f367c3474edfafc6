import SystemPackage

// Connecting: who listens at the path is checked before anything is said, HELLO offers version 3 when we can make
// rings, and a failed or ended session is retried after the reconnect interval (at once after a refused version 3).

extension SubscriberConnection {
    /// No session: connects when the reconnect interval allows it, else waits on the doorbell. Returns false when the
    /// thread is done.
    func connectOrWait() -> Bool {
        let interval = configuration.reconnectInterval.nanoseconds
        let timeout = configuration.connectTimeout.nanoseconds
        if now < nextAttempt || core.holdsReconnect {
            idle(milliseconds: Int32(clamping: min(interval, 1_000_000_000) / 1_000_000))
            return true
        }
        switch connect(timeout: timeout) {
        case .connected:
            return true
        case .noPublisher(let error):
            if !configuration.reconnects && !hasConnected && now &- startTime >= timeout {
                core.connectionEnded(
                    FrameBusError(
                        .timedOut,
                        "Subscriber.connect",
                        errno: error.errno,
                        message: "no publisher at \(configuration.path)"
                    ),
                    isFinal: true
                )
                return false
            }
        case .failed(let error):
            warn("connecting to \(configuration.path) failed: \(error)")
            core.connectionEnded(error, isFinal: !configuration.reconnects)
            if !configuration.reconnects { return false }
        }
        nextAttempt = now &+ interval
        return true
    }

    /// A session ended: returns whether the thread goes on (to connect again).
    func sessionEnded() -> Bool {
        if retryNow {
            retryNow = false
            nextAttempt = now
            return true
        }
        if !configuration.reconnects { return false }
        nextAttempt = now &+ configuration.reconnectInterval.nanoseconds
        return true
    }

    /// Waits on the doorbell alone (no session), then runs what consumers asked of the connection thread.
    func idle(milliseconds: Int32) {
        _ = Syscall.poll([(core.doorbell.descriptor, PollEvents.readable)], timeout: max(1, milliseconds))
        core.doorbell.drain()
        core.runConnectionThreadPass()
    }

    enum ConnectOutcome {
        case connected
        /// Nobody listens at the path (yet).
        case noPublisher(FrameBusError)
        case failed(FrameBusError)
    }

    func connect(timeout: UInt64) -> ConnectOutcome {
        let connected: Socket
        switch Socket.connect(path: configuration.path, timeoutNanoseconds: 100_000_000) {
        case .success(let socket): connected = socket
        case .failure(let error):
            switch error.errno {
            case .noSuchFileOrDirectory?, .connectionRefused?, .resourceTemporarilyUnavailable?:
                return .noPublisher(error)
            default:
                return .failed(error)
            }
        }
        // Whoever bound the path first is not necessarily our publisher: check who it is before saying anything.
        switch connected.peerCredentials() {
        case .success(let credentials) where configuration.allowedPublisherUserIDs.contains(credentials.uid):
            break
        case .success(let credentials):
            return .failed(
                FrameBusError(
                    .permissionDenied,
                    "Subscriber.connect",
                    message: "the process at \(configuration.path) runs as uid \(credentials.uid), "
                        + "which is not an allowed publisher"
                )
            )
        case .failure(let errno):
            return .failed(FrameBusError(.systemCall, "getsockopt(SO_PEERCRED)", errno: errno))
        }
        guard core.connecting(connected) else { return .connected }  // cancelled meanwhile; the loop ends
        socket = connected
        handshakeDeadline = now &+ timeout
        // A refused peer may find the socket already closed; the ERROR is still there to read.
        var half: RingChannel.Half?
        if configuration.usesSharedMemoryRings && !machine.retriesWithoutRings {
            do { half = try RingChannel.Half(role: .release, futexWake: configuration.usesFutexWakeUps) } catch {
                warn("cannot make shared-memory rings, asking for version 2: \(error)")
            }
        }
        ringHalf = half
        _ = connected.send(machine.connected(offeringRings: half != nil).encoded(), descriptors: half?.descriptors ?? [])
        return .connected
    }
}
