import PixelBuffers
import SampleBuffers

/// A monitor connection to a running publisher: what `framebus top` shows (docs/PROTOCOL.md §4.4).
///
/// It connects, checks that the publisher runs as an allowed user (`SO_PEERCRED`; default: our own uid), says
/// HELLO as a monitor, and then reads one report per `monitorInterval` (a second by default). A monitor receives
/// no frames and holds nothing.
///
/// ```swift
/// let monitor = try PublisherMonitor(path: path)
/// while let report = try monitor.nextReport() {
///     for subscriber in report.subscribers { print(subscriber.id, subscriber.delivered) }
/// }
/// ```
public final class PublisherMonitor {
    /// One subscriber in a ``Report``. Counters are cumulative since it connected.
    public struct SubscriberReport: Hashable, Sendable {
        /// The publisher's number for the subscriber.
        public var id: UInt64
        /// Its process and user ids (`SO_PEERCRED`, as the publisher saw them).
        public var processID: Int32
        public var userID: UInt32
        /// Its format's FourCC.
        public var format: UInt32
        /// Whether it asked for latest-only delivery, and its granted queue depth.
        public var isLatestOnly: Bool
        public var queueDepth: Int
        /// Frames delivered to it (not counting those it released undelivered) and their bytes.
        public var delivered: UInt64
        public var bytesDelivered: UInt64
        /// Frames it lost, by reason.
        public var dropped: [DroppedFrameReason: UInt64]
        /// Frames it holds now, and messages waiting for room in its socket.
        public var held: Int
        public var queued: Int
        /// How long it holds frames (send to release), nanoseconds.
        public var holdTimeP50: UInt64
        public var holdTimeP99: UInt64
        /// The protocol version it speaks.
        public var version: Int
        /// Of its `outOfBuffers` drops, the frames whose surface it cannot take (a DMA-BUF surface when it does not
        /// import DMA-BUFs, docs/PROTOCOL.md §5.8); 0 from a publisher that does not report it.
        public var droppedUnsupportedSurface: UInt64 = 0

        /// The format's name, or its hex code when the publisher sent something unprintable.
        public var formatName: String { FourCC.name(format) }
    }

    /// A snapshot of the publisher.
    public struct Report: Hashable, Sendable {
        /// The publisher's `CLOCK_MONOTONIC` time of the report, nanoseconds.
        public var time: UInt64
        /// Sequence numbers used so far.
        public var published: UInt64
        /// Frames dropped for everyone before fan-out.
        public var droppedAtSource: UInt64
        /// Subscribers connected (may exceed `subscribers.count`: at most 32 are described).
        public var subscriberCount: Int
        public var subscribers: [SubscriberReport]
        /// The publisher's status with this report (nil from a publisher that does not send STATUS).
        public var status: Status?
    }

    /// The publisher's system pressure, cost and frame duration (docs/PROTOCOL.md §5.13).
    public struct Status: Hashable, Sendable {
        /// The system pressure the publisher measures.
        public var systemPressure: SystemPressureState
        /// Its work per frame against the frame interval (``PublisherCost/value``); nil before it measured one.
        public var cost: Double?
        /// The duration of the frames it publishes now; invalid when it does not say.
        public var frameDuration: MediaTime
        /// Frames shed for every subscriber since it started (``PublisherCost/framesShed``).
        public var framesShed: UInt64
    }

    /// The publisher's stream id (from WELCOME).
    public let streamID: UInt64
    /// The publisher's process id (`SO_PEERCRED` of the monitor's connection, read before anything was trusted).
    public let publisherProcessID: Int32
    /// The publisher's own format (its first offered one), from its WELCOME; nil from a publisher that does not say
    /// it (an older one) or names no format this library knows.
    public let publisherFormat: PixelFormat?
    private let socket: Socket
    /// Whether the publisher follows each report with a STATUS (nil until the first report tells).
    private var expectsStatus: Bool?
    /// A message read while looking for a STATUS that was something else: the next one to handle.
    private var stashed: WireMessage?

    /// Connects to the publisher at `path` as a monitor.
    ///
    /// - Parameters:
    ///   - path: the publisher's socket.
    ///   - allowedUserIDs: users the publisher may run as; default: our own.
    ///   - timeout: how long to wait for the connection and the WELCOME.
    /// - Throws: ``FrameBusError/Code-swift.struct/permissionDenied`` (publisher's uid not allowed, or the
    ///   publisher refused our uid), ``FrameBusError/Code-swift.struct/refused`` (its ERROR, reason escaped),
    ///   ``FrameBusError/Code-swift.struct/protocolViolation``, ``FrameBusError/Code-swift.struct/timedOut``,
    ///   ``FrameBusError/Code-swift.struct/systemCall``.
    public init(
        path: String,
        allowedUserIDs: Set<UInt32>? = nil,
        timeout: Duration = .seconds(5)
    ) throws(FrameBusError) {
        let operation = "PublisherMonitor.connect"
        let socket = try Socket.connect(path: path, timeoutNanoseconds: timeout.nanoseconds).get()
        let credentials = try socket.peerCredentials().mapError { FrameBusError.systemCall("SO_PEERCRED", $0) }.get()
        guard (allowedUserIDs ?? [ProcessInfoShim.userID]).contains(credentials.uid) else {
            throw FrameBusError(
                .permissionDenied,
                operation,
                message: "the publisher at \(path) runs as uid \(credentials.uid), which is not allowed"
            )
        }
        var hello = WireHello.knowingMonitor
        hello.flags |= WireHello.wantsStatusFlag
        _ = socket.send(WireMessage.hello(hello).encoded())
        switch try Self.receive(on: socket, timeout: timeout, operation) {
        case .welcome(let welcome) where welcome.kind == .monitor:
            self.streamID = welcome.streamID
            self.publisherProcessID = credentials.pid
            self.publisherFormat = welcome.format == 0 ? nil : try? PixelFormat(fourCC: welcome.format)
            self.socket = socket
        case .error(let error):
            throw FrameBusError(
                error.code == WireErrorCode.notPermitted.rawValue ? .permissionDenied : .refused,
                operation,
                message: "publisher error \(error.code): \(error.reason.escapingControlCharacters)"
            )
        case let message:
            throw FrameBusError(
                .protocolViolation,
                operation,
                message: "expected a monitor WELCOME, got \(message.type.name)"
            )
        }
    }

