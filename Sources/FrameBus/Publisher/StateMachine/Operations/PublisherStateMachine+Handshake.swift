import Logging

// Datagrams received (HELLO, RELEASE, GOODBYE), version 3's ring entries, and the handshake.

extension PublisherStateMachine {
    // MARK: Receiving

    /// A datagram arrived on a connection (already copied into private memory; its fds are the IO layer's to
    /// close).
    package mutating func received(
        _ bytes: [UInt8],
        descriptorCount: Int,
        isTruncated: Bool,
        from id: ConnectionID,
        rings: RingOffer = .none,
        now: UInt64
    ) -> [Action] {
        guard let connection = connections[id] else { return [] }
        if case .closing = connection { return [] }
        guard !isTruncated else {
            return fail(id, .malformedMessage, "oversized or truncated datagram", now: now)
        }
        let message: WireMessage
        do {
            message = try WireMessage.decode(bytes, descriptorCount: descriptorCount)
        } catch {
            return fail(id, error.errorCode, error.description, now: now)
        }
        switch connection {
        case .pending(let credentials, _):
            guard case .hello(let hello) = message else {
                return fail(id, .malformedMessage, "expected HELLO, got \(message.type.name)", now: now)
            }
            if case .refused(let reason) = rings {
                return fail(id, .malformedMessage, "version-3 HELLO: \(reason)", now: now)
            }
            return handshake(id, credentials, hello, ringsReady: rings == .ready, now: now)
        case .subscriber(let session):
            switch message {
            case .release(let release):
                return self.release(release, in: session, id, now: now)
            case .goodbye:
                return connectionClosed(id, reason: "goodbye", now: now)
            case .error(let error):
                var actions: [Action] = []
                log(
                    .warning,
                    "peer-error",
                    "subscriber \(id) (pid \(session.credentials.processID)) sent ERROR \(error.code): \(error.reason.escapingControlCharacters)",
                    now: now,
                    &actions
                )
                forget(id)
                actions.append(.close(id))
                return actions
            default:
                return fail(id, .malformedMessage, "unexpected \(message.type.name) from a subscriber", now: now)
            }
        case .monitor:
            switch message {
            case .goodbye, .error:
                forget(id)
                return [.close(id)]
            default:
                return fail(id, .malformedMessage, "unexpected \(message.type.name) from a monitor", now: now)
            }
        case .closing:
            return []
        }
    }

    mutating func release(
        _ release: WireRelease,
        in session: SubscriberSession,
        _ id: ConnectionID,
        now: UInt64
    ) -> [Action] {
        guard let held = session.held[release.sequence], held.surfaceID == release.surfaceID else {
            return fail(
                id,
                .invalidRequest,
                "RELEASE of frame \(release.sequence) (surface \(release.surfaceID)), which it does not hold",
                now: now
            )
        }
        session.held[release.sequence] = nil
        released.append(held.resource)
        let holdTime = now &- held.sentAt
        session.holdTimes.record(nanoseconds: holdTime)
        holdTimes.record(nanoseconds: holdTime)
        if release.flags & WireRelease.notDeliveredFlag != 0 {
            session.droppedLate.saturatingAdd(1)
            session.delivered = session.delivered > 0 ? session.delivered - 1 : 0
            // §5.12: bytesDelivered is the sum over delivered frames only.
            session.bytesDelivered -= min(held.bytesUsed, session.bytesDelivered)
        }
        return []
    }

    // MARK: Protocol version 3 (docs/PROTOCOL.md §9)

    /// What the IO layer made of a version-3 HELLO's ring descriptors before it fed the HELLO to the machine.
    package enum RingOffer: Equatable {
        /// Not a version-3 HELLO, or the IO layer could not make its own half (then the session is version 2).
        case none
        /// Both halves are ready: the session is version 3.
        case ready
        /// The subscriber's ring file or wake-up socket failed a check: the connection ends with `malformedMessage`.
        case refused(String)
    }

    /// The session version of a welcomed subscriber (3: frames travel through its rings), nil otherwise.
    package func sessionVersion(of id: ConnectionID) -> UInt16? {
        if case .subscriber(let session) = connections[id] { return session.version }
        return nil
    }

    /// One message read from a version-3 subscriber's release ring (copied once into private memory): it must be a
    /// RELEASE of a frame the subscriber holds, exactly as on the socket; anything else ends that subscriber's
    /// session (ERROR `malformedMessage` or `invalidRequest`) and no one else's.
    package mutating func receivedFromRing(_ entry: RingEntry, from id: ConnectionID, now: UInt64) -> [Action] {
        guard case .subscriber(let session) = connections[id] else { return [] }
        guard session.version >= WireProtocol.ringVersion else {
            return fail(id, .malformedMessage, "ring message in a version-\(session.version) session", now: now)
        }
        guard entry.controlCount == 0 else {
            return fail(id, .malformedMessage, "release slot with control count \(entry.controlCount)", now: now)
        }
        let message: WireMessage
        do {
            message = try WireMessage.decode(entry.message, descriptorCount: 0)
        } catch {
            return fail(id, error.errorCode, "release ring: \(error.description)", now: now)
        }
        guard case .release(let release) = message else {
            return fail(id, .malformedMessage, "\(message.type.name) in the release ring", now: now)
        }
        return self.release(release, in: session, id, now: now)
    }

    /// A version-3 subscriber's ring broke docs/PROTOCOL.md §9 (an index out of range, a bad slot, a broken
    /// wake-up socket): that session ends with ERROR `malformedMessage`.
    package mutating func ringViolation(_ reason: String, from id: ConnectionID, now: UInt64) -> [Action] {
        fail(id, .malformedMessage, reason, now: now)
    }

