import PixelBuffers
import Surfaces
import Synchronization
import Testing
import TestSupport

/// Counts calls from any thread.
private final class Counter: Sendable {
    private let value = Mutex<[SurfaceID]>([])
    func record(_ id: SurfaceID = SurfaceID(rawValue: 0)) { value.withLock { $0.append(id) } }
    var count: Int { value.withLock { $0.count } }
    var ids: [SurfaceID] { value.withLock { $0 } }
}

/// Stands in for a sample buffer: something that holds a pixel buffer and can be dropped on its own.
private final class Holder {
    let imageBuffer: PixelBuffer
    init(_ imageBuffer: PixelBuffer) { self.imageBuffer = imageBuffer }
}

@Suite(.timeLimit(.minutes(5))) struct PixelBufferReleaseHandlerTests {
    private func importedSurface() throws -> (source: PixelBuffer, imported: Surface) {
        let source = try PixelBuffer(width: 32, height: 16, pixelFormat: .yuv420BiPlanarVideoRange8)
        return (source, try Surface.importing(try source.surface.makeHandle()))
    }

    /// Issue 7, item 3: whoever keeps the pixel buffer keeps the frame; the handler runs once, at the last release.
    @Test func releaseHandlerRunsOnceWhenTheLastReferenceGoes() throws {
        let (_, surface) = try importedSurface()
        let released = Counter()
        var buffer: PixelBuffer? = try PixelBuffer(surface: surface, releaseHandler: { released.record() })
        var holder: Holder? = Holder(buffer!)
        buffer = nil
        #expect(released.count == 0)  // the holder still references it
        let kept = holder!.imageBuffer  // keep `imageBuffer`, drop the "sample buffer"
        holder = nil
        #expect(released.count == 0)
        #expect(kept.surface.isReadOnly)
        _ = consume kept
        #expect(released.count == 1)
    }

    @Test func releaseHandlerIsNotCalledWhenTheInitializerThrows() throws {
        let layout = SurfaceLayout(pixelFormat: 0x7878_7878, width: 8, height: 8, planes: [], allocationSize: 4096)
        let surface = try Surface.makeMemFD(layout: layout)
        let released = Counter()
        #expect(throws: PixelBufferError.self) {
            _ = try PixelBuffer(surface: surface, releaseHandler: { released.record() })
        }
        #expect(released.count == 0)
    }
}

@Suite(.timeLimit(.minutes(5))) struct PixelBufferPoolWaitingTests {
    private func attributes(minimum: Int = 0, threshold: Int?, age: Duration? = nil) -> PixelBufferPool.Attributes {
        PixelBufferPool.Attributes(
            width: 64,
            height: 32,
            pixelFormat: .yuv420BiPlanarVideoRange8,
            minimumBufferCount: minimum,
            maximumBufferAge: age,
            allocationThreshold: threshold
        )
    }

    @Test func nextPixelBufferReturnsAtOnceWhenABufferCanBeVended() async throws {
        let pool = try PixelBufferPool(attributes: attributes(threshold: 2))
        let first = try await pool.nextPixelBuffer()
        let second = try await pool.nextPixelBuffer()
        #expect(first.surface.id != second.surface.id && pool.allocatedBufferCount == 2)
    }

    /// Issue 7, item 10: a producer waits for the next free buffer instead of failing.
    @Test
    func aWaiterWakesWhenAnotherBufferIsReleased() async throws {
        let pool = try PixelBufferPool(attributes: attributes(threshold: 1))
        var held: PixelBuffer? = try pool.makePixelBuffer()
        let heldID = held!.surface.id
        let waiter = Task { try await pool.nextPixelBuffer().surface.id }
        #expect(await eventually { pool.waiterCount == 1 })
        held = nil
        #expect(try await waiter.value == heldID)
        #expect(pool.waiterCount == 0 && pool.allocatedBufferCount == 1)
    }

    @Test
    func waitersAreServedInOrder() async throws {
        let pool = try PixelBufferPool(attributes: attributes(threshold: 1))
        var held: PixelBuffer? = try pool.makePixelBuffer()
        #expect(held != nil)
        let order = Counter()
        // The first waiter's buffer is kept here, not in the task's result (which a Task holds on to).
        let firstBuffer = Mutex<PixelBuffer?>(nil)
        let first = Task {
            let buffer = try await pool.nextPixelBuffer()
            order.record(SurfaceID(rawValue: 1))
            let id = buffer.surface.id
            firstBuffer.withLock { $0 = buffer }
            return id
        }
        #expect(await eventually { pool.waiterCount == 1 })
        let second = Task {
            let buffer = try await pool.nextPixelBuffer()
            order.record(SurfaceID(rawValue: 2))
            return buffer.surface.id
        }
        #expect(await eventually { pool.waiterCount == 2 })
        held = nil
        let id = try await first.value
        #expect(order.ids == [SurfaceID(rawValue: 1)])
        #expect(pool.waiterCount == 1)  // the second still waits: the one buffer is the first's
        firstBuffer.withLock { $0 = nil }
        #expect(try await second.value == id)
        #expect(order.ids == [SurfaceID(rawValue: 1), SurfaceID(rawValue: 2)])
    }

    @Test
    func cancellationEndsAWaitWithATypedError() async throws {
        let pool = try PixelBufferPool(attributes: attributes(threshold: 1))
        let held = try pool.makePixelBuffer()
        let waiter = Task { () async throws(PixelBufferError) -> PixelBuffer in try await pool.nextPixelBuffer() }
        #expect(await eventually { pool.waiterCount == 1 })
        waiter.cancel()
        let result = await waiter.result
        #expect(
            throws: PixelBufferError(code: .cancelled, operation: "PixelBufferPool.nextPixelBuffer: task cancelled")
        ) {
            try result.get()
        }
        #expect(pool.waiterCount == 0)
        // The pool is unharmed: the held buffer still comes back and is vended again.
        let heldID = held.surface.id
        _ = consume held
        #expect(try await pool.nextPixelBuffer().surface.id == heldID)
    }

    @Test func anAlreadyCancelledTaskDoesNotWait() async throws {
        let pool = try PixelBufferPool(attributes: attributes(threshold: 1))
        let held = try pool.makePixelBuffer()
        let waiter = Task { () async throws(PixelBufferError) -> PixelBuffer in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await pool.nextPixelBuffer()
        }
        await #expect(throws: PixelBufferError.self) { try await waiter.value }
        #expect(pool.waiterCount == 0)
        _ = held
    }
}

