import SampleBuffers

/// The capture's bookkeeping, without IO: where each device buffer is, what the device's sequence numbers say was
/// lost, and which waiting frames to give up so the device is never left without a buffer.
///
/// Events in (a buffer dequeued, a buffer released by everyone), decisions out; the capture carries them out with
/// ioctls and publisher calls. Every device buffer is in exactly one place:
///
/// - **queued**: owned by the device (after `VIDIOC_QBUF`), to be filled;
/// - **waiting**: dequeued, not yet published (only within one turn of the capture loop);
/// - **published**: wrapped in a pixel buffer; back to *queued* when the last reference to it (the producer's and
///   every subscriber's, which the publisher keeps until each releases it) goes away;
/// - **unmade**: a slot the driver granted whose memory is not made yet (imported memory made after the first frame,
///   ``V4L2Capture/Configuration/buffersBeforeFirstFrame``); *queued* once made and queued.
///
/// Subscribers together hold at most the publisher's held-frame budget, the buffer count minus the producer's
/// reserve (2): the device keeps at least one buffer unless the producer itself lags behind. Then, with no buffer
/// queued, the oldest waiting frame is dropped (``DroppedFrameReason/frameWasLate``) and its buffer re-queued, so
/// the device is fed before a stale frame is published.
struct CaptureAccounting: Sendable {
    enum Place: Hashable, Sendable {
        case queued
        case waiting
        case published
        case unmade
    }

    /// What a dequeued buffer means for the stream.
    struct Dequeue: Hashable, Sendable {
        /// Frames the device's sequence skipped before this one (lost upstream: the device had no buffer, or its
        /// source lost them).
        var lostBefore: UInt64
        /// Why they were lost: ``DroppedFrameReason/outOfBuffers`` if the device ran out of queued buffers since the
        /// previous frame, else ``DroppedFrameReason/discontinuity``.
        var lostReason: DroppedFrameReason
        /// The sequence went backwards (the driver restarted counting): the next frame is a discontinuity.
        var isRestart: Bool
    }

    private(set) var places: [Place]
    /// The device sequence of the last dequeued buffer.
    private(set) var lastSequence: UInt32?
    /// The device had no buffer queued at some point since the last dequeue.
    private var starvedSinceLastDequeue = false

    // Counters (statistics).
    private(set) var dequeued: UInt64 = 0
    private(set) var lostUpstream: UInt64 = 0
    private(set) var lostWhileStarved: UInt64 = 0
    private(set) var errorFrames: UInt64 = 0
    private(set) var droppedLate: UInt64 = 0
    private(set) var skippedForPressure: UInt64 = 0
    private(set) var restarts: UInt64 = 0
    /// How often the device was left with no queued buffer.
    private(set) var starvations: UInt64 = 0
    /// The fewest buffers the device had queued after a dequeue.
    private(set) var lowestQueued: Int

    /// The first `made` buffers start queued (the capture queues them before `VIDIOC_STREAMON`), the others unmade.
    init(bufferCount: Int, made: Int? = nil) {
        precondition(bufferCount > 0)
        let made = min(bufferCount, max(1, made ?? bufferCount))
        places = Array(repeating: .queued, count: made) + Array(repeating: .unmade, count: bufferCount - made)
        lowestQueued = made
    }

    /// The first unmade buffer, if any.
    var nextUnmade: Int? { places.firstIndex(of: .unmade) }

    /// Buffer `index` was made and queued.
    mutating func made(index: Int) {
        precondition(places[index] == .unmade)
        places[index] = .queued
    }

    var bufferCount: Int { places.count }
    var queuedCount: Int { places.count { $0 == .queued } }
    var waitingCount: Int { places.count { $0 == .waiting } }
    var publishedCount: Int { places.count { $0 == .published } }

    /// The device handed buffer `index` back, filled, with device sequence `sequence`.
    ///
    /// - Precondition: `index` is queued (the kernel dequeues only what was queued).
    mutating func dequeued(index: Int, sequence: UInt32) -> Dequeue {
        precondition(places[index] == .queued, "buffer \(index) dequeued while \(places[index])")
        places[index] = .waiting
        dequeued &+= 1
        var result = Dequeue(lostBefore: 0, lostReason: .discontinuity, isRestart: false)
        if let last = lastSequence {
            let expected = last &+ 1
            let skipped = sequence &- expected
            if skipped >= 1 << 31 {
                // Behind the expected number (or equal to an old one): the counter restarted.
                result.isRestart = true
                restarts &+= 1
            } else if skipped > 0 {
                result.lostBefore = UInt64(skipped)
                if starvedSinceLastDequeue {
                    result.lostReason = .outOfBuffers
                    lostWhileStarved &+= UInt64(skipped)
                } else {
                    lostUpstream &+= UInt64(skipped)
                }
            }
        }
        lastSequence = sequence
        let queued = queuedCount
        lowestQueued = min(lowestQueued, queued)
        starvedSinceLastDequeue = queued == 0
        if queued == 0 { starvations &+= 1 }
        return result
    }

    /// A waiting buffer carried `V4L2_BUF_FLAG_ERROR`: it is reported dropped and re-queued at once.
    mutating func discardErrored(index: Int) {
        precondition(places[index] == .waiting)
        errorFrames &+= 1
        places[index] = .queued
    }

    /// How many of the oldest waiting frames to drop now: while the device has no buffer queued, every waiting
    /// frame but the newest.
    func waitingFramesToDrop() -> Int {
        queuedCount == 0 ? max(0, waitingCount - 1) : 0
    }

    /// A waiting frame is given up (re-queued unpublished) because the device had no buffer.
    mutating func droppedWaiting(index: Int) {
        precondition(places[index] == .waiting)
        droppedLate &+= 1
        places[index] = .queued
    }

    /// A waiting frame is not published because the frame rate is lowered for system pressure: back to the device.
    mutating func skippedForPressure(index: Int) {
        precondition(places[index] == .waiting)
        skippedForPressure &+= 1
        places[index] = .queued
    }

    /// A waiting frame went to the publisher.
    mutating func published(index: Int) {
        precondition(places[index] == .waiting)
        places[index] = .published
    }

    /// A waiting frame could not be published (the publisher stopped): back to the device.
    mutating func unpublished(index: Int) {
        precondition(places[index] == .waiting)
        places[index] = .queued
    }

    /// The last reference to a published buffer went away: it goes back to the device.
    ///
    /// - Returns: whether the buffer was published (a release of anything else is ignored).
    mutating func released(index: Int) -> Bool {
        guard places.indices.contains(index), places[index] == .published else { return false }
        places[index] = .queued
        return true
    }
}
