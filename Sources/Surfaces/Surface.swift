import Synchronization
import SystemPackage

/// Shared memory with a fixed image layout: FrameBus's IOSurface.
///
/// A surface is backed by a sealed memfd (made here, or imported from another process through a
/// ``SurfaceHandle``) or by an imported DMA-BUF. It is mapped once, when it is made or imported, and the
/// mapping is reused for every frame.
///
/// CPU access is bracketed by ``lock(_:)`` and ``unlock(_:)``, read-only or read-write. Every read-write unlock
/// changes the ``seed``, so a reader can tell whether the contents changed. For a DMA-BUF, lock and unlock issue
/// `DMA_BUF_IOCTL_SYNC` start and end.
///
/// ```swift
/// let surface = try Surface.makeMemFD(layout: layout)
/// try surface.lock()
/// unsafe surface.withUnsafeMutableBytes { bytes in bytes.initializeMemory(as: UInt8.self, repeating: 0) }
/// try surface.unlock()
/// var handle = try surface.makeHandle()   // a read-only descriptor for another process
/// ```
public final class Surface: @unchecked Sendable {
    // @unchecked: every stored property is immutable except `state`, which a Mutex guards. The mapped bytes are
    // shared memory; lock/unlock is the (advisory, as with IOSurface) protocol for touching them.

    /// What backs a surface.
    public enum Backing: Hashable, Sendable {
        /// A sealed memfd.
        case memfd
        /// A DMA-BUF with a DRM format modifier (`DRM_FORMAT_MOD_LINEAR` is 0).
        case dmaBuf(modifier: UInt64)
    }

