import SystemPackage

/// What another process needs to map a surface: a descriptor plus the layout and identity.
///
/// A handle owns its descriptor and closes it when it goes away unless ownership is taken with
/// ``takeDescriptor()`` (to send it) or it is consumed by ``Surface/importing(_:)``.
public struct SurfaceHandle: ~Copyable {
    /// The surface's identifier (the exporter's).
    public let id: SurfaceID
    /// The memory layout the importer must check against the file.
    public let layout: SurfaceLayout
    /// What backs it.
    public let backing: Surface.Backing
    private var descriptor: FileDescriptor?

    /// Wraps a descriptor received from another process, taking ownership of it.
    public init(id: SurfaceID, layout: SurfaceLayout, backing: Surface.Backing = .memfd, descriptor: FileDescriptor) {
        self.id = id
        self.layout = layout
        self.backing = backing
        self.descriptor = descriptor
    }

    /// The descriptor, still owned by the handle (for sending it with `SCM_RIGHTS`).
    public var borrowedDescriptor: FileDescriptor {
        guard let descriptor else { preconditionFailure("SurfaceHandle used after its descriptor was taken") }
        return descriptor
    }

    /// Gives up ownership of the descriptor; the caller must close it.
    public consuming func takeDescriptor() -> FileDescriptor {
        let taken = borrowedDescriptor
        descriptor = nil
        return taken
    }

    deinit {
        if let descriptor { Syscall.close(descriptor) }
    }
}

extension Surface {
    /// Makes a handle for another process: for a memfd, a new read-only descriptor of the same file (reopened
    /// through `/proc/self/fd/N` with `O_RDONLY`), so no consumer can write into a frame others are reading.
    /// For a DMA-BUF, a duplicate of the descriptor (DMA-BUFs cannot be reopened).
    ///
    /// - Throws: ``SurfaceError/Code-swift.struct/systemCall`` if the reopen fails (for example, no `/proc`).
    public func makeHandle() throws(SurfaceError) -> SurfaceHandle {
        let exported: FileDescriptor
        switch backing {
        case .memfd:
            exported = try Syscall.open(
                "/proc/self/fd/\(descriptors[0].rawValue)",
                flags: SystemPackage.FileDescriptor
                    .AccessMode.readOnly.rawValue
            )
            .mapError { SurfaceError(.systemCall, "open(/proc/self/fd, O_RDONLY)", errno: $0) }.get()
        case .dmaBuf:
            guard descriptors.count == 1 else {
                throw SurfaceError(
                    .invalidHandle,
                    "Surface.makeHandle: a multi-descriptor DMA-BUF has no single handle"
                )
            }
            exported = try Syscall.duplicate(descriptors[0])
                .mapError { SurfaceError(.systemCall, "fcntl(F_DUPFD_CLOEXEC)", errno: $0) }.get()
        }
        return SurfaceHandle(id: id, layout: layout, backing: backing, descriptor: exported)
    }

    /// Imports a surface from a handle that came from another process, read-only.
    ///
    /// The file must be a memfd sealed with at least `F_SEAL_SHRINK` and `F_SEAL_GROW` (otherwise a peer could
    /// shrink it and make us SIGBUS), sealed against writes with `F_SEAL_FUTURE_WRITE` or `F_SEAL_WRITE` (otherwise
    /// anyone holding it could reopen it writable and change what others read), and at least as large as the layout
    /// says. The file is mapped once here.
    /// A DMA-BUF handle is imported with ``importDMABuf(planes:layout:modifier:readOnly:)`` instead.
    ///
    /// - Throws: ``SurfaceError/Code-swift.struct/invalidLayout``, ``SurfaceError/Code-swift.struct/notAMemFD``,
    ///   ``SurfaceError/Code-swift.struct/notSealed``, ``SurfaceError/Code-swift.struct/notWriteSealed``,
    ///   ``SurfaceError/Code-swift.struct/tooSmall``,
    ///   ``SurfaceError/Code-swift.struct/systemCall``. The descriptor is closed on failure.
    public static func importing(_ handle: consuming SurfaceHandle) throws(SurfaceError) -> Surface {
        let id = handle.id
        let layout = handle.layout
        let backing = handle.backing
        let descriptor = handle.takeDescriptor()
        do throws(SurfaceError) {
            if case .dmaBuf(let modifier) = backing {
                // importDMABuf duplicates what it keeps; the handle's descriptor is closed below.
                defer { Syscall.close(descriptor) }
                let planes = layout.planes.map {
                    DMABufPlane(descriptor: descriptor, offset: $0.offset, bytesPerRow: $0.bytesPerRow)
                }
                return try importDMABuf(planes: planes, layout: layout, modifier: modifier, readOnly: true, id: id)
            }
            try layout.validate()
            try checkSealedAndLargeEnough(descriptor, layout: layout)
            let mapping = try Mapping.map(descriptor, byteCount: layout.allocationSize, writable: false)
                .mapError { SurfaceError(.systemCall, "mmap", errno: $0) }.get()
            return Surface(
                id: id,
                layout: layout,
                backing: .memfd,
                isReadOnly: true,
                descriptors: [descriptor],
                mappings: [mapping],
                planeLocations: layout.planes.map { (0, $0.offset) }
            )
        } catch {
            if case .memfd = backing { Syscall.close(descriptor) }
            throw error
        }
    }

    static func checkSealedAndLargeEnough(_ descriptor: FileDescriptor, layout: SurfaceLayout) throws(SurfaceError) {
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
        guard info.byteCount >= layout.allocationSize else {
            throw SurfaceError(
                .tooSmall,
                "Surface.importing: file has \(info.byteCount) bytes, layout needs \(layout.allocationSize)"
            )
        }
    }
}
