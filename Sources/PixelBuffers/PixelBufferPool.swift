import Surfaces
import Synchronization

/// A pool of equal pixel buffers whose surfaces are reused: FrameBus's CVPixelBufferPool.
///
/// Making a surface costs about 3 µs per 4 KiB page here (2.4 ms for a 1080p NV12 frame), so a producer takes
/// buffers from a pool and the pool takes each surface back when the last reference to its buffer goes away.
///
/// ```swift
/// let pool = try PixelBufferPool(attributes: .init(width: 1920, height: 1080, pixelFormat: .yuv420BiPlanarVideoRange8,
///                                                  minimumBufferCount: 4, allocationThreshold: 8))
/// let buffer = try pool.makePixelBuffer()   // throws .wouldExceedAllocationThreshold when 8 are out
/// ```
public final class PixelBufferPool: Sendable {
    /// What the pool makes, and its limits.
    public struct Attributes: Hashable, Sendable {
        public var width: Int
        public var height: Int
        public var pixelFormat: PixelFormat
        public var bytesPerRowAlignment: Int
        /// For a compressed format: the size of each opaque surface (the codec's worst case).
        public var opaqueByteCount: Int?
        /// Buffers made when the pool is created and kept even when idle
        /// (`kCVPixelBufferPoolMinimumBufferCountKey`).
        public var minimumBufferCount: Int
        /// Idle buffers beyond the minimum are freed after this long (`kCVPixelBufferPoolMaximumBufferAgeKey`);
        /// `nil` keeps them.
        public var maximumBufferAge: Duration?
        /// The most buffers that may exist at once, idle or in use (`kCVPixelBufferPoolAllocationThresholdKey`);
        /// `nil` is unlimited.
        public var allocationThreshold: Int?
        /// Attachments every new buffer starts with.
        public var attachments: PixelBufferAttachments
        /// Where the surfaces come from: `nil` (the default) for sealed memfds, or a DMA-BUF allocator
        /// (`/dev/dma_heap/system`, `/dev/udmabuf`) for buffers a device or another API can import. Only for
        /// uncompressed formats; a DMA-BUF allocation is rounded up to whole pages.
        public var dmaBufAllocator: DMABufAllocator?

        public init(
            width: Int,
            height: Int,
            pixelFormat: PixelFormat,
            bytesPerRowAlignment: Int = PixelBuffer.defaultBytesPerRowAlignment,
            opaqueByteCount: Int? = nil,
            minimumBufferCount: Int = 0,
            maximumBufferAge: Duration? = .seconds(1),
            allocationThreshold: Int? = nil,
            attachments: PixelBufferAttachments = PixelBufferAttachments(),
            dmaBufAllocator: DMABufAllocator? = nil
        ) {
            self.width = width
            self.height = height
            self.pixelFormat = pixelFormat
            self.bytesPerRowAlignment = bytesPerRowAlignment
            self.opaqueByteCount = opaqueByteCount
            self.minimumBufferCount = minimumBufferCount
            self.maximumBufferAge = maximumBufferAge
            self.allocationThreshold = allocationThreshold
            self.attachments = attachments
            self.dmaBufAllocator = dmaBufAllocator
        }
    }

    /// A pool's identity: unique for the life of the process and never reused, unlike the pool's address (a new pool
    /// is often allocated where a freed one was, so `ObjectIdentifier` cannot tell them apart).
    public struct ID: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: UInt64

        public var description: String { "pool#\(rawValue)" }

        private static let counter = Atomic<UInt64>(0)

