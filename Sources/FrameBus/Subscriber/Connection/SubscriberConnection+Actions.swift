import SystemPackage

// The state machine's actions carried out, and the end of a session.

extension SubscriberConnection {
    /// Carries out an action; returns false when the connection ended.
    func perform(_ action: SubscriberStateMachine.Action, descriptors: [OwnedDescriptor]) -> Bool {
        switch action {
        case .none:
            return true
        case .established(let session, let isReconnect):
            guard let socket else { return false }
            generation &+= 1
            hasConnected = true
            let half = ringHalf
            ringHalf = nil
            if session.protocolVersion >= Int(WireProtocol.ringVersion) {
                // Version 3: the WELCOME's two fds are the publisher's announce ring and wake-up socket (§9.1).
                guard let half, descriptors.count == 2, let ring = descriptors[0].take(),
                    let wake = descriptors[1].take()
                else {
                    return perform(machine.ringViolation("version-3 WELCOME without its ring"), descriptors: [])
                }
                let channel: RingChannel
                // §9.1: the publisher's wake-up socket must be a pair's end the publisher itself made.
                let publisher = try? socket.peerCredentials().get().pid
                do {
                    channel = try half.joining(
                        peerRing: ring,
                        peerWake: wake,
                        peerRole: .announce,
                        peerProcessID: publisher ?? -1
                    )
                } catch {
                    return perform(machine.ringViolation("\(error)"), descriptors: [])
                }
                rings = SubscriberRings(channel: channel)
                core.sender.attach(socket, generation: generation, rings: channel)
            } else {
                core.sender.attach(socket, generation: generation)
            }
            var session = session
            session.usesFutexWakeUps = rings?.channel.usesFutexWake ?? false
            core.established(session, isReconnect: isReconnect)
            core.leadership.sessionIsLive.store(true, ordering: .relaxed)
            return true
        case .importSurface(let announcement):
            return importSurface(announcement, descriptors: descriptors)
        case .retireSurface(let surfaceID):
            surfaces.removeValue(forKey: surfaceID)
            return true
        case .deliverFrame(let frame, let discontinuity):
            return deliver(frame, discontinuity: discontinuity)
        case .reportDrop(let drop):
            if machine.unsupportedSurfaceNoticePending {
                machine.unsupportedSurfaceNoticePending = false
                warnings.warn(
                    "the publisher at \(configuration.path) drops frames for us whose surfaces we do not take "
                        + "(DMA-BUF surfaces: acceptsDMABuf is off, or this consumer cannot import them); they are "
                        + "reported as outOfBuffers",
                    now: now,
                    logger: configuration.logger
                )
            }
            core.report(drop)
            return true
        case .status(let status):
            core.statusReceived(status)
            return true
        case .close(let error, let reply):
            if machine.retriesWithoutRings || machine.retriesWithoutOptionalFlags {
                // The publisher speaks no version 3: connect again at once with version 2 (§9.1); or it knows no
                // deferral: connect again at once without it (§5.1.1).
                configuration.logger.debug(
                    machine.retriesWithoutRings
                        ? "publisher at \(configuration.path) refused version 3; using version 2"
                        : "publisher at \(configuration.path) knows no deferred start; subscribing without it"
                )
                core.leadership.sessionIsLive.store(false, ordering: .relaxed)
                core.sender.detach()
                socket?.shutdown()
                socket = nil
                rings = nil
                ringHalf = nil
                retryNow = true
                return false
            }
            if let reply, let socket {
                warn("closing connection to \(configuration.path): \(reply.reason)")
                _ = socket.send(WireMessage.error(reply).encoded())
            }
            close(error)
            return false
        }
    }

    func close(_ error: FrameBusError) {
        core.leadership.sessionIsLive.store(false, ordering: .relaxed)
        core.sender.detach()
        socket?.shutdown()
        socket = nil
        rings = nil
        ringHalf = nil
        surfaces.removeAll()
        lastAttachments = nil
        machine.closed()
        core.connectionEnded(error, isFinal: !configuration.reconnects)
        if error.code != .endOfStream {
            warn("subscription to \(configuration.path) ended: \(error)")
        }
    }

    /// Ends the session when our outbox filled up because the publisher no longer reads its socket (either way of
    /// sleeping). Returns ``perform(_:descriptors:)``'s result.
    func closeBecauseThePublisherStoppedReading() -> Bool {
        perform(
            .close(
                FrameBusError(
                    .protocolViolation,
                    "Subscriber",
                    message: "the publisher stopped reading: \(SubscriberOutbox.defaultCapacity) messages unsent"
                ),
                reply: nil
            ),
            descriptors: []
        )
    }
}