    deinit {
        _ = socket.send(WireMessage.goodbye(reason: 0).encoded())
        socket.shutdown()
    }

    /// Waits for the next report; nil when the publisher stopped.
    ///
    /// - Throws: ``FrameBusError/Code-swift.struct/timedOut`` when none arrives within `timeout`,
    ///   ``FrameBusError/Code-swift.struct/protocolViolation`` for anything but a report.
    public func nextReport(timeout: Duration = .seconds(5)) throws(FrameBusError) -> Report? {
        var message: WireMessage
        do {
            if let pending = stashed {
                stashed = nil
                message = pending
            } else {
                message = try Self.receive(on: socket, timeout: timeout, "PublisherMonitor.nextReport")
            }
            // A STATUS that came late (after the short wait for it) belongs to the report before: skip it.
            while case .status = message {
                expectsStatus = true
                message = try Self.receive(on: socket, timeout: timeout, "PublisherMonitor.nextReport")
            }
        } catch  where error.code == .endOfStream {
            return nil
        }
        switch message {
        case .monitorReport(let report):
            // A publisher that knows STATUS sends one right after each report (we asked in HELLO); an older one
            // sends none, and its next message is the next report, a second later: wait for the STATUS only when
            // this publisher sent one before, or for the first report a short while.
            var status: Status?
            if expectsStatus != false {
                let wait: Duration = expectsStatus == true ? timeout : .milliseconds(200)
                let next = try? Self.receive(on: socket, timeout: wait, "PublisherMonitor.nextReport")
                if case .status(let wire) = next {
                    status = Self.status(wire)
                    expectsStatus = true
                } else {
                    // Something else (the end of the stream, the next report): handled by the next call.
                    stashed = next
                    if expectsStatus == nil { expectsStatus = false }
                }
            }
            return Report(
                time: report.time,
                published: report.published,
                droppedAtSource: report.droppedAtSource,
                subscriberCount: Int(report.subscriberCount),
                subscribers: report.records.map { record in
                    var dropped: [DroppedFrameReason: UInt64] = [:]
                    if record.droppedLate > 0 { dropped[.frameWasLate] = record.droppedLate }
                    if record.droppedOutOfBuffers > 0 { dropped[.outOfBuffers] = record.droppedOutOfBuffers }
                    if record.droppedDiscontinuity > 0 { dropped[.discontinuity] = record.droppedDiscontinuity }
                    return SubscriberReport(
                        id: record.subscriberID,
                        processID: record.processID,
                        userID: record.userID,
                        format: record.format,
                        isLatestOnly: record.deliveryMode == 0,
                        queueDepth: Int(record.queueDepth),
                        delivered: record.delivered,
                        bytesDelivered: record.bytesDelivered,
                        dropped: dropped,
                        held: Int(record.held),
                        queued: Int(record.queued),
                        holdTimeP50: record.holdTimeP50,
                        holdTimeP99: record.holdTimeP99,
                        version: Int(record.version),
                        droppedUnsupportedSurface: UInt64(record.droppedUnsupportedSurface)
                    )
                },
                status: status
            )
        case .endOfStream:
            return nil
        case .error(let error):
            throw FrameBusError(
                .refused,
                "PublisherMonitor.nextReport",
                message: "publisher error \(error.code): \(error.reason.escapingControlCharacters)"
            )
        default:
            throw FrameBusError(
                .protocolViolation,
                "PublisherMonitor.nextReport",
                message: "unexpected \(message.type.name)"
            )
        }
    }

    static func status(_ wire: WireStatus) -> Status {
        let status = PublisherStatus(wire)
        return Status(
            systemPressure: status.systemPressure,
            cost: status.cost,
            frameDuration: status.frameDuration,
            framesShed: status.framesShed
        )
    }

    private static func receive(
        on socket: Socket,
        timeout: Duration,
        _ operation: String
    ) throws(FrameBusError) -> WireMessage {
        let deadline = ProcessInfoShim.monotonicNanoseconds().addingSaturating(timeout.nanoseconds)
        while true {
            let now = ProcessInfoShim.monotonicNanoseconds()
            guard now < deadline else { throw FrameBusError(.timedOut, operation) }
            _ = socket.waitReadable(timeoutMilliseconds: Int32(min(1000, (deadline - now) / 1_000_000 + 1)))
            switch socket.receive(maximumSize: WireProtocol.maximumMessageSize) {
            case .success(.wouldBlock):
                continue
            case .success(.endOfFile):
                throw FrameBusError(.endOfStream, operation, message: "the publisher closed the connection")
            case .failure(let errno):
                throw FrameBusError(.systemCall, operation, errno: errno)
            case .success(.datagram(let datagram)):
                guard !datagram.isTruncated else {
                    throw FrameBusError(.protocolViolation, operation, message: "truncated datagram")
                }
                do {
                    return try WireMessage.decode(datagram.bytes, descriptorCount: datagram.descriptors.count)
                } catch {
                    throw error.busError(operation)
                }
            }
        }
    }
}