    /// A version-3 subscriber woke the publisher more often than its releases explain (§9.5): it is ended.
    package mutating func wakeUpFlood(_ reason: String, from id: ConnectionID, now: UInt64) -> [Action] {
        fail(id, .tooManyWakeUps, reason, now: now)
    }

    mutating func handshake(
        _ id: ConnectionID,
        _ credentials: Credentials,
        _ hello: WireHello,
        ringsReady: Bool,
        now: UInt64
    ) -> [Action] {
        // A version-3 subscriber whose rings could not be made here gets version 2 (a subscriber that asked for 3
        // accepts it, docs/PROTOCOL.md §9.1); a monitor speaks at most version 2.
        var version = hello.version
        if version >= WireProtocol.ringVersion && (hello.kind == .monitor || !ringsReady) { version = 2 }
        guard limits.allowedUserIDs.contains(credentials.userID) else {
            return fail(id, .notPermitted, "uid \(credentials.userID) is not allowed", now: now)
        }
        switch hello.kind {
        case .monitor:
            guard monitorCount < limits.maximumMonitors else {
                return fail(id, .tooManySubscribers, "\(limits.maximumMonitors) monitors already connected", now: now)
            }
            var monitor = MonitorSession(
                credentials: credentials,
                nextReport: now &+ limits.monitorInterval,
                wantsStatus: hello.flags & WireHello.wantsStatusFlag != 0
            )
            monitor.knowsUnsupportedSurface = hello.flags & WireHello.knowsUnsupportedSurfaceFlag != 0
            monitor.outbound.append(
                .message(
                    .welcome(
                        WireWelcome(
                            version: version,
                            deliveryMode: 0,
                            queueDepth: 0,
                            maximumHeldFrames: 0,
                            // §5.2: the publisher's own format, for a monitor that understands it.
                            format: monitor.knowsUnsupportedSurface ? limits.formats.first ?? 0 : 0,
                            maximumMessageSize: UInt32(WireProtocol.maximumMessageSize),
                            streamID: streamID,
                            subscriberID: id.rawValue,
                            nextSequence: nextSequence,
                            maximumAnnouncedSurfaces: 0,
                            kind: .monitor
                        )
                    )
                )
            )
            monitor.outbound.append(.message(.monitorReport(monitorReport(now: now, for: monitor))))
            if monitor.wantsStatus { monitor.outbound.append(.message(.status(wireStatus(for: nil, now: now)))) }
            pendingCount -= 1
            monitorCount += 1
            connections[id] = .monitor(monitor)
            return [.flush(id)]
        case .subscriber:
            guard let format = hello.formats.first(where: limits.formats.contains) else {
                let wanted = hello.formats.map(FourCC.name)
                let offered = limits.formats.map(FourCC.name)
                return fail(
                    id,
                    .noCommonFormat,
                    "no common format: subscriber accepts \(wanted), publisher offers \(offered)",
                    now: now
                )
            }
            let isLatestOnly = hello.deliveryMode == 0
            guard let grant = admit(requestedDepth: Int(hello.queueDepth), isLatestOnly: isLatestOnly, format: format)
            else {
                return fail(
                    id,
                    .tooManySubscribers,
                    "\(subscriberCount) subscribers already connected (\(holdingDescription))",
                    now: now
                )
            }
            let maximumHeld = grant.maximumHeldFrames
            let depth = grant.queueDepth
            let announcedLimit = min(max(limits.maximumAnnouncedSurfaces, maximumHeld + 1), Self.subscriberSurfaceLimit)
            let session = SubscriberSession(
                credentials: credentials,
                version: version,
                format: format,
                deliveryMode: hello.deliveryMode,
                queueDepth: UInt16(depth),
                maximumHeldFrames: maximumHeld,
                maximumAnnouncedSurfaces: announcedLimit,
                acceptsDMABuf: version >= 2 && hello.flags & WireHello.acceptsDMABufFlag != 0,
                knowsUnsupportedSurface: version >= 2 && hello.flags & WireHello.knowsUnsupportedSurfaceFlag != 0,
                wantsStatus: version >= 2 && hello.flags & WireHello.wantsStatusFlag != 0,
                firstSequence: nextSequence,
                isDeferred: version >= 2 && hello.flags & WireHello.deferredFlag != 0,
                welcomedAt: now
            )
            if session.isDeferred { deferral.welcomedDeferred = true }
            session.outbound.append(
                .message(
                    .welcome(
                        WireWelcome(
                            version: version,
                            deliveryMode: hello.deliveryMode,
                            queueDepth: UInt16(depth),
                            maximumHeldFrames: UInt16(maximumHeld),
                            format: format,
                            maximumMessageSize: UInt32(WireProtocol.maximumMessageSize),
                            streamID: streamID,
                            subscriberID: id.rawValue,
                            nextSequence: nextSequence,
                            maximumAnnouncedSurfaces: UInt16(announcedLimit)
                        )
                    )
                )
            )
            // A subscriber that asked for STATUS hears the state right after WELCOME (PROTOCOL.md §5.13).
            if session.wantsStatus { session.outbound.append(.message(.status(wireStatus(for: session, now: now)))) }
            pendingCount -= 1
            subscriberCount += 1
            connections[id] = .subscriber(session)
            var actions: [Action] = [.flush(id)]
            log(
                .debug,
                "welcome",
                "subscriber \(id) (pid \(credentials.processID), v\(version)) gets \(FourCC.name(format)), \(hello.deliveryMode == 0 ? "latest-only" : "queue \(depth)"), holds ≤ \(maximumHeld)\(session.isDeferred ? ", deferred" : "")",
                now: now,
                &actions
            )
            return actions
        }
    }
}
