import Foundation
import Logging
import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces
import Synchronization
import SystemPackage

// The loop thread: poll, accept, read, time.

extension PublisherCore {
    // MARK: The event loop

    /// Most datagrams read from one connection per turn, so one busy peer cannot starve the others.
    static let readsPerTurn = 64

    /// How long the listener is left alone after `accept` failed (out of descriptors).
    static let acceptPause: UInt64 = 100_000_000

    /// One turn of the event loop; false when the publisher stopped.
    func runOnce() -> Bool {
        var interests: [(descriptor: Int32, events: Int16)] = [(doorbell.descriptor, PollEvents.readable)]
        var polled: [(ConnectionID, Socket)] = []
        var ringPolled: [ConnectionID] = []
        let (stopped, listening, timeout) = withState { state -> (Bool, Bool, Int32) in
            let machine = state.machine
            let now = ProcessInfoShim.monotonicNanoseconds()
            let paused = now < state.acceptPausedUntil
            let listening = machine.canAcceptConnection && !paused
            if listening { interests.append((listener.descriptor, PollEvents.readable)) }
            polled.reserveCapacity(state.sockets.count)
            var ringsWaiting = false
            // Releases wake this thread only when someone waits for a buffer or nothing was published for a while
            // (§9.5); otherwise the next publish reaps them, and a subscriber wakes us past its threshold.
            let wantsReleases =
                state.buffersWanted > 0 || now &- state.lastPublishTime >= Self.lazyReapingPeriod
            for (id, socket) in state.sockets {
                polled.append((id, socket))
                let blockedOnRing = state.rings[id]?.isBlockedOnRing ?? false
                let events =
                    PollEvents.readable | (machine.hasOutbound(id) && !blockedOnRing ? PollEvents.writable : 0)
                interests.append((socket.descriptor, events))
            }
            // Version 3: each subscriber's wake-up socket, after saying we sleep and looking at its release ring again.
            for (id, rings) in state.rings {
                ringPolled.append(id)
                interests.append((rings.channel.ownWake.descriptor, PollEvents.readable))
                guard wantsReleases else { continue }
                // A ring stays armed until its wake-up socket fires: a release written since then saw `sleeping` set.
                if !rings.isArmed { if case .success(true) = rings.prepareToSleep() { rings.isArmed = true } }
                if !rings.isArmed { ringsWaiting = true }
            }
            var timeout: Int32 = ringsWaiting ? 0 : 1000
            var deadline = machine.nextDeadline()
            if paused { deadline = min(deadline ?? .max, state.acceptPausedUntil) }
            if let deadline, timeout > 0 {
                let wait = deadline > now ? (deadline - now) / 1_000_000 + 1 : 0
                timeout = Int32(min(wait, 1000))
            }
            if !wantsReleases && !state.rings.isEmpty && timeout > 0 {
                // Arm the rings once publishing pauses.
                let due = state.lastPublishTime &+ Self.lazyReapingPeriod
                timeout = min(timeout, Int32(min(due > now ? (due - now) / 1_000_000 + 1 : 0, 1000)))
            }
            return (machine.isStopped, listening, timeout)
        }
        if stopped { return false }
        let ready: [Int16]
        switch Syscall.poll(interests, timeout: timeout) {
        case .success(let events): ready = events
        case .failure(.interrupted): return true
        case .failure(let errno):
            configuration.logger.critical("publisher poll failed: \(errno)")
            return false
        }
        if ready[0] != 0 { doorbell.drain() }
        let offset = listening ? 2 : 1
        withState { state in
            if listening && ready[1] != 0 { acceptPending(&state) }
            for (index, (id, socket)) in polled.enumerated() where ready[index + offset] != 0 {
                let events = ready[index + offset]
                if events & PollEvents.writable != 0 { flush(id, &state) }
                if events & ~PollEvents.writable != 0 { readPending(id, socket, &state) }
            }
            let ringOffset = offset + polled.count
            for (index, id) in ringPolled.enumerated() where ready[ringOffset + index] != 0 {
                state.rings[id]?.isArmed = false
                if let reason = state.rings[id]?.wokeUp() {
                    state.rings.removeValue(forKey: id)?.closing()
                    perform(state.machine.ringViolation(reason, from: id, now: ProcessInfoShim.monotonicNanoseconds()), &state)
                }
            }
            // Only rings that woke us (or could not be armed) can hold releases we have not seen.
            serviceRings(&state, onlyUnarmed: true)
            // §9.5: wake-ups that its releases and our announcements do not explain end a flooding subscriber.
            for (index, id) in ringPolled.enumerated() where ready[ringOffset + index] != 0 {
                guard let reason = state.rings[id]?.wakeUpFlood() else { continue }
                state.rings.removeValue(forKey: id)?.closing()
                perform(state.machine.wakeUpFlood(reason, from: id, now: ProcessInfoShim.monotonicNanoseconds()), &state)
            }
            retireFreedSurfaces(&state)
            let now = ProcessInfoShim.monotonicNanoseconds()
            if let deadline = state.machine.nextDeadline(), deadline <= now {
                perform(state.machine.tick(now: now), &state)
            }
        }
        return true
    }

