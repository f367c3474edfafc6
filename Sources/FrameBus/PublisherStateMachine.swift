import Logging

/// The publisher's side of the protocol as a state machine: events in, actions out, no sockets, no clocks, no
/// threads (docs/PROTOCOL.md is the specification it implements).
///
/// The IO layer (``Publisher``) feeds it what happened — a connection was accepted, a datagram arrived, a
/// connection broke, time passed, the producer published a frame or lost some, the pool freed a surface — and
/// carries out the ``Action``s it returns: send what a connection's outbound queue holds, close a connection,
/// write a log line. Everything a peer can make it do is bounded: pending handshakes, subscribers, monitors,
/// messages queued per connection, frames held per subscriber, surfaces announced per subscriber, log lines.
///
/// `Resource` is what keeps a frame's buffer out of its pool while a subscriber holds it (a ``PixelBuffer`` in
/// the publisher; any value in tests). The machine stores one per held frame and per queued SURFACE, and drops it
/// when the frame is released or the connection closes.
package struct PublisherStateMachine<Resource> {
    // MARK: Types

    /// Identifies one accepted connection.
    package struct ConnectionID: Hashable, Comparable, Sendable, CustomStringConvertible {
        var rawValue: UInt64
        package static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
        package var description: String { "\(rawValue)" }
    }

    /// Who is on the other end (`SO_PEERCRED`).
    package struct Credentials: Hashable, Sendable {
        var processID: Int32
        var userID: UInt32
    }

    /// The limits and timings of docs/PROTOCOL.md §8.1, validated by ``Publisher/Configuration``.
    package struct Limits: Sendable {
        var formats: [UInt32]
        var allowedUserIDs: Set<UInt32>
        var maximumSubscribers = 16
        var maximumMonitors = 4
        var maximumPendingHandshakes = 64
        var handshakeTimeout: UInt64 = 5_000_000_000
        var maximumQueuedMessages = 256
        var maximumQueuedMonitorReports = 4
        var closeGracePeriod: UInt64 = 1_000_000_000
        var monitorInterval: UInt64 = 1_000_000_000
        var dropFlushInterval: UInt64 = 100_000_000
        var extraHeldFramesPerSubscriber = 2
        var producerReserve = 2
        var maximumAnnouncedSurfaces = 64
        /// Frames all subscribers together may hold (§7.3); nil until known.
        var heldFrameBudget: Int?
        /// The fair minimum kept for each subscriber still to come (``HoldingPolicy/minimumHeldFrames``).
        var minimumHeldFrames = 3
        /// The configured size of each pool of converted frames (`conversionBufferLimit`); nil: as large as the
        /// held-frame budget allows (plus the frame being converted), so it never binds.
        var conversionBufferLimit: Int?
        var logInterval: UInt64 = 10_000_000_000

        /// These limits as the public policy value.
        var holding: HoldingPolicy {
            HoldingPolicy(
                budget: heldFrameBudget,
                producerReserve: producerReserve,
                extraHeldFrames: extraHeldFramesPerSubscriber,
                minimumHeldFrames: minimumHeldFrames
            )
        }
    }

    /// What the IO layer must do.
    package enum Action {
        /// Send what ``outbound(of:)`` holds for this connection, then report it with ``sent(_:on:now:)``.
        case flush(ConnectionID)
        /// Shut the connection down and forget its socket; the machine has forgotten it already.
        case close(ConnectionID)
        /// Write a log line (already rate-limited).
        case log(Logger.Level, String)
        /// A new deadline exists (a DROP range started): the IO layer's wait must end by ``nextDeadline()``.
        case deadlineChanged
    }

    /// One datagram waiting to be sent, with what its fds are exported from.
    enum Outbound {
        case message(WireMessage)
        /// A SURFACE or SURFACE_V1: export the fds of `resource`'s surface and send them with it.
        case surface(WireMessage, Resource)

        var message: WireMessage {
            switch self {
            case .message(let message), .surface(let message, _): message
            }
        }
    }

    /// One frame in one format, shared by every subscriber of that format.
    package struct Representation {
        var surfaceID: UInt64
        /// The version-2 description.
        var surface: WireSurface
        /// The version-1 description; nil when version 1 cannot describe the surface (DMA-BUF, several fds).
        var surfaceV1: WireSurfaceV1?
        var bytesUsed: UInt64
        var resource: Resource
    }

    /// What ``beginFrame(format:width:height:discontinuity:)`` decided.
    package struct FramePlan {
        package var sequence: UInt64
        var isDiscontinuity: Bool
        /// Formats some subscriber receives, the published one first.
        var formats: [UInt32]
    }

    private struct HeldFrame {
        var surfaceID: UInt64
        var resource: Resource
        var sentAt: UInt64
        /// The FRAME's `bytesUsed`, taken back out of `bytesDelivered` if the frame is released `notDelivered`.
        var bytesUsed: UInt64
    }

    private struct PendingDrop {
        var range: ClosedRange<UInt64>
        var reason: WireDropReason
        var startedAt: UInt64
    }

    /// A subscriber after its WELCOME: the only per-connection state that allocates (its histogram, its maps).
    ///
    /// A class, so that updating it in place never copies its maps and histogram (an enum payload that is a struct
    /// would be copied on every write while the dictionary still holds the old value). Only this machine holds it.
    private final class SubscriberSession {
        let credentials: Credentials
        let version: UInt16
        let format: UInt32
        let deliveryMode: UInt16
        let queueDepth: UInt16
        let maximumHeldFrames: Int
        /// What it may hold now: its grant, or less if it was welcomed before the budget was known (§7.3).
        var heldLimit: Int
        let maximumAnnouncedSurfaces: Int
        let acceptsDMABuf: Bool
        let firstSequence: UInt64
        /// Announced surface ids and when (an increasing counter), for retiring the oldest.
        var announced: [UInt64: UInt64] = [:]
        var announceCounter: UInt64 = 0
        var held: [UInt64: HeldFrame] = [:]
        var lastAttachments: WireAttachmentCodes?
        var pendingDrop: PendingDrop?
        var delivered: UInt64 = 0
        var bytesDelivered: UInt64 = 0
        var droppedLate: UInt64 = 0
        var droppedOutOfBuffers: UInt64 = 0
        var droppedDiscontinuity: UInt64 = 0
        var holdTimes = LatencyRecorder()
        var outbound: [Outbound] = []

        init(
            credentials: Credentials,
            version: UInt16,
            format: UInt32,
            deliveryMode: UInt16,
            queueDepth: UInt16,
            maximumHeldFrames: Int,
            maximumAnnouncedSurfaces: Int,
            acceptsDMABuf: Bool,
            firstSequence: UInt64
        ) {
            self.credentials = credentials
            self.version = version
            self.format = format
            self.deliveryMode = deliveryMode
            self.queueDepth = queueDepth
            self.maximumHeldFrames = maximumHeldFrames
            self.heldLimit = maximumHeldFrames
            self.maximumAnnouncedSurfaces = maximumAnnouncedSurfaces
            self.acceptsDMABuf = acceptsDMABuf
            self.firstSequence = firstSequence
        }
    }

    private struct MonitorSession {
        var credentials: Credentials
        var nextReport: UInt64
        var outbound: [Outbound] = []
    }

    private enum Connection {
        /// Accepted, waiting for HELLO: a fixed-size record, nothing allocated.
        case pending(Credentials, deadline: UInt64)
        case subscriber(SubscriberSession)
        case monitor(MonitorSession)
        /// Sending its last message (an ERROR or END_OF_STREAM), then closed; nothing else is sent or read.
        case closing(deadline: UInt64, outbound: [Outbound])
    }

    /// Counters of subscribers that left, so totals cover the publisher's life.
    struct DepartedTotals {
        var delivered: UInt64 = 0
        var bytesDelivered: UInt64 = 0
        var droppedLate: UInt64 = 0
        var droppedOutOfBuffers: UInt64 = 0
        var droppedDiscontinuity: UInt64 = 0
    }

    // MARK: State

    private(set) var limits: Limits
    let streamID: UInt64
    private var connections: [ConnectionID: Connection] = [:]
    private var nextConnectionID: UInt64 = 1
    private(set) var pendingCount = 0
    private(set) var subscriberCount = 0
    private(set) var monitorCount = 0
    private(set) var nextSequence: UInt64 = 0
    private(set) var published: UInt64 = 0
    private(set) var droppedAtSource: [WireDropReason: UInt64] = [:]
    private(set) var departed = DepartedTotals()
    private(set) var conversions: UInt64 = 0
    /// Formats frames were converted to (``isConversionTarget(_:)``).
    private var convertedFormats: Set<UInt32> = []
    private(set) var isStopped = false
    private var lastGeometry: (format: UInt32, width: UInt32, height: UInt32)?
    private var pendingDiscontinuity = false
    private var holdTimes = LatencyRecorder()
    private var logLimiter = LogLimiter()

    package init(limits: Limits, streamID: UInt64) {
        self.limits = limits
        self.streamID = streamID
        connections.reserveCapacity(
            limits.maximumPendingHandshakes + limits.maximumSubscribers + limits.maximumMonitors
        )
    }

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
        connections[id] = .pending(credentials, deadline: now &+ limits.handshakeTimeout)
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
            session.outbound.removeFirst(min(count, session.outbound.count))
        case .monitor(var monitor):
            monitor.outbound.removeFirst(min(count, monitor.outbound.count))
            connections[id] = .monitor(monitor)
        case .closing(let deadline, var outbound):
            outbound.removeFirst(min(count, outbound.count))
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

    private mutating func release(
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

    private mutating func handshake(
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
            var monitor = MonitorSession(credentials: credentials, nextReport: now &+ limits.monitorInterval)
            monitor.outbound.append(
                .message(
                    .welcome(
                        WireWelcome(
                            version: version,
                            deliveryMode: 0,
                            queueDepth: 0,
                            maximumHeldFrames: 0,
                            format: 0,
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
            monitor.outbound.append(.message(.monitorReport(monitorReport(now: now))))
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
                firstSequence: nextSequence
            )
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
            pendingCount -= 1
            subscriberCount += 1
            connections[id] = .subscriber(session)
            var actions: [Action] = [.flush(id)]
            log(
                .debug,
                "welcome",
                "subscriber \(id) (pid \(credentials.processID), v\(version)) gets \(FourCC.name(format)), \(hello.deliveryMode == 0 ? "latest-only" : "queue \(depth)"), holds ≤ \(maximumHeld)",
                now: now,
                &actions
            )
            return actions
        }
    }

    // MARK: The held-frame budget (docs/PROTOCOL.md §7.3, ``HoldingPolicy``)

    /// The most surfaces any subscriber keeps mapped (docs/PROTOCOL.md §8.2).
    static var subscriberSurfaceLimit: Int { 256 }

    /// Frames subscribers of one format may hold together from that format's pool of converted frames when
    /// `conversionBufferLimit` caps it (the limit less the frame being converted); nil otherwise: the pool is as large
    /// as everything subscribers may hold, so only the held-frame budget binds.
    var conversionBudget: Int? { limits.conversionBufferLimit.map { max(1, $0 - 1) } }

    /// How many buffers a pool of converted frames may have: the configured limit, else every frame subscribers may
    /// hold together (the held-frame budget, and never more than `maximumSubscribers` × 255) plus the one being
    /// converted. A pool allocates only the buffers in use.
    var conversionPoolCapacity: Int {
        if let limit = limits.conversionBufferLimit { return limit }
        let most = min(max(limits.maximumSubscribers, 1), Int(UInt16.max)) * HoldingPolicy.largestGrant
        return min(limits.heldFrameBudget ?? most, most) + 1
    }

    /// Subscribers admitted at once (the held-frame budget's capacity).
    var subscriberCapacity: Int {
        limits.holding.subscriberCapacity(budget: limits.heldFrameBudget, maximumSubscribers: limits.maximumSubscribers)
    }

    private var holdingDescription: String {
        let budget = limits.heldFrameBudget.map { "\($0) frames" } ?? "unbounded"
        return "budget \(budget), at most \(subscriberCapacity) subscribers"
    }

    /// Whether subscribers of `format` may get converted frames, and so pin that format's conversion pool: every
    /// compressed format (a producer publishes raw frames; their FourCCs start with `&`, docs/PROTOCOL.md §6), and
    /// any format a frame was converted to.
    private func isConversionTarget(_ format: UInt32) -> Bool {
        convertedFormats.contains(format) || format >> 24 == 0x26
    }

    /// What a subscriber of `format` is granted against the held-frame budget and, when its conversion pool is
    /// capped, that pool's budget, given those admitted before it; nil when one of them cannot admit it.
    private func grant(
        requestedDepth: Int,
        isLatestOnly: Bool,
        format: UInt32,
        before admitted: [SubscriberSession]
    ) -> HoldingPolicy.Grant? {
        let policy = limits.holding
        guard
            var grant = policy.grant(
                requestedDepth: requestedDepth,
                isLatestOnly: isLatestOnly,
                budget: limits.heldFrameBudget,
                committed: admitted.reduce(0) { $0 + $1.heldLimit },
                admitted: admitted.count,
                maximumSubscribers: limits.maximumSubscribers
            )
        else { return nil }
        if let conversionBudget, isConversionTarget(format) {
            let inFormat = admitted.filter { $0.format == format }
            guard
                let converted = policy.grant(
                    requestedDepth: requestedDepth,
                    isLatestOnly: isLatestOnly,
                    budget: conversionBudget,
                    committed: inFormat.reduce(0) { $0 + $1.heldLimit },
                    admitted: inFormat.count,
                    maximumSubscribers: limits.maximumSubscribers
                )
            else { return nil }
            grant.maximumHeldFrames = min(grant.maximumHeldFrames, converted.maximumHeldFrames)
            grant.queueDepth = min(grant.queueDepth, converted.queueDepth)
        }
        return grant
    }

    /// What a new subscriber of `format` is granted; nil when the budgets cannot admit it.
    private func admit(requestedDepth: Int, isLatestOnly: Bool, format: UInt32) -> HoldingPolicy.Grant? {
        var admitted: [SubscriberSession] = []
        for case .subscriber(let session) in connections.values { admitted.append(session) }
        return grant(requestedDepth: requestedDepth, isLatestOnly: isLatestOnly, format: format, before: admitted)
    }

    /// Learns the budget from the producer's pool (its allocation threshold), unless one is configured or known.
    ///
    /// Subscribers welcomed before (the producer had not asked for a buffer yet) are admitted again against it.
    package mutating func learnPoolCapacity(_ allocationThreshold: Int) {
        guard limits.heldFrameBudget == nil else { return }
        limits.heldFrameBudget = max(1, allocationThreshold - limits.producerReserve)
        readmit()
    }

    /// Admits every subscriber again against the budgets as they are now, in the order they came: each may then hold
    /// at most its new grant (at least 1), never more than WELCOME said (`maximumHeldFrames` is an upper bound,
    /// docs/PROTOCOL.md §7.3).
    private func readmit() {
        var admitted: [SubscriberSession] = []
        for id in connections.keys.sorted() {
            guard case .subscriber(let session) = connections[id] else { continue }
            let grant = grant(
                requestedDepth: Int(session.queueDepth),
                isLatestOnly: session.deliveryMode == 0,
                format: session.format,
                before: admitted
            )
            session.heldLimit = max(1, min(session.maximumHeldFrames, grant?.maximumHeldFrames ?? 1))
            admitted.append(session)
        }
    }

    // MARK: Publishing

    /// Every sequence number is used (2⁶⁴−1 of them; only reachable by reporting absurd drop counts): the
    /// publisher can publish nothing more and must be restarted.
    var isSequenceSpaceExhausted: Bool { nextSequence == .max }

    /// Starts a frame: its sequence number, its discontinuity flag, and the formats someone needs.
    ///
    /// Returns nil after ``stop(now:)``.
    package mutating func beginFrame(format: UInt32, width: UInt32, height: UInt32, discontinuity: Bool) -> FramePlan? {
        guard !isStopped, !isSequenceSpaceExhausted else { return nil }
        let sequence = nextSequence
        nextSequence &+= 1
        published.saturatingAdd(1)
        var flag = discontinuity || pendingDiscontinuity
        if let last = lastGeometry, last != (format, width, height) { flag = true }
        lastGeometry = (format, width, height)
        pendingDiscontinuity = false
        var formats: [UInt32] = []
        for case .subscriber(let session) in connections.values where !formats.contains(session.format) {
            if session.format == format {
                formats.insert(session.format, at: 0)
            } else {
                formats.append(session.format)
            }
        }
        return FramePlan(sequence: sequence, isDiscontinuity: flag, formats: formats)
    }

    /// Sends frame `template.sequence` in `format` to every subscriber of that format that was welcomed before
    /// the frame began; `representation` nil means the format could not be made (DROP `outOfBuffers`).
    package mutating func deliver(
        _ template: WireFrame,
        format: UInt32,
        representation: Representation?,
        isConversion: Bool,
        now: UInt64
    ) -> [Action] {
        if representation != nil && isConversion { conversions.saturatingAdd(1) }
        if isConversion, conversionBudget != nil, !convertedFormats.contains(format) {
            // A format first converted to (the producer published another): its subscribers now pin its pool.
            convertedFormats.insert(format)
            readmit()
        }
        var actions: [Action] = []
        let sequence = template.sequence
        // Sessions are objects updated in place; the dictionary itself changes only when one fails (tooSlow), and
        // the loop iterates the value it started with.
        for (id, connection) in connections {
            guard case .subscriber(let session) = connection, session.format == format,
                session.firstSequence <= sequence
            else { continue }
            guard let representation else {
                if drop(sequence...sequence, .outOfBuffers, in: session, now: now) { actions.append(.deadlineChanged) }
                continue
            }
            let surfaceV1 = representation.surfaceV1
            let sendable =
                session.version == 1
                ? surfaceV1 != nil
                : (representation.surface.backing == .memfd || session.acceptsDMABuf)
            guard sendable, session.held.count < session.heldLimit else {
                if drop(sequence...sequence, .outOfBuffers, in: session, now: now) { actions.append(.deadlineChanged) }
                continue
            }
            let surfaceID = representation.surfaceID
            if session.announced[surfaceID] == nil {
                if session.announced.count >= session.maximumAnnouncedSurfaces {
                    retireOldestIdleSurface(of: session)
                }
                let message: WireMessage =
                    session.version == 1 ? .surfaceV1(surfaceV1!) : .surface(representation.surface)
                enqueue(.surface(message, representation.resource), in: session)
                session.announceCounter &+= 1
                session.announced[surfaceID] = session.announceCounter
            }
            var frame = template
            frame.surfaceID = surfaceID
            frame.bytesUsed = representation.bytesUsed
            if session.lastAttachments != frame.attachments {
                frame.flags |= WireFrame.attachmentsChangedFlag
                session.lastAttachments = frame.attachments
            }
            enqueue(.message(.frame(frame)), in: session)
            session.held[sequence] = HeldFrame(
                surfaceID: surfaceID,
                resource: representation.resource,
                sentAt: now,
                bytesUsed: representation.bytesUsed
            )
            session.delivered.saturatingAdd(1)
            session.bytesDelivered.saturatingAdd(representation.bytesUsed)
            if session.outbound.count > limits.maximumQueuedMessages {
                actions += tooSlow(id, queued: session.outbound.count, now: now)
                continue
            }
            actions.append(.flush(id))
        }
        return actions
    }

    /// The producer lost `count` frames upstream (or drops them itself for `reason`): they use sequence numbers
    /// and every subscriber gets a DROP for them (coalesced with adjacent drops).
    mutating func reportDropped(reason: WireDropReason, count: UInt64, now: UInt64) -> (ClosedRange<UInt64>, [Action])?
    {
        guard !isStopped, !isSequenceSpaceExhausted, count > 0 else { return nil }
        // Sequence numbers 0…2⁶⁴−2 are usable; a count past the end is cut there (and the stream is then over).
        let first = nextSequence
        let last = first.addingSaturating(count - 1) == .max ? UInt64.max - 1 : first + (count - 1)
        let range = first...last
        nextSequence = last + 1
        let used = last - first + 1
        published.saturatingAdd(used)
        droppedAtSource[reason, default: 0].saturatingAdd(used)
        if reason == .discontinuity { pendingDiscontinuity = true }
        var actions: [Action] = []
        for id in connections.keys.sorted() {
            guard case .subscriber(let session) = connections[id] else { continue }
            if drop(range, reason, in: session, now: now) { actions.append(.deadlineChanged) }
            actions.append(.flush(id))
        }
        return (range, actions)
    }

    /// The producer's pool freed a surface for good: retire it everywhere it is announced and not held.
    mutating func surfaceFreed(_ surfaceID: UInt64) -> [Action] {
        var actions: [Action] = []
        for id in connections.keys.sorted() {
            guard case .subscriber(let session) = connections[id], session.announced[surfaceID] != nil,
                !session.held.values.contains(where: { $0.surfaceID == surfaceID })
            else { continue }
            session.announced[surfaceID] = nil
            enqueue(.message(.retireSurface(surfaceID: surfaceID)), in: session)
            actions.append(.flush(id))
        }
        return actions
    }

    private mutating func retireOldestIdleSurface(of session: SubscriberSession) {
        var heldSurfaces = Set<UInt64>()
        for frame in session.held.values { heldSurfaces.insert(frame.surfaceID) }
        // maximumAnnouncedSurfaces > maximumHeldFrames, so an idle one exists whenever the limit is reached.
        guard
            let oldest = session.announced.filter({ !heldSurfaces.contains($0.key) }).min(by: { $0.value < $1.value })
        else { return }
        session.announced[oldest.key] = nil
        enqueue(.message(.retireSurface(surfaceID: oldest.key)), in: session)
    }

    /// Records dropped frames for one subscriber: extends the pending range or sends it and starts another.
    @discardableResult
    private mutating func drop(
        _ range: ClosedRange<UInt64>,
        _ reason: WireDropReason,
        in session: SubscriberSession,
        now: UInt64
    ) -> Bool {
        let count = WireDrop(range, reason: reason).frameCount
        switch reason {
        case .frameWasLate: session.droppedLate.saturatingAdd(count)
        case .outOfBuffers: session.droppedOutOfBuffers.saturatingAdd(count)
        case .discontinuity: session.droppedDiscontinuity.saturatingAdd(count)
        }
        if var pending = session.pendingDrop, pending.reason == reason, pending.range.upperBound < .max,
            pending.range.upperBound + 1 == range.lowerBound
        {
            pending.range = pending.range.lowerBound...range.upperBound
            session.pendingDrop = pending
            return false
        }
        flushPendingDrop(session)
        session.pendingDrop = PendingDrop(range: range, reason: reason, startedAt: now)
        return true
    }

    private func flushPendingDrop(_ session: SubscriberSession) {
        guard let pending = session.pendingDrop else { return }
        session.pendingDrop = nil
        session.outbound.append(.message(.drop(WireDrop(pending.range, reason: pending.reason))))
    }

    /// Queues a message after any pending DROP, so drops stay in sequence order (docs/PROTOCOL.md §4.2).
    private func enqueue(_ item: Outbound, in session: SubscriberSession) {
        flushPendingDrop(session)
        session.outbound.append(item)
    }

    // MARK: Time

    /// Time passed: handshake timeouts, pending DROP ranges, monitor reports, closing connections.
    mutating func tick(now: UInt64) -> [Action] {
        var actions: [Action] = []
        for id in connections.keys.sorted() {
            switch connections[id] {
            case .pending(let credentials, let deadline) where now >= deadline:
                actions += fail(
                    id,
                    .handshakeTimeout,
                    "no HELLO within \(limits.handshakeTimeout / 1_000_000) ms (pid \(credentials.processID))",
                    now: now
                )
            case .subscriber(let session):
                if let pending = session.pendingDrop, now &- pending.startedAt >= limits.dropFlushInterval {
                    flushPendingDrop(session)
                    if session.outbound.count > limits.maximumQueuedMessages {
                        actions += tooSlow(id, queued: session.outbound.count, now: now)
                    } else {
                        actions.append(.flush(id))
                    }
                }
            case .monitor(var monitor) where now >= monitor.nextReport:
                monitor.nextReport = now &+ limits.monitorInterval
                monitor.outbound.append(.message(.monitorReport(monitorReport(now: now))))
                connections[id] = .monitor(monitor)
                if monitor.outbound.count > limits.maximumQueuedMonitorReports {
                    actions += tooSlow(id, queued: monitor.outbound.count, now: now)
                } else {
                    actions.append(.flush(id))
                }
            case .closing(let deadline, _) where now >= deadline:
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
                if let pending = session.pendingDrop { consider(pending.startedAt &+ limits.dropFlushInterval) }
            case .monitor(let monitor): consider(monitor.nextReport)
            case .closing(let deadline, _): consider(deadline)
            }
        }
        return earliest
    }

    // MARK: Ending

    /// Stops: END_OF_STREAM to subscribers and monitors, ERROR `shuttingDown` to handshakes; every held frame is
    /// released. The IO layer sends what it can once and closes every connection. Idempotent.
    mutating func stop(now: UInt64) -> [Action] {
        guard !isStopped else { return [] }
        isStopped = true
        let last = nextSequence == 0 ? UInt64.max : nextSequence - 1
        let end = WireMessage.endOfStream(WireEndOfStream(lastSequence: last, reason: 0))
        var actions: [Action] = []
        for id in connections.keys.sorted() {
            var outbound: [Outbound]
            switch connections[id] {
            case .pending:
                outbound = [.message(.error(WireErrorMessage(.shuttingDown, "publisher shutting down")))]
            case .subscriber(let session):
                flushPendingDrop(session)
                // Frames already queued are dropped with the rest: the subscriber stops holding them at EOF.
                outbound = session.outbound.filter {
                    if case .message(.drop) = $0 { return true } else { return false }
                }
                outbound.append(.message(end))
            case .monitor:
                outbound = [.message(end)]
            case .closing(_, let queued):
                outbound = queued
            case nil:
                continue
            }
            forget(id)
            connections[id] = .closing(deadline: now, outbound: outbound)
            actions.append(.flush(id))
            actions.append(.close(id))
        }
        return actions
    }

    /// Forgets a connection after the IO layer closed it following ``stop(now:)``.
    mutating func closedAfterStop(_ id: ConnectionID) {
        connections[id] = nil
    }

    // MARK: Failing

    /// Sends an ERROR and closes: the connection releases everything it holds now and sends nothing else.
    private mutating func fail(_ id: ConnectionID, _ code: WireErrorCode, _ reason: String, now: UInt64) -> [Action] {
        guard let connection = connections[id] else { return [] }
        var actions: [Action] = []
        let who: String
        switch connection {
        case .pending(let credentials, _): who = "connection \(id) (pid \(credentials.processID))"
        case .subscriber(let session): who = "subscriber \(id) (pid \(session.credentials.processID))"
        case .monitor(let monitor): who = "monitor \(id) (pid \(monitor.credentials.processID))"
        case .closing: return []
        }
        log(.warning, "\(code)", "closing \(who): \(code): \(reason)", now: now, &actions)
        forget(id)
        connections[id] = .closing(
            deadline: now &+ limits.closeGracePeriod,
            outbound: [.message(.error(WireErrorMessage(code, reason)))]
        )
        actions.append(.flush(id))
        return actions
    }

    private mutating func tooSlow(_ id: ConnectionID, queued: Int, now: UInt64) -> [Action] {
        fail(id, .tooSlow, "stopped reading: \(queued) messages queued", now: now)
    }

    /// Removes a connection's session (releasing its held frames) and fixes the counts.
    private mutating func forget(_ id: ConnectionID) {
        guard let connection = connections.removeValue(forKey: id) else { return }
        switch connection {
        case .pending: pendingCount -= 1
        case .subscriber(let session):
            subscriberCount -= 1
            departed.delivered.saturatingAdd(session.delivered)
            departed.bytesDelivered.saturatingAdd(session.bytesDelivered)
            departed.droppedLate.saturatingAdd(session.droppedLate)
            departed.droppedOutOfBuffers.saturatingAdd(session.droppedOutOfBuffers)
            departed.droppedDiscontinuity.saturatingAdd(session.droppedDiscontinuity)
        case .monitor: monitorCount -= 1
        case .closing: break
        }
    }

    /// Debug lines pass; warnings and worse are rate-limited per key (a flood of bad peers writes a few lines).
    private mutating func log(
        _ level: Logger.Level,
        _ key: String,
        _ message: String,
        now: UInt64,
        _ actions: inout [Action]
    ) {
        if level <= .debug {
            actions.append(.log(level, message))
            return
        }
        if let line = logLimiter.admit(key: key, message: message, now: now, interval: limits.logInterval) {
            actions.append(.log(level, line))
        }
    }

    // MARK: Statistics

    /// The MONITOR_REPORT for now.
    func monitorReport(now: UInt64) -> WireMonitorReport {
        var records: [WireMonitorReport.Record] = []
        for id in connections.keys.sorted() {
            guard case .subscriber(let session) = connections[id] else { continue }
            guard records.count < WireProtocol.maximumMonitorRecords else { break }
            let summary = session.holdTimes.summary
            records.append(
                WireMonitorReport.Record(
                    subscriberID: id.rawValue,
                    processID: session.credentials.processID,
                    userID: session.credentials.userID,
                    format: session.format,
                    deliveryMode: session.deliveryMode,
                    queueDepth: session.queueDepth,
                    delivered: session.delivered,
                    bytesDelivered: session.bytesDelivered,
                    droppedLate: session.droppedLate,
                    droppedOutOfBuffers: session.droppedOutOfBuffers,
                    droppedDiscontinuity: session.droppedDiscontinuity,
                    held: UInt32(clamping: session.held.count),
                    queued: UInt32(clamping: session.outbound.count),
                    holdTimeP50: summary.p50,
                    holdTimeP99: summary.p99,
                    version: session.version
                )
            )
        }
        return WireMonitorReport(
            time: now,
            published: published,
            droppedAtSource: droppedAtSource.values.reduce(0) { $0.addingSaturating($1) },
            subscriberCount: UInt16(clamping: subscriberCount),
            records: records
        )
    }

    /// One subscriber's numbers for ``PublisherStatistics``.
    struct SubscriberSnapshot {
        var id: ConnectionID
        var credentials: Credentials
        var format: UInt32
        var queueDepth: Int
        var isLatestOnly: Bool
        var maximumHeldFrames: Int
        /// What it may hold now (``maximumHeldFrames``, or less if welcomed before the budget was known).
        var heldLimit: Int
        var delivered: UInt64
        var bytesDelivered: UInt64
        var droppedLate: UInt64
        var droppedOutOfBuffers: UInt64
        var droppedDiscontinuity: UInt64
        var held: Int
        var queued: Int
        var holdTimes: LatencySummary
        var announcedSurfaces: Set<UInt64>
    }

    /// Every subscriber now, by id.
    var subscribers: [SubscriberSnapshot] {
        connections.keys.sorted().compactMap { id in
            guard case .subscriber(let session) = connections[id] else { return nil }
            return SubscriberSnapshot(
                id: id,
                credentials: session.credentials,
                format: session.format,
                queueDepth: Int(session.queueDepth),
                isLatestOnly: session.deliveryMode == 0,
                maximumHeldFrames: session.maximumHeldFrames,
                heldLimit: session.heldLimit,
                delivered: session.delivered,
                bytesDelivered: session.bytesDelivered,
                droppedLate: session.droppedLate,
                droppedOutOfBuffers: session.droppedOutOfBuffers,
                droppedDiscontinuity: session.droppedDiscontinuity,
                held: session.held.count,
                queued: session.outbound.count,
                holdTimes: session.holdTimes.summary,
                announcedSurfaces: Set(session.announced.keys)
            )
        }
    }

    /// Hold times over every subscriber.
    var holdTimeSummary: LatencySummary { holdTimes.summary }

    /// Frames held by subscribers now.
    package var heldFrameCount: Int {
        connections.values.reduce(0) { total, connection in
            if case .subscriber(let session) = connection { return total + session.held.count }
            return total
        }
    }

    /// Every connection the machine knows, for the IO layer's bookkeeping.
    var connectionIDs: [ConnectionID] { connections.keys.sorted() }
}

/// Admits at most one log line per key per interval, and says how many it suppressed (docs/PROTOCOL.md §8.1).
struct LogLimiter {
    private struct Window {
        var start: UInt64
        var suppressed: UInt64
    }
    private var windows: [String: Window] = [:]

    /// The line to write now, or nil to suppress it. Keys are a small fixed set (reasons), so this is bounded.
    mutating func admit(key: String, message: String, now: UInt64, interval: UInt64) -> String? {
        if var window = windows[key], now &- window.start < interval {
            window.suppressed.saturatingAdd(1)
            windows[key] = window
            return nil
        }
        let suppressed = windows[key]?.suppressed ?? 0
        windows[key] = Window(start: now, suppressed: 0)
        return suppressed > 0
            ? "\(message) (and \(suppressed) similar in the last \(interval / 1_000_000_000) s)" : message
    }
}

/// FourCC helpers for log text.
enum FourCC {
    /// `'420v'` for `0x34323076`; hex for codes that are not printable ASCII (peer values are untrusted).
    static func name(_ code: UInt32) -> String {
        let bytes = (0..<4).map { UInt8(truncatingIfNeeded: code >> (24 - 8 * $0)) }
        guard bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return "0x" + String(code, radix: 16) }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension UInt64 {
    /// Adds, stopping at `UInt64.max` instead of trapping.
    mutating func saturatingAdd(_ other: UInt64) { self = addingSaturating(other) }

    /// The sum, or `UInt64.max` if it overflows.
    func addingSaturating(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}

extension String {
    /// The text with control characters (C0, DEL, C1) and backslashes escaped, for printing text a peer sent.
    package var escapingControlCharacters: String {
        var escaped = ""
        escaped.reserveCapacity(utf8.count)
        for scalar in unicodeScalars {
            switch scalar.value {
            case 0x5C: escaped += "\\\\"
            case 0x0A: escaped += "\\n"
            case 0x0D: escaped += "\\r"
            case 0x09: escaped += "\\t"
            case 0..<0x20, 0x7F..<0xA0:
                escaped += "\\u{" + String(scalar.value, radix: 16) + "}"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }
}

extension PublisherStateMachine.Representation: Sendable where Resource: Sendable {}
extension PublisherStateMachine.Outbound: Sendable where Resource: Sendable {}
