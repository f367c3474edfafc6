import PixelBuffers
import SampleBuffers
import Surfaces
import SystemPackage

/// The IO layer of a subscriber: its one thread connects, polls, decodes datagrams, feeds them to the
/// ``SubscriberStateMachine`` and carries out the actions it returns (imports, deliveries, replies).
///
/// Everything here belongs to that thread; what consumers see goes through ``SubscriberCore``.
final class SubscriberConnection {
    let core: SubscriberCore
    let configuration: Subscriber.Configuration
    private var machine: SubscriberStateMachine
    private var socket: Socket?
    /// The imported surfaces, with what every frame on them needs, worked out once per SURFACE.
    private var surfaces: [UInt64: ImportedSurface] = [:]
    /// The attachments of the last FRAME, decoded: frames usually repeat them, so most frames decode nothing.
    private var lastAttachments: (codes: WireAttachmentCodes, decoded: PixelBufferAttachments)?
    private var generation: UInt64 = 0
    private var handshakeDeadline: UInt64 = 0
    private var hasConnected = false
    /// Version 3 (docs/PROTOCOL.md §9): our half, sent with HELLO, until WELCOME completes the channel.
    private var ringHalf: RingChannel.Half?
    private var rings: SubscriberRings?
    /// What each turn of ``service(_:)`` polls (refilled in place every turn).
    private var pollSet = PollSet()
    /// The publisher refused version 3: connect again at once with version 2.
    private var retryNow = false
    /// The doorbell's ring count when the connection thread last answered it (futex sleeps, §9.8).
    private var lastDoorbellRing: UInt32 = 0
    /// The timeout of the next futex sleep (§9.8): ``futexLivenessInterval``, backed off while nothing comes.
    private var livenessInterval = SubscriberConnection.futexLivenessInterval
    /// Announce ring messages read in the current ``drainRing()`` (added to the wake-up counts once per batch).
    private var ringMessagesRead: UInt64 = 0
    /// Whether the last frame's consumer ran on this thread (``SubscriberCore/deliver(_:sequence:)``): only then
    /// does the thread ask for ``Subscriber/Configuration/connectionThreadSlice``.
    private var lastFrameConsumedHere = false
    /// The slice asked for last, in nanoseconds (0: the kernel's default, as every thread starts).
    private var requestedSlice: UInt64 = 0
    /// The kernel refused a slice once: not asked again.
    private var sliceRefused = false
    /// The last warning logged, when, and how many identical ones were left out since: a publisher that fails the
    /// same way on every reconnect (every 100 ms by default) must not flood the log.
    private var lastWarning: (text: String, time: UInt64, suppressed: Int)?
    private static let repeatedWarningInterval: UInt64 = 10_000_000_000

    /// Most datagrams read per wake-up before the doorbell (cancellation, releases) is looked at again.
    private static let readBatch = 64

    init(core: SubscriberCore) {
        self.core = core
        self.configuration = core.configuration
        self.machine = SubscriberStateMachine(
            acceptedFormats: core.configuration.acceptedFormats,
            delivery: core.configuration.delivery
        )
        machine.acceptsDMABuf = core.configuration.acceptsDMABuf
    }

    private var now: UInt64 { ProcessInfoShim.monotonicNanoseconds() }

    /// When the connection thread started, and when it may try to connect next.
    private var startTime: UInt64 = 0
    private var nextAttempt: UInt64 = 0
    /// A session ended during a caller's turn: the connection thread decides what follows (``sessionEnded()``).
    private var sessionEndedDuringCallerTurn = false
    /// A caller runs the loop (``serviceAsCaller(deadline:)``).
    private var isCallerTurn = false
    /// During a caller's turn, how long `service` may wait (monotonic nanoseconds; nil: the usual intervals).
    private var callerDeadline: UInt64?

    /// The connection thread's loop: one pass per turn (``ConnectionLeadership``), so that a waiting caller can run
    /// the loop between passes.
    func run() {
        let leadership = core.leadership
        leadership.attach(self)
        defer { core.connectionThreadFinished() }
        startTime = now
        nextAttempt = startTime
        while true {
            leadership.connectionThreadTurn(isCancelled: { core.isCancelled })
            guard pass() else {
                leadership.finish()
                return
            }
            leadership.endConnectionThreadTurn()
        }
    }

