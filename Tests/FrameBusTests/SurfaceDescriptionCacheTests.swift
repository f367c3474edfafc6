import PixelBuffers
import TestSupport
import Testing

@testable import FrameBus

/// The publisher's cache of surface descriptions (review finding m3): at its cap the least recently used description
/// makes room, one at a time, and is handed out to be closed after the state lock is released. It used to be emptied
/// at once, so the next frames' surfaces (possibly SURFACEs still queued for a subscriber) were all exported again.
@Suite struct SurfaceDescriptionCacheTests {
    @Test func atTheCapOnlyTheLeastRecentlyUsedDescriptionIsEvictedAndItIsHandedOutToCloseLater() throws {
        let publisher = try Publisher(
            configuration: .init(path: temporarySocketPath("description-cache"), formats: [.yuv420BiPlanarVideoRange8])
        )
        defer { publisher.stop() }
        let core = publisher.core
        let buffers = try (0..<6).map { _ in
            try PixelBuffer(width: 16, height: 16, pixelFormat: .yuv420BiPlanarVideoRange8)
        }
        let limit = 4
        func use(_ buffer: PixelBuffer) -> (evicted: UInt64?, count: Int) {
            let fresh = core.describeIfNew(buffer.surface)
            var evicted: PublisherCore.SurfaceDescription?
            let count = core.withState { state -> Int in
                _ = core.representation(of: buffer, bytesUsed: 0, fresh: fresh, limit: limit, evicted: &evicted, &state)
                return state.surfaceDescriptions.count
            }
            let evictedID = evicted.map { description in
                buffers.first { description.surface.surfaceID == $0.surface.id.rawValue }?.surface.id.rawValue ?? 0
            }
            return (evictedID, count)
        }
        // Fill the cache: buffers 0…3, then use 0 again, so 1 is the least recently used.
        for index in 0..<4 { #expect(use(buffers[index]) == (nil, index + 1)) }
        #expect(use(buffers[0]) == (nil, 4))
        let fifth = use(buffers[4])
        #expect(fifth.count == limit, "the cache keeps \(limit) descriptions, not 1")
        #expect(fifth.evicted == buffers[1].surface.id.rawValue, "the least recently used (surface 1) goes")
        let sixth = use(buffers[5])
        #expect(sixth.count == limit)
        #expect(sixth.evicted == buffers[2].surface.id.rawValue)
        let kept = core.withState { state in Set(state.surfaceDescriptions.keys) }
        #expect(kept == Set([0, 3, 4, 5].map { buffers[$0].surface.id.rawValue }))
    }
}
