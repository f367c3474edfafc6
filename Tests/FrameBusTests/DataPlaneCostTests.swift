import Foundation
import FrameBusTesting
import TestSupport
import Testing

@testable import FrameBus

/// What the per-frame shortcuts of the data plane must not change: a subscriber reuses the attachments it decoded for
/// the previous frame and the checks it worked out once per surface, and a publisher looks up a surface's
/// description once per frame; every frame must still carry its own attachments, bytes and sequence number.
@Suite(.timeLimit(.minutes(5))) struct DataPlaneCostTests {
    typealias Bus = SubscriberDelegateTests.Bus

    /// The colour primaries of frame `index`: runs of equal values (reused) and changes (decoded again), including
    /// a return to a value decoded earlier and frames with none.
    static func primaries(_ index: Int) -> ColorPrimaries? {
        let pattern: [ColorPrimaries?] = [.itu709, .itu709, .itu2020, .itu709, nil, nil, .p3D65, .itu709]
        return pattern[index % pattern.count]
    }

    @Test func everyFrameCarriesItsOwnAttachmentsWhenTheyRepeatAndChange() async throws {
        let bus = try Bus("dp-attachments", delivery: .queue(depth: 32))
        defer { bus.stop() }
        var frames = bus.subscriber.frames.makeAsyncIterator()
        #expect(await eventually { bus.publisher.subscriberCount == 1 })
        let count = 24
        var hashes: [UInt64] = []
        for index in 0..<count {
            let buffer = try bus.publisher.makePixelBuffer(from: bus.pool)
            hashes.append(try fillFrame(buffer, index: index))
            buffer.setAttachment(.colorPrimaries, Self.primaries(index).map { .string($0.rawValue) })
            try bus.publisher.publish(buffer)
            guard let sample = try await frames.next() else {
                Issue.record("the subscription ended at frame \(index)")
                return
            }
            let image = try #require(sample.imageBuffer)
            #expect(sample.busSequenceNumber == UInt64(index))
            #expect(sample.busBytesUsed == image.surface.layout.planes.reduce(0) { $0 + $1.byteCount })
            #expect(sample.busPublishTime != nil)
            #expect(image.attachments.colorPrimaries == Self.primaries(index), "frame \(index)")
            try image.lock(.readOnly)
            #expect(fnv1a(try image.packedBytes()) == hashes[index], "frame \(index)'s bytes")
            try image.unlock(.readOnly)
        }
        // The pool's surfaces were each described once and reused: fewer surfaces than frames, all delivered.
        #expect(bus.pool.allocatedBufferCount < count)
    }
}
