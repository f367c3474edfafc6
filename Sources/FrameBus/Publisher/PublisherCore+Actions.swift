import Foundation
import Logging
import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces
import Synchronization
import SystemPackage

// Carrying out the state machine's actions: flushing outbound queues, closing connections, logging.

extension PublisherCore {
    // MARK: Carrying out actions (always under the state lock)

    /// `now`: when the caller last read the clock, if it just did (a frame's delivery reads it once).
    func perform(_ actions: [Machine.Action], _ state: inout State, now: UInt64? = nil) {
        for action in actions {
            switch action {
            case .flush(let id):
                flush(id, &state, now: now ?? ProcessInfoShim.monotonicNanoseconds())
            case .close(let id):
                state.sockets.removeValue(forKey: id)?.shutdown()
                state.rings.removeValue(forKey: id)?.closing()
                state.machine.closedAfterStop(id)
            case .log(let level, let line):
                state.log(level, line)
            case .deadlineChanged:
                doorbell.ring()
            }
        }
    }

    /// Sends what the machine queued for `id` until the socket is full.
    func flush(_ id: ConnectionID, _ state: inout State, now: UInt64 = ProcessInfoShim.monotonicNanoseconds()) {
        guard let socket = state.sockets[id] else { return }
        let rings = state.rings[id]
        var sent = 0
        var failure: String?
        var ringFailure: String?
        // The slice must be gone before `sent` changes the queue, or that change copies it.
        do {
            let items = state.machine.outbound(of: id)
            sending: for item in items {
                // Version 3: FRAME and DROP go into the announce ring, in order with the socket's messages.
                if let rings, rings.carries(item.message) {
                    switch rings.append(item.message) {
                    case .appended:
                        sent += 1
                        continue sending
                    case .full:
                        break sending
                    case .violation(let reason):
                        ringFailure = reason
                        break sending
                    }
                }
                // Slots written before this datagram must be visible before it can be read (PROTOCOL.md §9.4).
                if let rings, let reason = rings.commit() {
                    ringFailure = reason
                    break sending
                }
                let outcome: Result<Socket.SendOutcome, SendFailure>
                if let rings, case .welcome = item.message {
                    outcome = socket.send(item.message.encoded(), descriptors: rings.welcomeDescriptors)
                        .mapError { SendFailure(reason: "send failed: \($0)") }
                } else {
                    outcome = Self.send(item, on: socket, exported: state.surfaceDescriptions)
                }
                switch outcome {
                case .success(.sent):
                    sent += 1
                    if let rings, !rings.sentOnSocket(item.message) {
                        ringFailure = "the subscriber's ring file refused a futex wake-up"
                        break sending
                    }
                case .success(.wouldBlock):
                    break sending
                case .failure(let error):
                    failure = error.reason
                    break sending
                }
            }
        }
        if let rings, ringFailure == nil { ringFailure = rings.commit() }
        perform(state.machine.sent(sent, on: id, now: now), &state)
        if let failure {
            perform(state.machine.connectionClosed(id, reason: failure, now: now), &state)
            state.sockets.removeValue(forKey: id)?.shutdown()
            state.rings.removeValue(forKey: id)?.closing()
        } else if let ringFailure {
            state.rings.removeValue(forKey: id)?.closing()
            perform(state.machine.ringViolation(ringFailure, from: id, now: now), &state)
        } else if state.machine.hasOutbound(id) && !(rings?.isBlockedOnRing ?? false) {
            doorbell.ring()  // the loop must poll this socket for room to write
        }
    }

    /// Sends one queued item. A SURFACE's descriptors come from the read-only handle kept with the surface's
    /// description (made outside the lock when the surface was first published), so this opens nothing; only a
    /// surface whose description was dropped since (past ``maximumSurfaceDescriptions``) is exported again here.
    static func send(
        _ item: Machine.Outbound,
        on socket: Socket,
        exported: [UInt64: SurfaceDescription]
    ) -> Result<Socket.SendOutcome, SendFailure> {
        let outcome: Result<Socket.SendOutcome, Errno>
        switch item {
        case .message(let message):
            outcome = socket.send(message.encoded())
        case .surface(let message, let buffer):
            if let described = exported[buffer.surface.id.rawValue] {
                let descriptors = described.handle.borrowedDescriptors.map(\.rawValue)
                outcome = socket.send(message.encoded(), descriptors: descriptors)
            } else {
                let handle: SurfaceHandle
                do { handle = try buffer.surface.makeHandle() } catch {
                    return .failure(SendFailure(reason: "cannot export surface \(buffer.surface.id): \(error)"))
                }
                outcome = socket.send(message.encoded(), descriptors: handle.borrowedDescriptors.map(\.rawValue))
            }
        }
        return outcome.mapError { SendFailure(reason: "send failed: \($0)") }
    }

    struct SendFailure: Error {
        var reason: String
    }
}