    /// One pass of the connection thread's loop: connects, or services the session once. Returns false when the
    /// thread is done (the subscriber was cancelled, or the stream ended for good).
    private func pass() -> Bool {
        if sessionEndedDuringCallerTurn {
            sessionEndedDuringCallerTurn = false
            guard sessionEnded() else { return false }
        }
        guard !core.isCancelled else {
            if let socket { socket.shutdown() }
            return false
        }
        guard let socket else {
            let interval = configuration.reconnectInterval.nanoseconds
            let timeout = configuration.connectTimeout.nanoseconds
            if now < nextAttempt || core.holdsReconnect {
                wait(milliseconds: Int32(clamping: min(interval, 1_000_000_000) / 1_000_000))
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
        return service(socket) || sessionEnded()
    }

    /// A session ended: returns whether the thread goes on (to connect again).
    private func sessionEnded() -> Bool {
        if retryNow {
            retryNow = false
            nextAttempt = now
            return true
        }
        if !configuration.reconnects { return false }
        nextAttempt = now &+ configuration.reconnectInterval.nanoseconds
        return true
    }

    /// Runs the loop once on a caller's thread, during its turn (``ConnectionLeadership``): reads and handles what
    /// waits, or sleeps until something comes or `deadline` (monotonic nanoseconds; nil: the usual intervals).
    /// Returns whether the session is still live; when it is not, the connection thread must take the loop back.
    func serviceAsCaller(deadline: UInt64?) -> Bool {
        guard let socket, !sessionEndedDuringCallerTurn else { return false }
        isCallerTurn = true
        callerDeadline = deadline
        defer {
            isCallerTurn = false
            callerDeadline = nil
        }
        if service(socket) { return self.socket != nil }
        sessionEndedDuringCallerTurn = true
        return false
    }

    /// `timeout`, shortened to what is left before a caller's deadline (at least 0).
    private func cappedByCallerDeadline(nanoseconds timeout: Int64) -> Int64 {
        guard let callerDeadline else { return timeout }
        let time = now
        return callerDeadline > time ? min(timeout, Int64(clamping: callerDeadline - time)) : 0
    }

    /// Logs a warning, unless it repeats the previous one within ``repeatedWarningInterval`` (then it is counted, and
    /// the count is logged with the next one that gets through).
    private func warn(_ text: String) {
        let time = now
        if let last = lastWarning, last.text == text, time &- last.time < Self.repeatedWarningInterval {
            lastWarning?.suppressed += 1
            return
        }
        if let last = lastWarning, last.suppressed > 0 {
            configuration.logger.warning("(\(last.suppressed) more: \(last.text))")
        }
        configuration.logger.warning("\(text)")
        lastWarning = (text, time, 0)
    }

    private func wait(milliseconds: Int32) {
        _ = Syscall.poll([(core.doorbell.descriptor, PollEvents.readable)], timeout: max(1, milliseconds))
        core.doorbell.drain()
        core.runConnectionThreadPass()
    }

    private enum ConnectOutcome {
        case connected
        /// Nobody listens at the path (yet).
        case noPublisher(FrameBusError)
        case failed(FrameBusError)
    }

    private func connect(timeout: UInt64) -> ConnectOutcome {
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

    /// Asks for ``Subscriber/Configuration/connectionThreadSlice`` while frames are consumed on this thread, and
    /// for the kernel's default slice again when they go elsewhere: one `sched_setattr` per change, none per frame.
    private func adjustSchedulerSlice() {
        guard !sliceRefused, let slice = configuration.connectionThreadSlice else { return }
        let wanted = lastFrameConsumedHere ? UInt64(clamping: max(slice.nanoseconds, 1)) : 0
        guard wanted != requestedSlice else { return }
        requestedSlice = wanted
        if case .failure(let errno) = Syscall.setSchedulerSlice(nanoseconds: wanted) {
            sliceRefused = true
            configuration.logger.debug("cannot ask for a scheduler slice of \(wanted) ns: \(errno)")
        }
    }

    /// Polls and handles one batch; returns false when the connection ended.
    private func service(_ socket: Socket) -> Bool {
        // A caller's thread keeps the slice its owner chose.
        if !isCallerTurn { adjustSchedulerSlice() }
        let awaiting: Bool
        if case .awaitingWelcome = machine.state { awaiting = true } else { awaiting = false }
        var timeout: Int32 = 1000
        if awaiting {
            let left = handshakeDeadline > now ? handshakeDeadline - now : 0
            timeout = Int32(clamping: min(1000, left / 1_000_000 + 1))
        }
        if callerDeadline != nil {
            // Rounded up to a millisecond: during a caller's turn this path serves version-2 sessions, a slot that
            // waits for a socket message, and a full outbox.
            let left = cappedByCallerDeadline(nanoseconds: Int64(timeout) * 1_000_000)
            timeout = Int32(clamping: (left + 999_999) / 1_000_000)
        }
        let writable = core.sender.hasOutbound ? PollEvents.writable : 0
        if let rings, rings.channel.usesFutexWake, !awaiting, !rings.isBlockedOnControl, writable == 0 {
            return serviceOnFutex(socket, rings)
        }
        pollSet.removeAll()
        pollSet.add(core.doorbell.descriptor, events: PollEvents.readable)
        pollSet.add(socket.descriptor, events: PollEvents.readable | writable)
        var sleptOnRing = false
        if let rings, !rings.channel.usesFutexWake {
            pollSet.add(rings.channel.ownWake.descriptor, events: PollEvents.readable)
            // Say we sleep, then look at the ring again (§9.5); a slot waiting for a socket message sleeps on
            // the socket alone.
            if !rings.isBlockedOnControl {
                switch rings.reader.prepareToSleep() {
                case .failure(let violation):
                    return perform(machine.ringViolation(violation.description), descriptors: [])
                case .success(true):
                    sleptOnRing = true
                    core.wakeUpCounts.update { $0.socketSleeps &+= 1 }
                case .success(false): timeout = 0
                }
            }
        }
        if case .failure(let errno) = Syscall.poll(&pollSet, timeout: timeout) {
            return perform(.close(FrameBusError(.systemCall, "poll", errno: errno), reply: nil), descriptors: [])
        }
        let doorbellEvents = pollSet.events(at: 0)
        let socketEvents = pollSet.events(at: 1)
        if let rings, rings.channel.usesFutexWake {
            // Polling (a socket message awaited, or outbound waiting for room) rather than sleeping on the futex.
            if let reason = core.sender.ringFailure { return wakeUpFailed(reason, socket) }
            guard drainRing() else { return false }
        } else if let rings {
            if pollSet.events(at: 2) != 0 {
                core.wakeUpCounts.update { $0.socketWakeUps &+= 1 }
                // One `recv` per wake-up: the publisher signals once per sleep, and a second signal left unread only
                // makes the next poll return at once.
                guard rings.reader.wokeUp(drainLimit: 1) else {
                    return perform(machine.ringViolation("our wake-up socket was made unusable"), descriptors: [])
                }
            } else if sleptOnRing {
                rings.reader.clearSleeping()
            }
            if let reason = core.sender.ringFailure { return wakeUpFailed(reason, socket) }
            guard drainRing() else { return false }
        }
        if doorbellEvents != 0 {
            core.doorbell.drain()
            core.runConnectionThreadPass()
        }
        if core.isCancelled { return true }
        if core.sender.hasOverflowed { return closeBecauseThePublisherStoppedReading() }
        if socketEvents & PollEvents.writable != 0 { core.sender.flush() }
        if socketEvents & ~PollEvents.writable != 0 {
            guard readSocket(socket) else { return false }
        }
        guard drainRing() else { return false }
        return checkHandshakeDeadline()
    }

    /// Version 3 with futex wake-ups (docs/PROTOCOL.md §9.8): says it sleeps, then sleeps on the publisher's wake
    /// count and the doorbell's ring count (`futex_waitv`) for at most the liveness interval (backed off while idle,
    /// ``livenessInterval(after:current:)``); on waking handles
    /// the ring first (the frame is what someone waits for), then the doorbell, then the socket when the publisher
    /// says it sent something there or the interval passed (so a publisher that died unannounced is noticed within
    /// the interval: a dead peer's socket reads as end of file). Returns false when the connection ended.
    private func serviceOnFutex(_ socket: Socket, _ rings: SubscriberRings) -> Bool {
        let doorbell = core.doorbell
        doorbell.armFutex()
        let rang = doorbell.ringCount
        var outcome = FutexWaitOutcome.changed
        // A caller's deadline shortens the sleep (and then leaves the liveness interval as it was).
        let sleep = cappedByCallerDeadline(nanoseconds: livenessInterval)
        if rang == lastDoorbellRing, sleep > 0 {
            switch rings.reader.prepareToSleepOnFutex(hasNews: rings.hasNews) {
            case .failure(let violation):
                doorbell.disarmFutex()
                return perform(machine.ringViolation(violation.description), descriptors: [])
            case .success(let seen?):
                outcome = rings.channel.peer.futexWait(
                    RingLayout.wakeCountOffset,
                    seen: seen,
                    doorbell: doorbell,
                    rang: rang,
                    timeoutNanoseconds: sleep
                )
                rings.reader.clearSleeping()
                let slept = sleep
                // A timeout at a caller's deadline reads the socket too (one `recv`), so a caller that waits in short
                // steps still notices a publisher that died without a word; it leaves the backoff alone.
                if sleep == livenessInterval {
                    livenessInterval = Self.livenessInterval(after: outcome, current: livenessInterval)
                }
                core.wakeUpCounts.update {
                    $0.futexSleeps &+= 1
                    if outcome == .woken { $0.futexWakeUps &+= 1 }
                    if outcome == .timedOut { $0.futexTimeouts &+= 1 }
                    $0.lastLivenessInterval = slept
                }
            case .success(nil):
                break
            }
        }
        doorbell.disarmFutex()
        if case .failed(let errno) = outcome {
            return perform(.close(FrameBusError(.systemCall, "futex_waitv", errno: errno), reply: nil), descriptors: [])
        }
        if let reason = core.sender.ringFailure { return wakeUpFailed(reason, socket) }
        guard drainRing() else { return false }
        let ringCount = doorbell.ringCount
        if ringCount != lastDoorbellRing {
            lastDoorbellRing = ringCount
            doorbell.drain()
            core.runConnectionThreadPass()
        }
        if core.isCancelled { return true }
        if core.sender.hasOverflowed { return closeBecauseThePublisherStoppedReading() }
        let controlSent = rings.reader.controlSent()
        if outcome == .timedOut || rings.hasNews(controlSent) {
            rings.controlSentLooked = controlSent
            guard readSocket(socket) else { return false }
        }
        return drainRing()
    }

    /// Ends the session when our outbox filled up because the publisher no longer reads its socket (either way of
    /// sleeping). Returns ``perform(_:descriptors:)``'s result.
    private func closeBecauseThePublisherStoppedReading() -> Bool {
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

    /// How long a futex-woken subscriber sleeps at most before it looks at its socket anyway (§9.8): the bound on
    /// noticing a publisher that died without a word.
    static let futexLivenessInterval: Int64 = 20_000_000

    /// The longest an idle futex-woken subscriber sleeps before it looks at its socket (§9.8): the liveness interval
    /// doubles after each sleep that only timed out, up to this, so an idle subscriber costs 5 timer wake-ups a
    /// second rather than 50, and a publisher that died without a word is noticed at most this long after.
    static let futexLivenessCeiling: Int64 = 200_000_000

    /// The liveness interval of the next futex sleep, after one that ended with `outcome` and lasted at most
    /// `current`: doubled (up to ``futexLivenessCeiling``) after a timeout, back to ``futexLivenessInterval`` after
    /// anything else (a wake-up, a changed word, a signal, the doorbell).
    static func livenessInterval(after outcome: FutexWaitOutcome, current: Int64) -> Int64 {
        guard outcome == .timedOut else { return futexLivenessInterval }
        return current >= futexLivenessCeiling / 2 ? futexLivenessCeiling : max(current, futexLivenessInterval) * 2
    }

    /// Waking the publisher failed (`reason`, §9.6). A publisher that died makes its wake-up socket refuse datagrams
    /// before its session socket has been read to its end of file: the socket is read first, so a dead publisher ends
    /// the stream (`endOfStream`, as a closed socket always means) rather than being reported as a violation.
    private func wakeUpFailed(_ reason: String, _ socket: Socket) -> Bool {
        guard readSocket(socket) else { return false }
        return perform(machine.ringViolation(reason), descriptors: [])
    }

    /// Reads up to ``readBatch`` datagrams (until the socket would block); returns false when the connection ended.
    private func readSocket(_ socket: Socket) -> Bool {
        core.wakeUpCounts.update { $0.socketReads &+= 1 }
        for _ in 0..<Self.readBatch {
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

    private func checkHandshakeDeadline() -> Bool {
        guard case .awaitingWelcome = machine.state, now >= handshakeDeadline else { return true }
        return perform(
            .close(FrameBusError(.timedOut, "Subscriber.connect", message: "no WELCOME"), reply: nil),
            descriptors: []
        )
    }

    /// Feeds one datagram to the state machine; returns false when the connection ended.
    private func handle(_ datagram: ReceivedDatagram) -> Bool {
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
    private func drainRing() -> Bool {
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

    /// Carries out an action; returns false when the connection ended.
    private func perform(_ action: SubscriberStateMachine.Action, descriptors: [OwnedDescriptor]) -> Bool {
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
                do { channel = try half.joining(peerRing: ring, peerWake: wake, peerRole: .announce) } catch {
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
            core.report(drop)
            return true
        case .close(let error, let reply):
            if machine.retriesWithoutRings {
                // The publisher speaks no version 3: connect again at once with version 2 (§9.1).
                configuration.logger.debug("publisher at \(configuration.path) refused version 3; using version 2")
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

    private func close(_ error: FrameBusError) {
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

    private func importSurface(_ announcement: WireSurface, descriptors: [OwnedDescriptor]) -> Bool {
        // The decoder checked that as many fds came as the SURFACE names; the machine bounded every field, so these
        // conversions cannot trap (u32 → Int on 64-bit; byte counts ≤ 2³²).
        guard descriptors.count == announcement.descriptorByteCounts.count else {
            return perform(
                machine.surfaceImportFailed(surfaceID: announcement.surfaceID, reason: "descriptor count"),
                descriptors: []
            )
        }
        let layout = SurfaceLayout(
            pixelFormat: announcement.pixelFormat,
            width: Int(announcement.width),
            height: Int(announcement.height),
            planes: announcement.planes.map {
                PlaneLayout(
                    offset: Int(clamping: $0.offset),
                    bytesPerRow: Int($0.bytesPerRow),
                    width: Int($0.width),
                    height: Int($0.height),
                    bytesPerElement: Int($0.bytesPerElement)
                )
            },
            allocationSize: Int(clamping: announcement.descriptorByteCounts.reduce(0) { Saturating.add($0, $1) })
        )
        // Ownership of every fd moves into the handle, which closes them if the import fails.
        let fds = descriptors.compactMap { $0.take() }
        let backing: Surface.Backing =
            announcement.backing == .dmaBuf ? .dmaBuf(modifier: announcement.modifier) : .memfd
        let handle = SurfaceHandle(
            id: SurfaceID(rawValue: announcement.surfaceID),
            layout: layout,
            backing: backing,
            descriptors: fds,
            planeDescriptorIndices: announcement.planes.map { Int($0.descriptorIndex) },
            descriptorByteCounts: announcement.descriptorByteCounts.map { Int(clamping: $0) }
        )
        let surface: Surface
        let format: PixelFormat
        do {
            // One memfd, a memfd per plane, or DMA-BUFs (CPU access then bracketed with DMA_BUF_IOCTL_SYNC in
            // lock/unlock): the import checks seals, sizes and every plane against its own descriptor.
            surface = try Surface.importing(handle)
            // Checked once here (the format fits the layout); every frame on it is wrapped without the check.
            format = try PixelBuffer(surface: surface).pixelFormat
        } catch {
            return perform(
                machine.surfaceImportFailed(surfaceID: announcement.surfaceID, reason: "\(error)"),
                descriptors: []
            )
        }
        surfaces[announcement.surfaceID] = ImportedSurface(surface, format: format)
        return true
    }

    /// An imported surface and what checking a frame on it needs, worked out once when it is imported.
    private struct ImportedSurface {
        let surface: Surface
        /// Its pixel format, checked against its layout at the import.
        let format: PixelFormat
        /// A compressed surface is read up to each frame's `bytesUsed`; a raw one over all its planes.
        var isCompressed: Bool { format.isCompressed }
        /// The bytes a raw frame reads: the sum of its planes (saturating; the import bounded them).
        let rawByteCount: Int
        /// The most committed memory seen so far (docs/PROTOCOL.md §5.7): it never shrinks. Nil until looked at.
        var committedBytes: Int?

        init(_ surface: Surface, format: PixelFormat) {
            self.surface = surface
            self.format = format
            rawByteCount = surface.layout.planes.reduce(0 as Int) { Saturating.add($0, UInt64($1.byteCount)) }
        }
    }

    private func deliver(_ frame: WireFrame, discontinuity: DiscontinuityFlags) -> Bool {
        guard let imported = surfaces[frame.surfaceID] else {
            return perform(machine.frameRefused("FRAME on surface \(frame.surfaceID), never imported"), descriptors: [])
        }
        let surface = imported.surface
        if let refusal = checkCommitted(frame, imported) {
            // The connection fails before anyone touched memory the publisher did not commit.
            return perform(machine.frameRefused(refusal), descriptors: [])
        }
        // From here the frame is held: the token releases it whatever happens.
        let token = ReleaseToken(
            sequence: frame.sequence,
            surfaceID: frame.surfaceID,
            generation: generation,
            sender: core.sender
        )
        // Sized for its three entries up front, so filling it never regrows it.
        var custom = [AttachmentKey: AttachmentValue](minimumCapacity: 3)
        custom[.busSequenceNumber] = .integer(Int64(bitPattern: frame.sequence))
        custom[.busBytesUsed] = .integer(Int64(clamping: frame.bytesUsed))
        custom[.busPublishTime] = .integer(Int64(bitPattern: frame.publishTime))
        let attachments = SampleAttachments(discontinuity: discontinuity, custom: custom)
        let pixelAttachments: PixelBufferAttachments
        if let last = lastAttachments, last.codes == frame.attachments {
            pixelAttachments = last.decoded
        } else {
            pixelAttachments = WireAttachments.decode(frame.attachments)
            lastAttachments = (frame.attachments, pixelAttachments)
        }
        let timing = SampleTimingInfo(
            presentationTimeStamp: Self.mediaTime(frame.presentationTime),
            duration: Self.mediaTime(frame.duration)
        )
        let sample: SampleBuffer
        do {
            // The frame is held for as long as its pixel buffer lives: whoever keeps `sampleBuffer.imageBuffer`
            // (and drops the sample buffer) keeps the publisher from recycling the surface, as with CoreVideo.
            // Invalidating the sample buffer does not release it either, since its image buffer may still be in use.
            // The import checked that the surface fits its format.
            let pixelBuffer = PixelBuffer(
                checkedSurface: surface,
                pixelFormat: imported.format,
                attachments: pixelAttachments,
                releaseHandler: { token.release() }
            )
            sample = try SampleBuffer(
                imageBuffer: pixelBuffer,
                timing: timing,
                attachments: attachments,
                dataIsReady: true
            )
        } catch {
            token.release(notDelivered: true)
            return perform(machine.frameRefused("surface \(frame.surfaceID): \(error)"), descriptors: [])
        }
        if isCallerTurn { core.leadership.framesReadByCallers.add(1, ordering: .relaxed) }
        lastFrameConsumedHere = core.deliver(
            PendingFrame(sample: sample, token: token, publishTime: frame.publishTime, bytesUsed: frame.bytesUsed),
            sequence: frame.sequence
        )
        return true
    }

    /// Refuses a frame that would make us read memory the publisher never committed (docs/PROTOCOL.md §5.7): a
    /// memfd's holes cost the publisher nothing, and faulting them in would commit memory on our behalf. A
    /// compressed frame is read up to its `bytesUsed`, a raw one over its planes. Sealed memfds never give
    /// committed memory back, so one `fstat` per surface suffices while frames stay within what it showed.
    private func checkCommitted(_ frame: WireFrame, _ imported: ImportedSurface) -> String? {
        let needed = imported.isCompressed ? Int(clamping: frame.bytesUsed) : imported.rawByteCount
        if let known = imported.committedBytes, needed <= known { return nil }
        let committed: Int?
        do { committed = try imported.surface.committedByteCount() } catch {
            return "surface \(frame.surfaceID): \(error)"
        }
        guard let committed else { return nil }  // a DMA-BUF: its exporter allocated it whole
        surfaces[frame.surfaceID]?.committedBytes = committed
        guard needed <= committed else {
            return "FRAME \(frame.sequence) needs \(needed) bytes of surface \(frame.surfaceID), "
                + "of which the publisher committed \(committed)"
        }
        return nil
    }

    static func mediaTime(_ time: WireTime) -> MediaTime {
        let flags = MediaTime.Flags(rawValue: time.flags).intersection(.all)
        guard flags.contains(.valid) else { return .invalid }
        return MediaTime(value: time.value, timescale: time.timescale, flags: flags)
    }
}
