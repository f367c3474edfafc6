import SystemPackage

/// What another process needs to map a surface: one to four descriptors plus the layout and identity.
///
/// A handle describes the backing (a sealed memfd, or a DMA-BUF with its DRM format modifier), the descriptors that
/// hold the memory, and for each plane which descriptor holds it. Plane offsets in ``layout`` are relative to the
/// start of that plane's descriptor, and ``SurfaceLayout/allocationSize`` is the sum of ``descriptorByteCounts``. A
/// surface made with one memfd has one descriptor holding every plane; one made with a memfd per plane
/// (``Surface/makeMemFD(layout:name:descriptorPerPlane:)``) or imported from a multi-buffer DMA-BUF has several.
///
/// A handle owns its descriptors and closes them when it goes away unless ownership is taken with
/// ``takeDescriptors()`` (to send them) or it is consumed by ``Surface/importing(_:)``. Nothing in a handle is
/// trusted: a handle built from a peer's message is checked by ``Surface/importing(_:)``, which throws, never traps.
public struct SurfaceHandle: ~Copyable {
    /// The surface's identifier (the exporter's).
    public let id: SurfaceID
    /// The memory layout the importer must check against the descriptors; plane offsets are relative to the
    /// plane's descriptor.
    public let layout: SurfaceLayout
    /// What backs it.
    public let backing: Surface.Backing
    /// For each plane of ``layout``, the index in the handle's descriptors of the one holding it.
    public let planeDescriptorIndices: [Int]
    /// For each descriptor, how many bytes of it (from offset 0) the surface uses; they add up to
    /// ``SurfaceLayout/allocationSize``.
    public let descriptorByteCounts: [Int]
    private var descriptors: [FileDescriptor]

    /// The most descriptors a handle carries (one per plane of a four-plane format).
    public static let maximumDescriptorCount = 4

    /// Wraps one descriptor that holds every plane (received from another process), taking ownership of it.
    ///
    /// Equivalent to ``init(id:layout:backing:descriptors:planeDescriptorIndices:descriptorByteCounts:)`` with
    /// one descriptor of ``SurfaceLayout/allocationSize`` bytes.
    public init(id: SurfaceID, layout: SurfaceLayout, backing: Surface.Backing = .memfd, descriptor: FileDescriptor) {
        self.init(
            id: id,
            layout: layout,
            backing: backing,
            descriptors: [descriptor],
            planeDescriptorIndices: layout.planes.map { _ in 0 },
            descriptorByteCounts: [layout.allocationSize]
        )
    }

    /// Wraps descriptors received from another process, taking ownership of all of them.
    ///
    /// Nothing is checked here (the handle only holds what it is given, and closes it); ``Surface/importing(_:)``
    /// checks everything.
    ///
    /// - Parameters:
    ///   - id: the exporter's surface id.
    ///   - layout: the layout, plane offsets relative to each plane's descriptor.
    ///   - backing: memfd or DMA-BUF (with its modifier).
    ///   - descriptors: one to ``maximumDescriptorCount`` descriptors.
    ///   - planeDescriptorIndices: for each plane, the index of its descriptor in `descriptors`.
    ///   - descriptorByteCounts: for each descriptor, the bytes the surface uses.
    public init(
        id: SurfaceID,
        layout: SurfaceLayout,
        backing: Surface.Backing,
        descriptors: [FileDescriptor],
        planeDescriptorIndices: [Int],
        descriptorByteCounts: [Int]
    ) {
        self.id = id
        self.layout = layout
        self.backing = backing
        self.descriptors = descriptors
        self.planeDescriptorIndices = planeDescriptorIndices
        self.descriptorByteCounts = descriptorByteCounts
    }

    /// How many descriptors the handle still owns.
    public var descriptorCount: Int { descriptors.count }

    /// The descriptors, still owned by the handle (for sending them with `SCM_RIGHTS`).
    public var borrowedDescriptors: [FileDescriptor] { descriptors }

    /// The descriptor of a single-descriptor handle, still owned by the handle.
    ///
    /// - Precondition: the handle owns exactly one descriptor (use ``borrowedDescriptors`` otherwise).
    public var borrowedDescriptor: FileDescriptor {
        precondition(descriptors.count == 1, "SurfaceHandle.borrowedDescriptor on \(descriptors.count) descriptors")
        return descriptors[0]
    }

    /// Gives up ownership of every descriptor; the caller must close them.
    public consuming func takeDescriptors() -> [FileDescriptor] {
        let taken = descriptors
        descriptors = []
        return taken
    }

