// The state of a subscriber after its WELCOME: what it holds, what it was announced, what waits to be sent.

extension PublisherStateMachine {
    struct HeldFrame {
        var surfaceID: UInt64
        var resource: Resource
        var sentAt: UInt64
        /// The FRAME's `bytesUsed`, taken back out of `bytesDelivered` if the frame is released `notDelivered`.
        var bytesUsed: UInt64
    }

    struct PendingDrop {
        var range: ClosedRange<UInt64>
        var reason: WireDropReason
        var startedAt: UInt64
    }

    /// A subscriber after its WELCOME: the only per-connection state that allocates (its histogram, its maps).
    ///
    /// A class, so that updating it in place never copies its maps and histogram (an enum payload that is a struct
    /// would be copied on every write while the dictionary still holds the old value). Only this machine holds it.
    final class SubscriberSession {
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
        /// Its HELLO set `wantsStatus`: it gets STATUS and DROP reason `workFellBehind` (PROTOCOL.md §5.13, §5.8).
        let wantsStatus: Bool
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
        /// Frames shed for it because the work for its format fell behind (counted in its DROP reason's total too).
        var shed: UInt64 = 0
        /// The sequence of the last FRAME queued for it.
        var lastFrameSequence: UInt64?
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
            wantsStatus: Bool = false,
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
            self.wantsStatus = wantsStatus
            self.firstSequence = firstSequence
        }
    }
}