    func acceptPending(_ state: inout State) {
        while state.machine.canAcceptConnection {
            let socket: Socket
            switch listener.accept() {
            case .success(.some(let accepted)): socket = accepted
            case .success(.none): return
            case .failure(let errno):
                // EMFILE and friends: the pending connection stays in the backlog and keeps the listener readable,
                // so stop listening for a while instead of spinning, and say so at most once per 10 s.
                let now = ProcessInfoShim.monotonicNanoseconds()
                state.acceptPausedUntil = now &+ Self.acceptPause
                let line = "accept failed: \(errno); not accepting for \(Self.acceptPause / 1_000_000) ms"
                if let line = state.logLimiter.admit(key: "accept", message: line, now: now, interval: 10_000_000_000) {
                    state.log(.error, line)
                }
                return
            }
            guard case .success(let credentials) = socket.peerCredentials() else {
                socket.shutdown()
                continue
            }
            guard configuration.allowedUserIDs.contains(credentials.uid) else {
                refuseAtAccept(socket, uid: credentials.uid, &state)
                continue
            }
            let id = state.machine.connectionAccepted(
                .init(processID: credentials.pid, userID: credentials.uid),
                now: ProcessInfoShim.monotonicNanoseconds()
            )
            state.sockets[id] = socket
        }
    }

    /// A uid that may not connect is answered at once and never holds a pending slot (docs/PROTOCOL.md §4.1), so
    /// a flood of silent connections from it cannot keep others waiting. Whatever it sent already is read first:
    /// closing with unread data would reset the connection, and the peer could lose the ERROR.
    func refuseAtAccept(_ socket: Socket, uid: UInt32, _ state: inout State) {
        let reason = "uid \(uid) is not allowed"
        _ = socket.send(WireMessage.error(WireErrorMessage(.notPermitted, reason)).encoded())
        for _ in 0..<4 {
            guard case .success(.datagram) = socket.receive(maximumSize: WireProtocol.maximumMessageSize) else { break }
        }
        socket.shutdown()
        let now = ProcessInfoShim.monotonicNanoseconds()
        if let line = state.logLimiter.admit(key: "refused-uid", message: reason, now: now, interval: 10_000_000_000) {
            state.log(.warning, line)
        }
    }

    func readPending(_ id: ConnectionID, _ socket: Socket, _ state: inout State) {
        for _ in 0..<Self.readsPerTurn {
            guard state.sockets[id] != nil else { return }
            let result = socket.receive(maximumSize: WireProtocol.maximumMessageSize, maximumDescriptors: 2)
            if case .success(.wouldBlock) = result { return }
            // Version 3: the releases it wrote before this (its GOODBYE, its end of file) come first.
            serviceRing(id, &state)
            guard state.sockets[id] != nil else { return }
            let now = ProcessInfoShim.monotonicNanoseconds()
            switch result {
            case .success(.wouldBlock):
                return
            case .success(.endOfFile):
                perform(state.machine.connectionClosed(id, reason: "end of file", now: now), &state)
                state.sockets.removeValue(forKey: id)?.shutdown()
                state.rings.removeValue(forKey: id)?.closing()
                return
            case .failure(let errno):
                perform(state.machine.connectionClosed(id, reason: "receive failed: \(errno)", now: now), &state)
                state.sockets.removeValue(forKey: id)?.shutdown()
                state.rings.removeValue(forKey: id)?.closing()
                return
            case .success(.datagram(let datagram)):
                // Any fds that came with it are closed when `datagram` goes away, except a version-3 HELLO's two,
                // which move into the subscriber's ring channel.
                let (offer, channel) = ringOffer(for: datagram, from: id, &state)
                let actions = state.machine.received(
                    datagram.bytes,
                    descriptorCount: datagram.descriptors.count,
                    isTruncated: datagram.isTruncated,
                    from: id,
                    rings: offer,
                    now: now
                )
                noteDeferredSubscribers(&state)
                if let channel, state.machine.sessionVersion(of: id) == WireProtocol.ringVersion {
                    state.rings[id] = PublisherRings(channel: channel)
                }
                perform(actions, &state)
            }
        }
    }
}
