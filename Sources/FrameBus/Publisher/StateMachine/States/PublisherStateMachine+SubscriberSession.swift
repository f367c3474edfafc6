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
        /// The reason on the wire: `reason`'s, or 5 (`unsupportedSurface`) for a subscriber that understands it.
        var wireReason: UInt32
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
        /// It set `knowsUnsupportedSurface`: drops of surfaces it cannot take go out as DROP reason 5.
        let knowsUnsupportedSurface: Bool
        /// The first frame it may receive: the next one when it was welcomed, or, for a deferred subscriber, the
        /// first after its deferred start (``PublisherStateMachine/awaitingDeferredStart`` until then).
        var firstSequence: UInt64
        /// Its HELLO said `deferred` (docs/PROTOCOL.md §5.1.1).
        let isDeferred: Bool
        /// When it was welcomed (a deferred subscriber's wait counts from then).
        let welcomedAt: UInt64
        /// A frame of the stream reached it, as a FRAME or as a DROP.
        var hasHadFrame = false
        /// It is deferred and its deferred start has not run yet: nothing is made or sent for it.
        var isAwaitingDeferredStart: Bool { firstSequence == PublisherStateMachine.awaitingDeferredStart }
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
        /// Of `droppedOutOfBuffers`, the frames whose surface it cannot take (a DMA-BUF without `acceptsDMABuf`, a
        /// surface version 1 cannot describe).
        var droppedUnsupportedSurface: UInt64 = 0
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
            knowsUnsupportedSurface: Bool = false,
            wantsStatus: Bool = false,
            firstSequence: UInt64,
            isDeferred: Bool = false,
            welcomedAt: UInt64 = 0
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
            self.knowsUnsupportedSurface = knowsUnsupportedSurface
            self.wantsStatus = wantsStatus
            self.firstSequence = isDeferred ? PublisherStateMachine.awaitingDeferredStart : firstSequence
            self.isDeferred = isDeferred
            self.welcomedAt = welcomedAt
        }
    }
}
