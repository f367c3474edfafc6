import Foundation
import Logging
import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces
import Synchronization
import SystemPackage

// Protocol version 3's rings (docs/PROTOCOL.md §9) on the publisher's side.

extension PublisherCore {
    /// Version 3 (docs/PROTOCOL.md §9): for a version-3 subscriber HELLO with two fds, makes our half (our ring file
    /// and wake-up socket) and checks the subscriber's (its ring file and wake-up socket). `.none` when this is no
    /// such HELLO or our half cannot be made (the subscriber then gets version 2).
    func ringOffer(
        for datagram: ReceivedDatagram,
        from id: ConnectionID,
        _ state: inout State
    ) -> (Machine.RingOffer, RingChannel?) {
        guard datagram.descriptors.count == 2, !datagram.isTruncated, state.machine.sessionVersion(of: id) == nil,
            case .hello(let hello)? = try? WireMessage.decode(datagram.bytes, descriptorCount: 2),
            hello.version >= WireProtocol.ringVersion, hello.kind == .subscriber
        else { return (.none, nil) }
        let half: RingChannel.Half
        do { half = try RingChannel.Half(role: .announce, futexWake: configuration.usesFutexWakeUps) } catch {
            state.log(.warning, "cannot make rings for subscriber \(id), serving version 2: \(error)")
            return (.none, nil)
        }
        guard let ring = datagram.descriptors[0].take(), let wake = datagram.descriptors[1].take() else {
            return (.refused("descriptors missing"), nil)
        }
        // §9.1: the wake-up socket must be a pair's end made by this connection's own peer.
        guard case .success(let credentials)? = state.sockets[id]?.peerCredentials() else {
            Syscall.close(ring)
            Syscall.close(wake)
            return (.refused("the session socket has no credentials"), nil)
        }
        do {
            return (
                .ready,
                try half.joining(peerRing: ring, peerWake: wake, peerRole: .release, peerProcessID: credentials.pid)
            )
        } catch {
            return (.refused("\(error)"), nil)
        }
    }

    /// How long after the last publish the loop thread goes back to being woken for every release (§9.5).
    static let lazyReapingPeriod: UInt64 = 100_000_000

    /// Before a frame is published: reaps every release ring (unless `reaping` is false: the caller reaps them after
    /// the frame's wake-ups), and (unless someone waits for a buffer) stops asking subscribers to wake the loop thread
    /// for releases. If a ring was armed, the loop thread is told, so it sleeps at most until publishing pauses.
    func reapBeforePublishing(_ state: inout State, now: UInt64, reaping: Bool = true) {
        state.lastPublishTime = now
        if state.buffersWanted == 0 {
            var disarmed = false
            for rings in state.rings.values where rings.disarm() { disarmed = true }
            if disarmed { doorbell.ring() }
        }
        if reaping { serviceRings(&state, now: now) }
    }

    /// Reads every version-3 subscriber's release ring (each slot copied once, fed to the machine as a RELEASE would
    /// be), and flushes those whose announce ring had been full.
    func serviceRings(
        _ state: inout State,
        onlyUnarmed: Bool = false,
        now: UInt64 = ProcessInfoShim.monotonicNanoseconds()
    ) {
        guard !state.rings.isEmpty else { return }
        // Over the map as it is now (no copy of its keys per frame); a ring whose subscriber failed meanwhile is
        // skipped.
        let all = state.rings
        for (id, rings) in all where !(onlyUnarmed && rings.isArmed) && state.rings[id] === rings {
            serviceRing(id, rings, &state, now: now)
        }
    }

    /// Reads one subscriber's release ring (see ``serviceRings(_:onlyUnarmed:)``). Also called before anything read
    /// from that subscriber's socket is handled, its end of file included: releases are reaped lazily (§9.5), and
    /// those it wrote before a socket message must reach the machine before that message.
    func serviceRing(_ id: ConnectionID, _ state: inout State) {
        guard let rings = state.rings[id] else { return }
        serviceRing(id, rings, &state, now: ProcessInfoShim.monotonicNanoseconds())
    }

    func serviceRing(_ id: ConnectionID, _ rings: PublisherRings, _ state: inout State, now: UInt64) {
        var actions: [Machine.Action] = []
        let violation = rings.drainReleases(limit: RingLayout.slotCount) { entry in
            actions += state.machine.receivedFromRing(entry, from: id, now: now)
            return state.machine.sessionVersion(of: id) != nil
        }
        perform(actions, &state, now: now)
        if let violation, state.rings[id] != nil {
            state.rings.removeValue(forKey: id)?.closing()
            perform(state.machine.ringViolation(violation, from: id, now: now), &state)
            return
        }
        if rings.isBlockedOnRing, state.rings[id] != nil { flush(id, &state, now: now) }
    }
}
