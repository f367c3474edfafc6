/// MONITOR_REPORT (`0x0050`, version 2): what a monitor connection (`framebus top`) receives each second.
///
/// Counters are cumulative since the subscriber connected; a monitor derives rates from two reports and their
/// ``time``.
package struct WireMonitorReport: Hashable, Sendable {
    /// One subscriber's counters (96 bytes on the wire).
    public struct Record: Hashable, Sendable {
        public var subscriberID: UInt64
        public var processID: Int32
        public var userID: UInt32
        public var format: UInt32
        /// 0 = latest-only, 1 = queue.
        public var deliveryMode: UInt16
        public var queueDepth: UInt16
        public var delivered: UInt64
        public var bytesDelivered: UInt64
        public var droppedLate: UInt64
        public var droppedOutOfBuffers: UInt64
        public var droppedDiscontinuity: UInt64
        /// Frames it holds now.
        public var held: UInt32
        /// Messages waiting for room in its socket now.
        public var queued: UInt32
        /// How long it holds frames (send to RELEASE), nanoseconds.
        public var holdTimeP50: UInt64
        public var holdTimeP99: UInt64
        /// The protocol version it speaks.
        public var version: UInt16
        /// Of `droppedOutOfBuffers`, the frames whose surface it cannot take (DROP reason 5; record offset +92,
        /// saturating). Sent only to a monitor that set ``WireHello/knowsUnsupportedSurfaceFlag``; 0 otherwise.
        public var droppedUnsupportedSurface: UInt32 = 0

        public init(
            subscriberID: UInt64,
            processID: Int32,
            userID: UInt32,
            format: UInt32,
            deliveryMode: UInt16,
            queueDepth: UInt16,
            delivered: UInt64,
            bytesDelivered: UInt64,
            droppedLate: UInt64,
            droppedOutOfBuffers: UInt64,
            droppedDiscontinuity: UInt64,
            held: UInt32,
            queued: UInt32,
            holdTimeP50: UInt64,
            holdTimeP99: UInt64,
            version: UInt16,
            droppedUnsupportedSurface: UInt32 = 0
        ) {
            self.subscriberID = subscriberID
            self.processID = processID
            self.userID = userID
            self.format = format
            self.deliveryMode = deliveryMode
            self.queueDepth = queueDepth
            self.delivered = delivered
            self.bytesDelivered = bytesDelivered
            self.droppedLate = droppedLate
            self.droppedOutOfBuffers = droppedOutOfBuffers
            self.droppedDiscontinuity = droppedDiscontinuity
            self.held = held
            self.queued = queued
            self.holdTimeP50 = holdTimeP50
            self.holdTimeP99 = holdTimeP99
            self.version = version
            self.droppedUnsupportedSurface = droppedUnsupportedSurface
        }
    }

    /// The publisher's `CLOCK_MONOTONIC` in nanoseconds when it made the report.
    public var time: UInt64
    /// Sequence numbers used so far (frames published, dropped ones included).
    public var published: UInt64
    /// Frames dropped for every subscriber before fan-out.
    public var droppedAtSource: UInt64
    /// Subscribers connected now; may exceed `records.count` (at most 32 records are sent).
    public var subscriberCount: UInt16
    /// The first `min(subscriberCount, 32)` subscribers, by id.
    public var records: [Record]

    public init(time: UInt64, published: UInt64, droppedAtSource: UInt64, subscriberCount: UInt16, records: [Record]) {
        self.time = time
        self.published = published
        self.droppedAtSource = droppedAtSource
        self.subscriberCount = subscriberCount
        self.records = records
    }
}