    /// Options for ``lock(_:)`` and ``unlock(_:)``.
    public struct LockOptions: OptionSet, Hashable, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// Lock for reading only (`kIOSurfaceLockReadOnly`); the seed does not change on unlock.
        public static let readOnly = LockOptions(rawValue: 1)
    }

    /// The identifier, unique across processes; an imported surface keeps its exporter's id.
    public let id: SurfaceID
    /// The memory layout.
    public let layout: SurfaceLayout
    /// What backs the memory.
    public let backing: Backing
    /// Whether the mapping is read-only (an imported consumer handle). Read-write locks then fail.
    public let isReadOnly: Bool

    /// The descriptors this surface owns: one per memfd (one for all planes, or one per plane), one per distinct
    /// DMA-BUF for a DMA-BUF surface.
    let descriptors: [FileDescriptor]
    /// One mapping per descriptor.
    let mappings: [Mapping]
    /// For each plane: which mapping, and the plane's byte offset inside it.
    let planeLocations: [(mapping: Int, offset: Int)]

    private struct State {
        var readLocks = 0
        var writeLocks = 0
        var seed: UInt32 = 1
        var useCount = 0
    }
    private let state = Mutex(State())

    init(
        id: SurfaceID,
        layout: SurfaceLayout,
        backing: Backing,
        isReadOnly: Bool,
        descriptors: [FileDescriptor],
        mappings: [Mapping],
        planeLocations: [(mapping: Int, offset: Int)]
    ) {
        self.id = id
        self.layout = layout
        self.backing = backing
        self.isReadOnly = isReadOnly
        self.descriptors = descriptors
        self.mappings = mappings
        self.planeLocations = planeLocations
    }

    deinit {
        for mapping in mappings { mapping.unmap() }
        for descriptor in descriptors { Syscall.close(descriptor) }
    }

    /// Total bytes of shared memory.
    public var allocationSize: Int { layout.allocationSize }

    /// How many descriptors (and mappings) hold the surface: 1 for a single memfd or DMA-BUF, one per plane for a
    /// memfd per plane, one per distinct buffer for a multi-buffer DMA-BUF. ``withUnsafeBytes(_:)`` needs 1.
    public var descriptorCount: Int { descriptors.count }

    // MARK: Locking

    /// Locks the surface for CPU access.
    ///
    /// Locks nest; each needs a matching ``unlock(_:)`` with the same options. For a DMA-BUF this issues
    /// `DMA_BUF_IOCTL_SYNC` with `DMA_BUF_SYNC_START`.
    ///
    /// - Parameter options: `[.readOnly]` to read; `[]` to read and write.
    /// - Throws: ``SurfaceError/Code-swift.struct/readOnly`` for a read-write lock on a read-only surface;
    ///   ``SurfaceError/Code-swift.struct/systemCall`` if the DMA-BUF sync fails.
    public func lock(_ options: LockOptions = []) throws(SurfaceError) {
        let writing = !options.contains(.readOnly)
        if writing && isReadOnly { throw SurfaceError(.readOnly, "Surface.lock(readWrite) on \(id)") }
        try syncDMABuf(start: true, writing: writing)
        state.withLock { state in
            if writing { state.writeLocks += 1 } else { state.readLocks += 1 }
        }
    }

    /// Unlocks the surface; a read-write unlock changes the ``seed``.
    ///
    /// - Throws: ``SurfaceError/Code-swift.struct/unbalancedUnlock`` if no lock with these options is held.
    public func unlock(_ options: LockOptions = []) throws(SurfaceError) {
        let writing = !options.contains(.readOnly)
        let balanced = state.withLock { state in
            if writing {
                guard state.writeLocks > 0 else { return false }
                state.writeLocks -= 1
                state.seed &+= 1
            } else {
                guard state.readLocks > 0 else { return false }
                state.readLocks -= 1
            }
            return true
        }
        guard balanced else { throw SurfaceError(.unbalancedUnlock, "Surface.unlock on \(id)") }
        try syncDMABuf(start: false, writing: writing)
    }

    /// Whether any lock is held in this process.
    public var isLocked: Bool { state.withLock { $0.readLocks + $0.writeLocks > 0 } }

    /// A counter that changes every time a read-write lock is released (`IOSurfaceGetSeed`).
    public var seed: UInt32 { state.withLock { $0.seed } }

    private func syncDMABuf(start: Bool, writing: Bool) throws(SurfaceError) {
        guard case .dmaBuf = backing else { return }
        var flags = start ? DMABufSync.start : DMABufSync.end
        flags |= writing ? DMABufSync.readWrite : DMABufSync.read
        for descriptor in descriptors {
            try Syscall.dmaBufSync(descriptor, flags: flags)
                .mapError { SurfaceError(.systemCall, "DMA_BUF_IOCTL_SYNC", errno: $0) }.get()
        }
    }

    // MARK: Use count (IOSurfaceIncrementUseCount)

    /// Marks the surface as used by one more local client.
    public func incrementUseCount() { state.withLock { $0.useCount += 1 } }

    /// Marks one local client as done.
    ///
    /// - Precondition: the use count is positive.
    public func decrementUseCount() {
        state.withLock { state in
            precondition(state.useCount > 0, "decrementUseCount without incrementUseCount")
            state.useCount -= 1
        }
    }

    /// The local use count.
    public var useCount: Int { state.withLock { $0.useCount } }

    /// Whether any local client uses the surface.
    public var isInUse: Bool { useCount > 0 }

    // MARK: Bytes

    /// Calls `body` with the surface's bytes (a single-descriptor surface, such as every opaque surface).
    ///
    /// - Precondition: a lock is held, and the surface has a single mapping.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        precondition(isLocked, "Surface bytes accessed without a lock")
        precondition(mappings.count == 1, "a multi-descriptor surface has no single byte range")
        // SAFETY: the mapping covers allocationSize bytes and lives as long as self, which the caller holds.
        return try unsafe body(UnsafeRawBufferPointer(mappings[0].bytes(from: 0, count: layout.allocationSize)))
    }

    /// Calls `body` with the surface's bytes for writing.
    ///
    /// - Precondition: a read-write lock is held, and the surface has a single mapping.
    public func withUnsafeMutableBytes<R, E: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        precondition(state.withLock { $0.writeLocks > 0 }, "Surface written without a read-write lock")
        precondition(mappings.count == 1, "a multi-descriptor surface has no single byte range")
        // SAFETY: as above; the mapping is writable because read-write locks fail on read-only surfaces.
        return try unsafe body(mappings[0].bytes(from: 0, count: layout.allocationSize))
    }

    /// Calls `body` with one plane's bytes (`bytesPerRow * height`).
    ///
    /// - Precondition: a lock is held and `index` is a plane of the layout.
    public func withUnsafeBytes<R, E: Error>(
        ofPlane index: Int,
        _ body: (UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        precondition(isLocked, "Surface bytes accessed without a lock")
        let location = planeLocations[index]
        // SAFETY: validated layouts keep every plane inside its mapping, which lives as long as self.
        let bytes = unsafe mappings[location.mapping].bytes(
            from: location.offset,
            count: layout.planes[index].byteCount
        )
        return try unsafe body(UnsafeRawBufferPointer(bytes))
    }

    /// Calls `body` with one plane's bytes for writing.
    ///
    /// - Precondition: a read-write lock is held and `index` is a plane of the layout.
    public func withUnsafeMutableBytes<R, E: Error>(
        ofPlane index: Int,
        _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        precondition(state.withLock { $0.writeLocks > 0 }, "Surface written without a read-write lock")
        let location = planeLocations[index]
        // SAFETY: as above, and the mapping is writable (read-write locks fail on read-only surfaces).
        let bytes = unsafe mappings[location.mapping].bytes(
            from: location.offset,
            count: layout.planes[index].byteCount
        )
        return try unsafe body(bytes)
    }
}
