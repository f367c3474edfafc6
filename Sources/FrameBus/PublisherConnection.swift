import PixelBuffers
import SampleBuffers
import SystemPackage

/// One subscriber as the publisher sees it.
///
/// `@unchecked Sendable`: every mutable field is read and written only while the owning ``Publisher``'s state
/// mutex is held; `socket` and `id` are immutable.
final class PublisherConnection: @unchecked Sendable {
    enum Phase { case awaitingHello, active }

    /// A frame the subscriber holds: the buffer stays referenced (so out of its pool) until it is released.
    struct HeldFrame {
        let surfaceID: UInt64
        let buffer: PixelBuffer
        let sentAt: UInt64
    }

    /// A datagram waiting for room in the socket buffer, with the descriptor it carries.
    struct Outbound {
        let bytes: [UInt8]
        let descriptor: OwnedDescriptor?
    }

    let id: UInt64
    let socket: Socket
    let peerProcessID: Int32
    let peerUserID: UInt32
    let connectedAt: UInt64

    var phase = Phase.awaitingHello
    var format: PixelFormat?
    var deliveryMode: UInt16 = 0
    var queueDepth: UInt16 = 1
    var maximumHeldFrames = 1
    /// Frames with a smaller sequence were published before this subscriber was welcomed.
    var firstSequence: UInt64 = 0
    var announced: Set<UInt64> = []
    /// Announced surface ids, oldest first, for retiring.
    var announcedOrder: [UInt64] = []
    var held: [UInt64: HeldFrame] = [:]
    var outbound: [Outbound] = []
    var lastAttachments: WireAttachmentCodes?
    var version: UInt16 = 1
    var statistics = FrameStatistics()
    var holdTimes = LatencyRecorder()

    init(id: UInt64, socket: Socket, peerProcessID: Int32, peerUserID: UInt32, now: UInt64) {
        self.id = id
        self.socket = socket
        self.peerProcessID = peerProcessID
        self.peerUserID = peerUserID
        self.connectedAt = now
    }

    func enqueue(_ message: WireMessage, descriptor: OwnedDescriptor? = nil) {
        outbound.append(Outbound(bytes: message.encoded(), descriptor: descriptor))
    }

    /// Sends queued datagrams until the socket buffer is full. Returns the errno if the connection broke.
    func flush() -> Errno? {
        var sent = 0
        defer { if sent > 0 { outbound.removeFirst(sent) } }
        while sent < outbound.count {
            let item = outbound[sent]
            let descriptors = item.descriptor.map { [$0.rawValue] } ?? []
            switch socket.send(item.bytes, descriptors: descriptors) {
            case .success(.sent): sent += 1
            case .success(.wouldBlock): return nil
            case .failure(let errno): return errno
            }
        }
        return nil
    }

    var snapshot: SubscriberRecord {
        var statistics = statistics
        statistics.heldNow = held.count
        statistics.queueDepth = outbound.count
        statistics.latency = holdTimes.summary
        return SubscriberRecord(
            id: id,
            processID: peerProcessID,
            userID: peerUserID,
            format: format,
            queueDepth: Int(queueDepth),
            isLatestOnly: deliveryMode == 0,
            statistics: statistics
        )
    }
}

/// One subscriber in ``PublisherStatistics``.
public struct SubscriberRecord: Hashable, Sendable {
    /// The publisher's number for this connection.
    public var id: UInt64
    /// The subscriber's process id (`SO_PEERCRED`).
    public var processID: Int32
    /// The subscriber's user id (`SO_PEERCRED`).
    public var userID: UInt32
    /// The format it receives (nil before its handshake).
    public var format: PixelFormat?
    /// Its queue depth (1 for latest-only).
    public var queueDepth: Int
    /// Whether it asked for latest-only delivery.
    public var isLatestOnly: Bool
    /// Its frames: delivered, dropped by reason, held now, bytes; `latency` is how long it holds frames.
    public var statistics: FrameStatistics
}

/// A publisher's counters.
public struct PublisherStatistics: Hashable, Sendable {
    /// Frames published (sequence numbers used), including dropped ones.
    public var published: Int = 0
    /// Frames dropped before fan-out, for every subscriber (pool exhaustion, upstream loss).
    public var droppedAtSource: [DroppedFrameReason: Int] = [:]
    /// Totals over every subscriber, past and present.
    public var total = FrameStatistics()
    /// The subscribers connected now.
    public var subscribers: [SubscriberRecord] = []
    /// Frames encoded or decoded for fan-out (each representation once per frame).
    public var conversions: Int = 0
}
