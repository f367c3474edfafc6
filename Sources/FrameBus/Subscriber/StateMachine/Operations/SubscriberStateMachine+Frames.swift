import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces

// FRAME and DROP: order, bounds and discontinuities of what the consumer is handed.

extension SubscriberStateMachine {
    mutating func accept(_ frame: WireFrame, _ active: inout Active) -> Action {
        guard let surface = active.surfaces[frame.surfaceID] else {
            return fail(.malformedMessage, "FRAME \(frame.sequence) on unknown surface \(frame.surfaceID)")
        }
        if let last = active.lastSequence, frame.sequence <= last {
            return fail(.malformedMessage, "FRAME sequence \(frame.sequence) after \(last)")
        }
        guard frame.bytesUsed <= surface.byteCount else {
            return fail(.malformedMessage, "FRAME bytesUsed \(frame.bytesUsed) > \(surface.byteCount)")
        }
        var discontinuity = active.pendingDiscontinuity
        if let last = active.lastGeometry,
            last.pixelFormat != surface.pixelFormat || last.width != surface.width || last.height != surface.height
        {
            discontinuity.insert(.formatChange)
        }
        if frame.flags & WireFrame.discontinuityFlag != 0 && discontinuity.isEmpty { discontinuity.insert(.unknown) }
        active.pendingDiscontinuity = []
        active.lastSequence = frame.sequence
        active.lastGeometry = surface
        return .deliverFrame(frame, discontinuity: discontinuity)
    }

    mutating func report(_ drop: WireDrop, _ active: inout Active) -> Action {
        let reason: DroppedFrameReason
        switch WireDropReason(rawValue: drop.reason) {
        case .frameWasLate: reason = .frameWasLate
        case .outOfBuffers: reason = .outOfBuffers
        case .discontinuity: reason = .discontinuity
        case .workFellBehind where receivesStatus: reason = .workFellBehind
        case nil where drop.reason == WireDropReason.unsupportedSurfaceRawValue:
            // §5.8: an `outOfBuffers` drop whose cause is the frame's surface; the IO layer says why, once.
            reason = .outOfBuffers
            unsupportedSurfaceNoticePending = true
        case .workFellBehind, nil: return fail(.malformedMessage, "DROP reason \(drop.reason)")
        }
        guard drop.firstSequence <= drop.lastSequence else {
            return fail(.malformedMessage, "DROP range \(drop.firstSequence) > \(drop.lastSequence)")
        }
        if reason == .discontinuity { active.pendingDiscontinuity.insert(.samplesDropped) }
        return .reportDrop(SubscriberDrop(reason: reason, sequences: drop.firstSequence...drop.lastSequence))
    }
}
