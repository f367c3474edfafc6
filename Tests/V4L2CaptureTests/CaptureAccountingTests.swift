import FrameBus
import Testing

@testable import V4L2Capture

/// The capture's bookkeeping as a state machine: buffer places, sequence gaps and their reasons, and which waiting
/// frames are given up when the device has no buffer.
@Suite(.timeLimit(.minutes(5))) struct CaptureAccountingTests {
    @Test func consecutiveSequencesLoseNothing() {
        var accounting = CaptureAccounting(bufferCount: 4)
        for (index, sequence) in [(0, 0), (1, 1), (2, 2)] {
            let result = accounting.dequeued(index: index, sequence: UInt32(sequence))
            #expect(result.lostBefore == 0)
            #expect(!result.isRestart)
            accounting.published(index: index)
        }
        #expect(accounting.queuedCount == 1)
        #expect(accounting.publishedCount == 3)
        #expect(accounting.lostUpstream == 0)
    }

    @Test func buffersMadeAfterTheFirstFrameJoinTheQueueOneByOneInIndexOrder() {
        var accounting = CaptureAccounting(bufferCount: 6, made: 4)
        #expect(accounting.bufferCount == 6)
        #expect(accounting.queuedCount == 4)
        #expect(accounting.lowestQueued == 4)
        #expect(accounting.nextUnmade == 4)
        _ = accounting.dequeued(index: 0, sequence: 0)
        accounting.published(index: 0)
        // An unmade slot is nobody's: a release for it is not a buffer coming back.
        let releasedUnmade = accounting.released(index: 5)
        #expect(!releasedUnmade)
        accounting.made(index: 4)
        #expect(accounting.nextUnmade == 5)
        accounting.made(index: 5)
        #expect(accounting.nextUnmade == nil)
        #expect(accounting.queuedCount == 5)
        #expect(accounting.publishedCount == 1)
        // Asking for more than the slots, or none, makes what there is and at least one.
        #expect(CaptureAccounting(bufferCount: 3, made: 8).queuedCount == 3)
        #expect(CaptureAccounting(bufferCount: 3, made: 0).queuedCount == 1)
    }

    @Test func aGapWhileBuffersWereQueuedIsAnUpstreamLoss() {
        var accounting = CaptureAccounting(bufferCount: 4)
        _ = accounting.dequeued(index: 0, sequence: 10)
        accounting.published(index: 0)
        let result = accounting.dequeued(index: 1, sequence: 14)
        #expect(result.lostBefore == 3)
        #expect(result.lostReason == .discontinuity)
        #expect(accounting.lostUpstream == 3)
        #expect(accounting.lostWhileStarved == 0)
    }

    @Test func aGapAfterTheDeviceRanDryIsOutOfBuffers() {
        var accounting = CaptureAccounting(bufferCount: 3)
        for index in 0..<3 {
            _ = accounting.dequeued(index: index, sequence: UInt32(index))
            accounting.published(index: index)
        }
        #expect(accounting.queuedCount == 0)
        #expect(accounting.starvations == 1)
        #expect(accounting.lowestQueued == 0)
        // Subscribers release two; the device fills one, having skipped two frames while it had none.
        let released1 = accounting.released(index: 1)
        #expect(released1)
        let released2 = accounting.released(index: 0)
        #expect(released2)
        let result = accounting.dequeued(index: 1, sequence: 5)
        #expect(result.lostBefore == 2)
        #expect(result.lostReason == .outOfBuffers)
        #expect(accounting.lostWhileStarved == 2)
        // The device kept a buffer since: the next gap is an upstream loss.
        accounting.published(index: 1)
        let later = accounting.dequeued(index: 0, sequence: 7)
        #expect(later.lostBefore == 1)
        #expect(later.lostReason == .discontinuity)
        #expect(accounting.lostUpstream == 1)
    }

    @Test func theSequenceWrapsAt32Bits() {
        var accounting = CaptureAccounting(bufferCount: 4)
        _ = accounting.dequeued(index: 0, sequence: .max - 1)
        accounting.published(index: 0)
        #expect(accounting.dequeued(index: 1, sequence: .max).lostBefore == 0)
        accounting.published(index: 1)
        #expect(accounting.dequeued(index: 2, sequence: 0).lostBefore == 0)
        accounting.published(index: 2)
        let result = accounting.dequeued(index: 3, sequence: 3)
        #expect(result.lostBefore == 2)
        #expect(!result.isRestart)
    }

    @Test func aSequenceGoingBackIsARestartNotAHugeLoss() {
        var accounting = CaptureAccounting(bufferCount: 4)
        _ = accounting.dequeued(index: 0, sequence: 1000)
        accounting.published(index: 0)
        let repeated = accounting.dequeued(index: 1, sequence: 1000)
        #expect(repeated.isRestart)
        #expect(repeated.lostBefore == 0)
        accounting.published(index: 1)
        let back = accounting.dequeued(index: 2, sequence: 0)
        #expect(back.isRestart)
        #expect(back.lostBefore == 0)
        #expect(accounting.restarts == 2)
        #expect(accounting.lostUpstream == 0)
    }

    @Test func withNoBufferQueuedEveryWaitingFrameButTheNewestIsDropped() {
        var accounting = CaptureAccounting(bufferCount: 4)
        // Subscribers hold one; the producer fell behind and finds three done at once.
        _ = accounting.dequeued(index: 0, sequence: 0)
        accounting.published(index: 0)
        #expect(accounting.waitingFramesToDrop() == 0)
        for index in 1..<4 { _ = accounting.dequeued(index: index, sequence: UInt32(index)) }
        #expect(accounting.queuedCount == 0)
        #expect(accounting.waitingFramesToDrop() == 2)
        accounting.droppedWaiting(index: 1)
        #expect(accounting.waitingFramesToDrop() == 0)  // the device has a buffer again: publish the rest
        accounting.published(index: 2)
        accounting.published(index: 3)
        #expect(accounting.droppedLate == 1)
        #expect(accounting.queuedCount == 1)
    }

    @Test func aSingleWaitingFrameIsNeverDropped() {
        var accounting = CaptureAccounting(bufferCount: 3)
        _ = accounting.dequeued(index: 0, sequence: 0)
        accounting.published(index: 0)
        _ = accounting.dequeued(index: 1, sequence: 1)
        accounting.published(index: 1)
        _ = accounting.dequeued(index: 2, sequence: 2)
        #expect(accounting.waitingFramesToDrop() == 0)
    }

    @Test func releasesReturnOnlyPublishedBuffers() {
        var accounting = CaptureAccounting(bufferCount: 3)
        let released4 = accounting.released(index: 0)
        #expect(!released4)  // queued: a stray release changes nothing
        let released5 = accounting.released(index: 7)
        #expect(!released5)  // out of range
        _ = accounting.dequeued(index: 0, sequence: 0)
        let released6 = accounting.released(index: 0)
        #expect(!released6)  // waiting, not published
        accounting.published(index: 0)
        let released7 = accounting.released(index: 0)
        #expect(released7)
        let released8 = accounting.released(index: 0)
        #expect(!released8)  // twice
        #expect(accounting.queuedCount == 3)
    }

    @Test func erroredFramesAreCountedAndRequeued() {
        var accounting = CaptureAccounting(bufferCount: 3)
        _ = accounting.dequeued(index: 2, sequence: 0)
        accounting.discardErrored(index: 2)
        #expect(accounting.errorFrames == 1)
        #expect(accounting.queuedCount == 3)
        // The errored frame used its sequence number: the next one is not a gap.
        #expect(accounting.dequeued(index: 0, sequence: 1).lostBefore == 0)
    }
}
