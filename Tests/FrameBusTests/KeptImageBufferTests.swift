import Foundation
import Testing
import TestSupport

@testable import FrameBus

/// Item 3: keeping only a frame's image buffer (the usual CVPixelBuffer pattern, e.g. to batch frames for a model)
/// keeps the frame held, so the publisher cannot recycle its surface under it.
@Suite(.timeLimit(.minutes(5))) struct KeptImageBufferTests {
    @Test func aKeptImageBufferKeepsItsFramesBytes() async throws {
        let path = temporaryBusPath("kept")
        let publisher = try await startPeer(["solid-publisher", path, "--frames", "40", "--buffers", "4"])
        try #require(await eventually { publisher.output.contains("listening") }, "\(publisher.output)")
        let subscriber = try Subscriber(
            configuration: .init(path: path, acceptedFormats: [.yuv420BiPlanarVideoRange8], delivery: .queue(depth: 2))
        )
        defer { subscriber.cancel() }
        var kept: PixelBuffer?
        var keptSequence: UInt64?
        var later = 0
        do {
            for try await frame in subscriber.frames {
                if kept == nil {
                    kept = frame.imageBuffer  // the sample buffer itself goes away at the end of this iteration
                    keptSequence = frame.busSequenceNumber
                } else {
                    later += 1
                }
            }
        } catch {
            #expect(error.code == .endOfStream, "\(error)")
        }
        // The publisher published all its frames from a pool of four while we held one: the pool cycled around it
        // (frames after the first reached us or were dropped for us, depending on our share of the pool).
        #expect(publisher.output.contains("published 40"), "\(publisher.output)")
        _ = later
        let expected = UInt8(truncatingIfNeeded: 0x11 &* (Int(try #require(keptSequence)) + 1))
        do {
            let image = try #require(kept)
            try image.lock(.readOnly)
            defer { try? image.unlock(.readOnly) }
            for plane in 0..<image.planeCount {
                let bytes = try image.withUnsafeBytes(ofPlane: plane) { Array($0) }
                #expect(bytes.allSatisfy { $0 == expected }, "plane \(plane) was overwritten: \(Set(bytes))")
            }
            // While we hold it, it counts as held.
            #expect(subscriber.statistics.heldNow == 1)
        }
        kept = nil  // the last reference: the frame is released
        #expect(subscriber.statistics.heldNow == 0)
    }

    @Test func thePublisherSeesAKeptImageBufferHeldUntilItGoesAway() async throws {
        let path = temporaryBusPath("kept-live")
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        defer { publisher.stop() }
        let subscriber = try Subscriber(
            configuration: .init(path: path, acceptedFormats: [.yuv420BiPlanarVideoRange8], delivery: .queue(depth: 2))
        )
        defer { subscriber.cancel() }
        #expect(await eventually { publisher.subscriberCount == 1 })
        let pool = try PixelBufferPool(
            attributes: .init(width: 64, height: 48, pixelFormat: .yuv420BiPlanarVideoRange8, allocationThreshold: 8)
        )
        try publisher.publish(try publisher.makePixelBuffer(from: pool))
        var kept: PixelBuffer?
        do {
            var frames = subscriber.frames.makeAsyncIterator()
            let frame = try #require(try await frames.next())
            kept = frame.imageBuffer
            #expect(frame.invalidate())  // invalidating the sample buffer does not release a kept image buffer
        }  // the sample buffer goes away here
        // The subscriber sends a RELEASE in the same call that stops counting the frame as held (ReleaseToken.release),
        // so its count is the deterministic check that nothing was released; the publisher still counts it.
        #expect(subscriber.statistics.heldNow == 1)
        #expect(publisher.heldFrameCount == 1)
        _ = kept
        kept = nil
        #expect(subscriber.statistics.heldNow == 0)
        #expect(await eventually { publisher.heldFrameCount == 0 })
    }
}
