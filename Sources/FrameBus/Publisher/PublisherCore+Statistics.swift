import Foundation
import Logging
import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces
import Synchronization
import SystemPackage

// Counters and the publisher's snapshot of them.

extension PublisherCore {
    // MARK: Statistics and lifetime

    /// The work of ``Publisher``'s `statistics` (documented there).
    var statistics: PublisherStatistics {
        withState { state in
            let machine = state.machine
            var statistics = PublisherStatistics()
            statistics.published = Int(clamping: machine.published)
            for (reason, count) in machine.droppedAtSource {
                if let reason = DroppedFrameReason(rawValue: UInt8(reason.rawValue)) {
                    statistics.droppedAtSource[reason] = Int(clamping: count)
                }
            }
            statistics.conversions = Int(clamping: machine.conversions)
            var delivered = machine.departed.delivered
            var bytes = machine.departed.bytesDelivered
            var late = machine.departed.droppedLate
            var outOfBuffers = machine.departed.droppedOutOfBuffers
            var discontinuity = machine.departed.droppedDiscontinuity
            var total = FrameStatistics()
            for subscriber in machine.subscribers {
                var frames = FrameStatistics()
                frames.delivered = Int(clamping: subscriber.delivered)
                frames.bytesDelivered = Int(clamping: subscriber.bytesDelivered)
                frames.dropped = Self.dropped(
                    subscriber.droppedLate,
                    subscriber.droppedOutOfBuffers,
                    subscriber.droppedDiscontinuity
                )
                frames.heldNow = subscriber.held
                frames.queueDepth = subscriber.queued
                frames.latency = subscriber.holdTimes
                delivered.saturatingAdd(subscriber.delivered)
                bytes.saturatingAdd(subscriber.bytesDelivered)
                late.saturatingAdd(subscriber.droppedLate)
                outOfBuffers.saturatingAdd(subscriber.droppedOutOfBuffers)
                discontinuity.saturatingAdd(subscriber.droppedDiscontinuity)
                total.heldNow += subscriber.held
                total.queueDepth += subscriber.queued
                statistics.subscribers.append(
                    SubscriberRecord(
                        id: subscriber.id.rawValue,
                        processID: subscriber.credentials.processID,
                        userID: subscriber.credentials.userID,
                        format: try? PixelFormat(fourCC: subscriber.format),
                        queueDepth: subscriber.queueDepth,
                        isLatestOnly: subscriber.isLatestOnly,
                        maximumHeldFrames: subscriber.maximumHeldFrames,
                        statistics: frames
                    )
                )
            }
            total.delivered = Int(clamping: delivered)
            total.bytesDelivered = Int(clamping: bytes)
            total.dropped = Self.dropped(late, outOfBuffers, discontinuity)
            total.latency = machine.holdTimeSummary
            statistics.total = total
            return statistics
        }
    }

    static func dropped(
        _ late: UInt64,
        _ outOfBuffers: UInt64,
        _ discontinuity: UInt64
    )
        -> [DroppedFrameReason: Int]
    {
        var dropped: [DroppedFrameReason: Int] = [:]
        if late > 0 { dropped[.frameWasLate] = Int(clamping: late) }
        if outOfBuffers > 0 { dropped[.outOfBuffers] = Int(clamping: outOfBuffers) }
        if discontinuity > 0 { dropped[.discontinuity] = Int(clamping: discontinuity) }
        return dropped
    }

    /// The work of ``Publisher``'s `subscriberCount` (documented there).
    var subscriberCount: Int { withState { $0.machine.subscriberCount } }

    /// The work of ``Publisher``'s `pendingHandshakeCount` (documented there).
    var pendingHandshakeCount: Int { withState { $0.machine.pendingCount } }

    /// The work of ``Publisher``'s `heldFrameCount` (documented there).
    var heldFrameCount: Int { withState { $0.machine.heldFrameCount } }

    var isStopped: Bool { withState { $0.machine.isStopped } }
}