@Suite(.timeLimit(.minutes(5))) struct PixelBufferPoolSurfaceFreedTests {
    private func attributes(minimum: Int = 0, age: Duration? = nil) -> PixelBufferPool.Attributes {
        PixelBufferPool.Attributes(
            width: 64,
            height: 32,
            pixelFormat: .yuv420BiPlanarVideoRange8,
            minimumBufferCount: minimum,
            maximumBufferAge: age
        )
    }

    /// Issue 7, item 9: the publisher learns of every surface the pool frees, to retire it in subscribers.
    @Test func flushReportsEveryFreedSurface() throws {
        let pool = try PixelBufferPool(attributes: attributes(minimum: 1))
        let freed = Counter()
        pool.setSurfaceFreedHandler { freed.record($0) }
        var buffers = try (0..<3).map { _ in try pool.makePixelBuffer() }
        let ids = Set(buffers.map(\.surface.id))
        buffers.removeAll()
        pool.flush()  // keeps the minimum of 1
        #expect(freed.count == 2)
        pool.flush(all: true)
        #expect(freed.count == 3 && Set(freed.ids) == ids)
    }

    @Test func agedOutSurfacesAreReported() async throws {
        let pool = try PixelBufferPool(attributes: attributes(age: .milliseconds(1)))
        let freed = Counter()
        pool.setSurfaceFreedHandler { freed.record($0) }
        var buffers = try (0..<2).map { _ in try pool.makePixelBuffer() }
        let older = buffers[0].surface.id
        buffers.remove(at: 0)  // returns first: the oldest idle one
        buffers.removeAll()
        try await Task.sleep(for: .milliseconds(20))
        _ = try pool.makePixelBuffer()  // takes the newest idle one, frees the one older than the maximum age
        #expect(freed.ids == [older])
    }

    @Test func poolDeinitReportsIdleSurfacesAndLaterReturnsToo() throws {
        let freed = Counter()
        var pool: PixelBufferPool? = try PixelBufferPool(attributes: attributes(minimum: 2))
        pool!.setSurfaceFreedHandler { freed.record($0) }
        var outstanding: PixelBuffer? = try pool!.makePixelBuffer()
        let outstandingID = outstanding!.surface.id
        pool = nil
        #expect(freed.count == 1)  // the idle one
        #expect(!freed.ids.contains(outstandingID))
        outstanding = nil
        #expect(freed.count == 2 && freed.ids.last == outstandingID)
    }

    @Test func noHandlerMeansNothingIsCalledAndRemovingOneStopsCalls() throws {
        let pool = try PixelBufferPool(attributes: attributes())
        let freed = Counter()
        pool.setSurfaceFreedHandler { freed.record($0) }
        pool.setSurfaceFreedHandler(nil)
        var buffer: PixelBuffer? = try pool.makePixelBuffer()
        buffer = nil
        pool.flush(all: true)
        #expect(freed.count == 0)
        _ = buffer
    }
}