    /// Gives up ownership of the descriptor of a single-descriptor handle; the caller must close it.
    ///
    /// - Precondition: the handle owns exactly one descriptor (use ``takeDescriptors()`` otherwise).
    public consuming func takeDescriptor() -> FileDescriptor {
        precondition(descriptors.count == 1, "SurfaceHandle.takeDescriptor on \(descriptors.count) descriptors")
        let taken = descriptors[0]
        descriptors = []
        return taken
    }

    deinit {
        Syscall.closeEach(descriptors)
    }
}

extension Surface {
    /// Makes a handle for another process, with one descriptor per descriptor of the surface.
    ///
    /// For a memfd, each descriptor is a new read-only descriptor of the same file (reopened through
    /// `/proc/self/fd/N` with `O_RDONLY`); the file is also sealed with `F_SEAL_FUTURE_WRITE`, so no consumer can
    /// reopen it writable either. For a DMA-BUF, each is a duplicate (DMA-BUFs cannot be reopened; their access
    /// mode is the exporter's).
    ///
    /// - Throws: ``SurfaceError/Code-swift.struct/systemCall`` if a reopen or duplicate fails (for example, no
    ///   `/proc`).
    public func makeHandle() throws(SurfaceError) -> SurfaceHandle {
        var exported: [FileDescriptor] = []
        do throws(SurfaceError) {
            for descriptor in descriptors {
                switch backing {
                case .memfd:
                    exported.append(
                        try Syscall.open(
                            "/proc/self/fd/\(descriptor.rawValue)",
                            flags: SystemPackage.FileDescriptor.AccessMode.readOnly.rawValue
                        )
                        .mapError { SurfaceError(.systemCall, "open(/proc/self/fd, O_RDONLY)", errno: $0) }.get()
                    )
                case .dmaBuf:
                    exported.append(
                        try Syscall.duplicate(descriptor)
                            .mapError { SurfaceError(.systemCall, "fcntl(F_DUPFD_CLOEXEC)", errno: $0) }.get()
                    )
                }
            }
        } catch {
            for descriptor in exported { Syscall.close(descriptor) }
            throw error
        }
        return SurfaceHandle(
            id: id,
            layout: layout,
            backing: backing,
            descriptors: exported,
            planeDescriptorIndices: planeLocations.map(\.mapping),
            descriptorByteCounts: mappings.map(\.byteCount)
        )
    }

    /// Imports a surface from a handle that came from another process, read-only.
    ///
    /// The handle is checked first: one to ``SurfaceHandle/maximumDescriptorCount`` descriptors, each used by a
    /// plane (an opaque layout has exactly one), byte counts that add up to the layout's allocation size, and every
    /// plane inside its own descriptor's bytes.
    ///
    /// Each memfd must be sealed with at least `F_SEAL_SHRINK` and `F_SEAL_GROW` (otherwise a peer could shrink
    /// it and make us SIGBUS), sealed against writes with `F_SEAL_FUTURE_WRITE` or `F_SEAL_WRITE` (otherwise anyone
    /// holding it could reopen it writable and change what others read), and at least as large as its byte count.
    /// Each is mapped once here.
    ///
    /// A DMA-BUF handle goes through ``importDMABuf(planes:layout:modifier:readOnly:)``'s checks (a linear
    /// modifier only; each buffer at least its byte count when it reports a size); lock and unlock then issue
    /// `DMA_BUF_IOCTL_SYNC`.
    ///
    /// - Throws: ``SurfaceError/Code-swift.struct/invalidHandle`` (descriptor counts, indices or byte counts that
    ///   do not fit), ``SurfaceError/Code-swift.struct/invalidLayout``, ``SurfaceError/Code-swift.struct/notAMemFD``,
    ///   ``SurfaceError/Code-swift.struct/notSealed``, ``SurfaceError/Code-swift.struct/notWriteSealed``,
    ///   ``SurfaceError/Code-swift.struct/tooSmall``, ``SurfaceError/Code-swift.struct/systemCall``. Every
    ///   descriptor of the handle is closed on failure.
    public static func importing(_ handle: consuming SurfaceHandle) throws(SurfaceError) -> Surface {
        let id = handle.id
        let layout = handle.layout
        let backing = handle.backing
        let planeDescriptorIndices = handle.planeDescriptorIndices
        let byteCounts = handle.descriptorByteCounts
        let descriptors = handle.takeDescriptors()
        var keep = false
        defer { if !keep { Syscall.closeEach(descriptors) } }
        guard Set(descriptors.map(\.rawValue)).count == descriptors.count else {
            throw SurfaceError(.invalidHandle, "Surface.importing: one descriptor given twice")
        }
        try checkHandle(
            layout: layout,
            descriptorCount: descriptors.count,
            planeDescriptorIndices: planeDescriptorIndices,
            byteCounts: byteCounts
        )
        if case .dmaBuf(let modifier) = backing {
            // importDMABuf duplicates what it keeps; the handle's descriptors are closed by the defer above.
            return try importDMABuf(
                descriptors: descriptors,
                byteCounts: byteCounts,
                planeDescriptorIndices: planeDescriptorIndices,
                layout: layout,
                modifier: modifier,
                readOnly: true,
                id: id
            )
        }
        var mappings: [Mapping] = []
        do throws(SurfaceError) {
            for (index, descriptor) in descriptors.enumerated() {
                try checkSealedAndLargeEnough(descriptor, byteCount: byteCounts[index])
                mappings.append(
                    try Mapping.map(descriptor, byteCount: byteCounts[index], writable: false)
                        .mapError { SurfaceError(.systemCall, "mmap", errno: $0) }.get()
                )
            }
        } catch {
            for mapping in mappings { mapping.unmap() }
            throw error
        }
        keep = true
        return Surface(
            id: id,
            layout: layout,
            backing: .memfd,
            isReadOnly: true,
            descriptors: descriptors,
            mappings: mappings,
            planeLocations: layout.planes.enumerated().map { (planeDescriptorIndices[$0.offset], $0.element.offset) }
        )
    }