        static func next() -> ID { ID(rawValue: counter.wrappingAdd(1, ordering: .relaxed).newValue) }
    }

    /// A registered surface-freed observer (``addSurfaceFreedObserver(_:)``); pass it to
    /// ``removeSurfaceFreedObserver(_:)`` to stop the calls.
    public struct SurfaceFreedObservation: Hashable, Sendable {
        let rawValue: UInt64
    }

    /// This pool's never-reused identity.
    public let id = ID.next()
    /// The attributes the pool was made with.
    public let attributes: Attributes
    /// The layout every surface of the pool has.
    public let layout: SurfaceLayout

    /// Shared with the recyclers of outstanding buffers, which may outlive the pool.
    private let state: SharedState

    /// Makes a pool and pre-allocates ``Attributes/minimumBufferCount`` buffers.
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/invalidSize`` (also for a negative count or a threshold below
    ///   the minimum), ``PixelBufferError/Code-swift.struct/invalidAlignment``,
    ///   ``PixelBufferError/Code-swift.struct/opaqueFormat`` (a compressed format with a DMA-BUF allocator),
    ///   ``PixelBufferError/Code-swift.struct/surface`` (for a DMA-BUF allocator without its device node, wrapping
    ///   ``SurfaceError/Code-swift.struct/deviceUnavailable``).
    public init(attributes: Attributes) throws(PixelBufferError) {
        self.attributes = attributes
        let format = attributes.pixelFormat
        if format.isCompressed {
            layout = try PixelBuffer.opaqueLayout(
                width: attributes.width,
                height: attributes.height,
                compressedFormat: format,
                opaqueByteCount: attributes.opaqueByteCount ?? 0
            )
        } else {
            layout = try PixelBuffer.layout(
                width: attributes.width,
                height: attributes.height,
                pixelFormat: format,
                bytesPerRowAlignment: attributes.bytesPerRowAlignment
            )
        }
        if attributes.dmaBufAllocator != nil && format.isCompressed {
            throw PixelBufferError(.opaqueFormat, "PixelBufferPool: a compressed format cannot live in DMA-BUFs")
        }
        guard attributes.minimumBufferCount >= 0, attributes.minimumBufferCount <= 1024,
            attributes.allocationThreshold.map({ $0 >= max(1, attributes.minimumBufferCount) }) ?? true
        else { throw PixelBufferError(.invalidSize, "PixelBufferPool: buffer counts") }
        state = SharedState(threshold: attributes.allocationThreshold, agesBuffers: attributes.maximumBufferAge != nil)
        let now = state.now()
        for _ in 0..<attributes.minimumBufferCount {
            let surface = try makeSurface()
            state.value.withLock {
                $0.idle.append((surface, now))
                $0.allocated += 1
            }
        }
    }

    deinit {
        // Outstanding buffers may outlive the pool: from now on their surfaces are freed when they come back.
        let (freed, handlers) = state.value.withLock { state in
            state.isClosed = true
            let freed = state.idle.map(\.surface)
            state.idle.removeAll()
            state.allocated -= freed.count
            return (freed, state.surfaceFreedHandlers)
        }
        SharedState.report(freed, to: handlers)
    }

    private func makeSurface() throws(PixelBufferError) -> Surface {
        do {
            if let allocator = attributes.dmaBufAllocator {
                return try allocator.makeSurface(layout: layout)
            }
            // Compressed surfaces are sized for the worst case: their pages are committed only when written.
            return try Surface.makeMemFD(
                layout: layout,
                name: "framebus-pool-\(attributes.pixelFormat.name)",
                populatesPages: !attributes.pixelFormat.isCompressed
            )
        } catch {
            throw PixelBufferError(.surface, "PixelBufferPool.makePixelBuffer", underlying: error)
        }
    }

    /// Takes a buffer: an idle one if there is one, else a new one.
    ///
    /// The buffer's surface returns to the pool when the last reference to the buffer goes away.
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/wouldExceedAllocationThreshold`` when
    ///   ``Attributes/allocationThreshold`` buffers already exist and none is idle (``nextPixelBuffer()`` waits
    ///   instead); ``PixelBufferError/Code-swift.struct/surface`` if a new surface cannot be made.
    public func makePixelBuffer() throws(PixelBufferError) -> PixelBuffer {
        guard let buffer = try pixelBufferIfAvailable() else {
            throw PixelBufferError(
                .wouldExceedAllocationThreshold,
                "PixelBufferPool.makePixelBuffer: \(attributes.allocationThreshold ?? 0) buffers of \(attributes.pixelFormat) in use"
            )
        }
        return buffer
    }

    /// ``makePixelBuffer()`` without the error when the allocation threshold is reached: nil then. For a producer
    /// that polls for a buffer under back-pressure (a publisher's `makePixelBuffer`), where describing the error
    /// would cost more than taking a buffer.
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/surface`` if a new surface cannot be made.
    package func pixelBufferIfAvailable() throws(PixelBufferError) -> PixelBuffer? {
        let now = state.now()
        let grant: Grant? = state.value.withLock { state in
            // Callers waiting in nextPixelBuffer() come first; they exist only when nothing can be vended anyway.
            guard state.waiters.isEmpty else { return nil }
            return state.immediateGrant()
        }
        guard let grant else { return nil }
        return try vend(grant, now: now, operation: "PixelBufferPool.makePixelBuffer")
    }

    /// Takes a buffer, waiting until one can be vended within the allocation threshold.
    ///
    /// Returns at once when a buffer is idle or the pool may make one; otherwise suspends until a buffer comes back
    /// to the pool (the last reference to one of its pixel buffers goes away: CoreVideo's free-buffer notification)
    /// or a surface is freed. Callers that wait are served in the order they called.
    ///
    /// ```swift
    /// while running {
    ///     let buffer = try await pool.nextPixelBuffer()   // back-pressure: waits while consumers hold frames
    ///     ...
    /// }
    /// ```
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/cancelled`` when the calling task is cancelled (before or
    ///   while waiting); ``PixelBufferError/Code-swift.struct/surface`` if a new surface cannot be made.
    public func nextPixelBuffer() async throws(PixelBufferError) -> PixelBuffer {
        let now = state.now()
        let id = state.makeWaiterID()
        let shared = state
        let grant: Grant = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Grant, Never>) in
                let immediate: Grant? = shared.value.withLock { state in
                    // Task.isCancelled is set before the cancellation handler runs, and the handler takes this lock:
                    // either we see the flag here, or the handler finds the waiter we add.
                    if Task.isCancelled { return .cancelled }
                    if state.waiters.isEmpty, let grant = state.immediateGrant() { return grant }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            let waiter: Waiter? = shared.value.withLock { state in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(returning: .cancelled)
        }
        return try vend(grant, now: now, operation: "PixelBufferPool.nextPixelBuffer")
    }

    private func vend(
        _ grant: Grant,
        now: ContinuousClock.Instant?,
        operation: String
    ) throws(PixelBufferError)
        -> PixelBuffer
    {
        let surface: Surface
        switch grant {
        case .cancelled:
            throw PixelBufferError(.cancelled, "\(operation): task cancelled")
        case .reuse(let idle):
            surface = idle
        case .allocate:
            do { surface = try makeSurface() } catch {
                // The slot we were given goes to the next waiter, who learns the same or makes it.
                state.update { $0.allocated -= 1 }
                throw error
            }
        }
        trimIdle(now: now)
        let shared = state
        return PixelBuffer(
            surface: surface,
            pixelFormat: attributes.pixelFormat,
            attachments: attributes.attachments,
            recycler: { surface in shared.recycle(surface) }
        )
    }

    /// Sets the handler called when the pool frees a surface for good, or removes it with `nil`.
    ///
    /// A surface is freed when it has been idle longer than ``Attributes/maximumBufferAge`` beyond the minimum
    /// count, when ``flush(all:)`` frees it, when the pool goes away (its idle surfaces), and when a buffer comes
    /// back after the pool went away. The handler runs on the thread that frees the surface, outside the pool's
    /// lock, once per surface. This is the application's own slot: observers added with
    /// ``addSurfaceFreedObserver(_:)`` (a publisher's, for one) are called as well, whatever is set here.
    ///
    /// - Parameter handler: called with the freed surface's id.
    public func setSurfaceFreedHandler(_ handler: (@Sendable (SurfaceID) -> Void)?) {
        state.value.withLock { $0.surfaceFreedHandler = handler }
    }

    /// Adds an observer called, like the handler of ``setSurfaceFreedHandler(_:)``, with the id of every surface the
    /// pool frees for good: every observer is called (multicast), on the freeing thread, outside the pool's lock.
    ///
    /// Observers stay registered until removed, and keep being called for buffers that come back after the pool
    /// went away. A publisher observes each pool it takes buffers from, to retire the freed surfaces in its
    /// subscribers (docs/PROTOCOL.md §4.2).
    ///
    /// - Returns: the registration, for ``removeSurfaceFreedObserver(_:)``.
    public func addSurfaceFreedObserver(
        _ observer: @escaping @Sendable (SurfaceID) -> Void
    ) -> SurfaceFreedObservation {
        state.value.withLock { state in
            state.nextObserverID &+= 1
            state.observers.append((state.nextObserverID, observer))
            return SurfaceFreedObservation(rawValue: state.nextObserverID)
        }
    }

    /// Removes an observer added with ``addSurfaceFreedObserver(_:)``; removing one twice does nothing.
    public func removeSurfaceFreedObserver(_ observation: SurfaceFreedObservation) {
        state.value.withLock { state in state.observers.removeAll { $0.id == observation.rawValue } }
    }

    /// Frees idle buffers older than the maximum age, keeping the minimum count (`CVPixelBufferPoolFlush`).
    ///
    /// - Parameter all: free every idle buffer regardless of age (`kCVPixelBufferPoolFlushExcessBuffers` is the
    ///   default behaviour; `all` empties the pool).
    public func flush(all: Bool = false) {
        let keep = all ? 0 : attributes.minimumBufferCount
        let (released, handlers): ([Surface], [@Sendable (SurfaceID) -> Void]) = state.value.withLock { state in
            guard state.idle.count > keep else { return ([], []) }
            let released = state.idle.prefix(state.idle.count - keep).map(\.surface)
            state.idle.removeFirst(state.idle.count - keep)
            state.allocated -= released.count
            return (released, state.surfaceFreedHandlers)
        }
        SharedState.report(released, to: handlers)  // then the surfaces unmap and close, outside the lock
        state.update { _ in }  // freed capacity may let a waiter allocate
    }

    private func trimIdle(now: ContinuousClock.Instant?) {
        guard let age = attributes.maximumBufferAge, let now else { return }
        let minimum = attributes.minimumBufferCount
        let (released, handlers): ([Surface], [@Sendable (SurfaceID) -> Void]) = state.value.withLock { state in
            var released: [Surface] = []
            // Oldest first; keep the minimum count.
            while state.idle.count > minimum, let since = state.idle.first?.since, now - since > age {
                released.append(state.idle.removeFirst().surface)
                state.allocated -= 1
            }
            return (released, released.isEmpty ? [] : state.surfaceFreedHandlers)
        }
        guard !released.isEmpty else { return }
        SharedState.report(released, to: handlers)
        state.update { _ in }
    }

    /// Buffers that exist now, idle or in use.
    public var allocatedBufferCount: Int { state.value.withLock { $0.allocated } }

    /// Buffers waiting in the pool.
    public var idleBufferCount: Int { state.value.withLock { $0.idle.count } }

    /// Buffers handed out and not yet returned.
    public var inUseBufferCount: Int { state.value.withLock { $0.allocated - $0.idle.count } }

    /// Calls to ``nextPixelBuffer()`` waiting for a buffer.
    public var waiterCount: Int { state.value.withLock { $0.waiters.count } }
}

/// What a caller of the pool may do.
private enum Grant: Sendable {
    /// Use this idle surface.
    case reuse(Surface)
    /// Make a new surface; the slot is already counted in `allocated`.
    case allocate
    /// The waiting task was cancelled.
    case cancelled
}

private struct Waiter {
    var id: UInt64
    var continuation: CheckedContinuation<Grant, Never>
}

/// The pool's mutable state, shared with the recyclers of outstanding buffers (which may outlive the pool).
private final class SharedState: Sendable {
    struct State {
        /// Idle surfaces, most recently returned last; `since` is nil when the pool does not age its buffers.
        var idle: [(surface: Surface, since: ContinuousClock.Instant?)] = []
        var allocated = 0
        let threshold: Int?
        /// Callers of nextPixelBuffer() in arrival order.
        var waiters: [Waiter] = []
        var nextWaiterID: UInt64 = 0
        /// The pool has gone away: surfaces that come back are freed.
        var isClosed = false
        /// The application's handler (setSurfaceFreedHandler).
        var surfaceFreedHandler: (@Sendable (SurfaceID) -> Void)?
        /// Observers (addSurfaceFreedObserver), in the order added.
        var observers: [(id: UInt64, observer: @Sendable (SurfaceID) -> Void)] = []
        var nextObserverID: UInt64 = 0

        /// Everyone to tell about a freed surface.
        var surfaceFreedHandlers: [@Sendable (SurfaceID) -> Void] {
            var handlers = observers.map(\.observer)
            if let surfaceFreedHandler { handlers.append(surfaceFreedHandler) }
            return handlers
        }

        /// An idle surface, or permission to make one within the threshold, or nil.
        mutating func immediateGrant() -> Grant? {
            if let (surface, _) = idle.popLast() { return .reuse(surface) }
            if let threshold, allocated >= threshold { return nil }
            allocated += 1
            return .allocate
        }

        /// Grants to the first waiters whatever can be granted now, in order.
        mutating func serveWaiters() -> [(Waiter, Grant)] {
            var served: [(Waiter, Grant)] = []
            while !waiters.isEmpty, let grant = immediateGrant() { served.append((waiters.removeFirst(), grant)) }
            return served
        }
    }

    let value: Mutex<State>
    /// Whether idle buffers are freed after a maximum age: only then does the pool read the clock (a buffer's
    /// `make` and return are on every frame's path).
    let agesBuffers: Bool

    init(threshold: Int?, agesBuffers: Bool) {
        value = Mutex(State(threshold: threshold))
        self.agesBuffers = agesBuffers
    }

    /// Now, for a pool that ages its buffers; nil otherwise.
    func now() -> ContinuousClock.Instant? { agesBuffers ? ContinuousClock.now : nil }

    func makeWaiterID() -> UInt64 {
        value.withLock { state in
            state.nextWaiterID &+= 1
            return state.nextWaiterID
        }
    }

    /// Applies `change`, then wakes the waiters it (or anything before it) made servable.
    func update(_ change: (inout State) -> Void) {
        let served = value.withLock { state in
            change(&state)
            return state.serveWaiters()
        }
        for (waiter, grant) in served { waiter.continuation.resume(returning: grant) }
    }

    /// A buffer's last reference went away: its surface goes back to the pool (or is freed if the pool is gone).
    func recycle(_ surface: Surface) {
        let now = self.now()
        var handlers: [@Sendable (SurfaceID) -> Void] = []
        var freed = false
        update { state in
            if state.isClosed {
                state.allocated -= 1
                handlers = state.surfaceFreedHandlers
                freed = true
            } else {
                state.idle.append((surface, now))
            }
        }
        if freed { Self.report([surface], to: handlers) }
    }

    /// Calls every handler with each freed surface's id.
    static func report(_ surfaces: [Surface], to handlers: [@Sendable (SurfaceID) -> Void]) {
        for surface in surfaces {
            for handler in handlers { handler(surface.id) }
        }
    }
}
