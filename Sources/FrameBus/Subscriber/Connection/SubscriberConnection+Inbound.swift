import SystemPackage

// The one place that reads the socket and the announce ring, whichever way the turn slept: in the publisher's
// order (docs/PROTOCOL.md §9.4: a ring slot waits for the socket message its control count names), each message fed
// to the state machine and its action carried out.

extension SubscriberConnection {
    /// Handles what woke a turn: the ring first (its frame is what someone waits for), then the doorbell
    /// (cancellation, a consumer's pass, releases), then the socket, then the ring again. Returns false when the
    /// connection ended.
    func dispatch(_ wake: Wake, on socket: Socket) -> Bool {
        if rings != nil {
            if let reason = core.sender.ringFailure { return wakeUpFailed(reason, socket) }
            guard drainRing() else { return false }
        }
        if wake.doorbellRang {
            core.doorbell.drain()
            core.runConnectionThreadPass()
        }
        if core.isCancelled { return true }
        if core.sender.hasOverflowed { return closeBecauseThePublisherStoppedReading() }
        if wake.socketWritable { core.sender.flush() }
        var readsSocket = wake.socketReadable
        if let futex = wake.futex, let rings {
            // A futex does not see the socket (§9.8): read it when the publisher says it sent something there, or
            // the liveness interval passed (a dead peer's socket reads as end of file).
            let controlSent = rings.reader.controlSent()
            if futex == .timedOut || rings.hasNews(controlSent) {
                rings.controlSentLooked = controlSent
                readsSocket = true
            }
        }
        if readsSocket {
            guard readSocket(socket) else { return false }
        }
        guard drainRing() else { return false }
        return checkHandshakeDeadline()
    }

    /// Waking the publisher failed (`reason`, §9.6). A publisher that died makes its wake-up socket refuse datagrams
    /// before its session socket has been read to its end of file: the socket is read first, so a dead publisher ends
    /// the stream (`endOfStream`, as a closed socket always means) rather than being reported as a violation.
    func wakeUpFailed(_ reason: String, _ socket: Socket) -> Bool {
        guard readSocket(socket) else { return false }
        return perform(machine.ringViolation(reason), descriptors: [])
    }

    /// Reads up to ``readBatch`` datagrams (until the socket would block); returns false when the connection ended.
    func readSocket(_ socket: Socket) -> Bool {
        core.wakeUpCounts.update { $0.socketReads &+= 1 }
        for _ in 0..<WakePolicy.readBatch {
            // Control room for every descriptor a SURFACE may carry (PROTOCOL.md §1), so a 3- or 4-descriptor
            // surface is judged by its contents rather than cut by the kernel.
            switch socket.receive(
                maximumSize: WireProtocol.maximumMessageSize,
                maximumDescriptors: WireProtocol.maximumDescriptorCount
            ) {
            case .success(.wouldBlock):
                return checkHandshakeDeadline()
            case .success(.endOfFile):
                return perform(
                    .close(
                        FrameBusError(.endOfStream, "Subscriber", message: "the publisher closed the connection"),
                        reply: nil
                    ),
                    descriptors: []
                )
            case .failure(let errno):
                return perform(
                    .close(
                        FrameBusError(.endOfStream, "Subscriber", errno: errno, message: "receive failed"),
                        reply: nil
                    ),
                    descriptors: []
                )
            case .success(.datagram(let datagram)):
                core.wakeUpCounts.update { $0.socketMessages &+= 1 }
                guard handle(datagram) else { return false }
            }
        }
        guard drainRing() else { return false }
        return checkHandshakeDeadline()
    }

    func checkHandshakeDeadline() -> Bool {
        guard case .awaitingWelcome = machine.state, now >= handshakeDeadline else { return true }
        return perform(
            .close(FrameBusError(.timedOut, "Subscriber.connect", message: "no WELCOME"), reply: nil),
            descriptors: []
        )
    }

    /// Feeds one datagram to the state machine; returns false when the connection ended.
    func handle(_ datagram: ReceivedDatagram) -> Bool {
        guard !datagram.isTruncated else {
            return perform(machine.receivedMalformed("oversized or truncated datagram"), descriptors: [])
        }
        let message: WireMessage
        do {
            message = try WireMessage.decode(datagram.bytes, descriptorCount: datagram.descriptors.count)
        } catch {
            return perform(machine.receivedMalformed(error.description), descriptors: [])
        }
        // Version 3: the ring's slots written before this datagram come first (§9.4).
        guard drainRing() else { return false }
        let held = message.type == .frame ? core.sender.connectionHeld : 0
        let rings = self.rings
        guard perform(machine.received(message, heldFrames: held), descriptors: datagram.descriptors) else {
            return false
        }
        rings?.controlReceived &+= 1
        return drainRing()
    }

    /// Version 3: handles the announce ring's slots, in order, up to the first that waits for a socket message;
    /// returns false when the connection ended.
    func drainRing() -> Bool {
        guard let rings else { return true }
        rings.isBlockedOnControl = false
        reading: for _ in 0..<RingLayout.slotCount {
            switch rings.reader.peek() {
            case .failure(let violation):
                return perform(machine.ringViolation(violation.description), descriptors: [])
            case .success(nil):
                break reading
            case .success(let entry?):
                if entry.controlCount > rings.controlReceived {
                    rings.isBlockedOnControl = true
                    break reading
                }
                rings.reader.advance()
                ringMessagesRead &+= 1
                let held = core.sender.connectionHeld
                guard perform(machine.receivedFromRing(entry.message, heldFrames: held), descriptors: []) else {
                    return false
                }
                guard self.rings != nil else { return false }
            }
        }
        if ringMessagesRead > 0 {
            let read = ringMessagesRead
            ringMessagesRead = 0
            core.wakeUpCounts.update { $0.ringMessages &+= read }
        }
        guard rings.reader.publishHead() else {
            return perform(machine.ringViolation("the publisher's wake-up socket is no longer usable"), descriptors: [])
        }
        return true
    }
}