    /// Checks a handle's shape before any descriptor is touched; every value may be a hostile peer's.
    static func checkHandle(
        layout: SurfaceLayout,
        descriptorCount: Int,
        planeDescriptorIndices: [Int],
        byteCounts: [Int]
    ) throws(SurfaceError) {
        func fail(_ why: String) -> SurfaceError { SurfaceError(.invalidHandle, "Surface.importing: \(why)") }
        guard descriptorCount >= 1, descriptorCount <= SurfaceHandle.maximumDescriptorCount else {
            throw fail("\(descriptorCount) descriptors")
        }
        guard byteCounts.count == descriptorCount else {
            throw fail("\(byteCounts.count) byte counts for \(descriptorCount) descriptors")
        }
        guard planeDescriptorIndices.count == layout.planes.count else {
            throw fail("\(planeDescriptorIndices.count) descriptor indices for \(layout.planes.count) planes")
        }
        if layout.planes.isEmpty {
            guard descriptorCount == 1 else { throw fail("an opaque surface with \(descriptorCount) descriptors") }
        } else {
            for index in 0..<descriptorCount where !planeDescriptorIndices.contains(index) {
                throw fail("descriptor \(index) holds no plane")
            }
        }
        var total = 0
        for byteCount in byteCounts {
            guard byteCount > 0, byteCount <= SurfaceLayout.maximumAllocationSize else {
                throw fail("descriptor byte count \(byteCount)")
            }
            total += byteCount  // at most 4 × 2³²: cannot overflow
        }
        guard total == layout.allocationSize else {
            throw fail("descriptor byte counts add up to \(total), layout says \(layout.allocationSize)")
        }
        // Bounds every plane's numbers, so the products and sums below cannot overflow.
        try layout.validate()
        for (plane, descriptorIndex) in zip(layout.planes, planeDescriptorIndices) {
            guard descriptorIndex >= 0, descriptorIndex < descriptorCount else {
                throw fail("descriptor index \(descriptorIndex) of \(descriptorCount)")
            }
            guard plane.offset + plane.byteCount <= byteCounts[descriptorIndex] else {
                throw fail("a plane ends past its descriptor's \(byteCounts[descriptorIndex]) bytes")
            }
        }
    }

    static func checkSealedAndLargeEnough(_ descriptor: FileDescriptor, byteCount: Int) throws(SurfaceError) {
        let seals: Int32
        switch Syscall.seals(descriptor) {
        case .success(let value): seals = value
        case .failure(.invalidArgument): throw SurfaceError(.notAMemFD, "fcntl(F_GET_SEALS)", errno: .invalidArgument)
        case .failure(let errno): throw SurfaceError(.systemCall, "fcntl(F_GET_SEALS)", errno: errno)
        }
        let required = MemFD.sealShrink | MemFD.sealGrow
        guard seals & required == required else {
            throw SurfaceError(.notSealed, "Surface.importing: seals 0x\(String(seals, radix: 16))")
        }
        // Without a write seal, whoever holds the file can reopen it O_RDWR through /proc and write the frame.
        guard seals & (MemFD.sealFutureWrite | MemFD.sealWrite) != 0 else {
            throw SurfaceError(.notWriteSealed, "Surface.importing: seals 0x\(String(seals, radix: 16))")
        }
        let info = try Syscall.fileSize(descriptor).mapError { SurfaceError(.systemCall, "fstat", errno: $0) }.get()
        guard info.byteCount >= byteCount else {
            throw SurfaceError(
                .tooSmall,
                "Surface.importing: file has \(info.byteCount) bytes, layout needs \(byteCount)"
            )
        }
    }
}
