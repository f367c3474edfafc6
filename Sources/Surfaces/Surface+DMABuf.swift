import SystemPackage

/// One plane of a DMA-BUF: the descriptor holding it, where it starts, and its stride.
public struct DMABufPlane: Hashable, Sendable {
    /// The DMA-BUF descriptor (not owned: ``Surface/importDMABuf(planes:layout:modifier:readOnly:)`` duplicates it).
    public var descriptor: FileDescriptor
    /// Byte offset of the plane inside the buffer.
    public var offset: Int
    /// Stride in bytes.
    public var bytesPerRow: Int

    public init(descriptor: FileDescriptor, offset: Int, bytesPerRow: Int) {
        self.descriptor = descriptor
        self.offset = offset
        self.bytesPerRow = bytesPerRow
    }
}

extension Surface {
    /// Imports a DMA-BUF (one descriptor, or one per plane) with per-plane offsets and strides and a DRM format
    /// modifier.
    ///
    /// Each distinct buffer is duplicated and mapped once; CPU access through ``lock(_:)``/``unlock(_:)`` is
    /// bracketed with `DMA_BUF_IOCTL_SYNC`. Only linear buffers (`DRM_FORMAT_MOD_LINEAR`) can be read with the CPU:
    /// a tiled or compressed modifier is refused.
    ///
    /// - Parameters:
    ///   - planes: one entry per plane of `layout`; their offsets and strides replace the layout's.
    ///   - layout: the image layout; `allocationSize` is taken from the buffers' sizes.
    ///   - modifier: the DRM format modifier.
    ///   - readOnly: map read-only.
    /// - Throws: ``SurfaceError/Code-swift.struct/invalidLayout`` (plane count, a plane outside its buffer, a
    ///   non-linear modifier), ``SurfaceError/Code-swift.struct/notADMABuf`` (a descriptor that is not a DMA-BUF),
    ///   ``SurfaceError/Code-swift.struct/systemCall``.
    public static func importDMABuf(
        planes: [DMABufPlane],
        layout: SurfaceLayout,
        modifier: UInt64,
        readOnly: Bool = false
    ) throws(SurfaceError) -> Surface {
        try importDMABuf(planes: planes, layout: layout, modifier: modifier, readOnly: readOnly, id: .next())
    }

    static func importDMABuf(
        planes: [DMABufPlane],
        layout: SurfaceLayout,
        modifier: UInt64,
        readOnly: Bool,
        id: SurfaceID
    ) throws(SurfaceError) -> Surface {
        guard planes.count == layout.planes.count, !planes.isEmpty else {
            throw SurfaceError(
                .invalidLayout,
                "Surface.importDMABuf: \(planes.count) planes for \(layout.planes.count)"
            )
        }
        // Group planes by buffer (same inode), so each buffer is duplicated and mapped once.
        var descriptors: [FileDescriptor] = []
        var inodes: [UInt64] = []
        var planeDescriptorIndices: [Int] = []
        var planeLayouts = layout.planes
        for (index, plane) in planes.enumerated() {
            let info = try Syscall.fileSize(plane.descriptor)
                .mapError { SurfaceError(.systemCall, "fstat(dma-buf)", errno: $0) }.get()
            if let existing = inodes.firstIndex(of: info.inode) {
                planeDescriptorIndices.append(existing)
            } else {
                inodes.append(info.inode)
                descriptors.append(plane.descriptor)
                planeDescriptorIndices.append(descriptors.count - 1)
            }
            planeLayouts[index].offset = plane.offset
            planeLayouts[index].bytesPerRow = plane.bytesPerRow
        }
        var planeLayout = layout
        planeLayout.planes = planeLayouts
        return try importDMABuf(
            descriptors: descriptors,
            byteCounts: nil,
            planeDescriptorIndices: planeDescriptorIndices,
            layout: planeLayout,
            modifier: modifier,
            readOnly: readOnly,
            id: id
        )
    }

    /// Imports DMA-BUF `descriptors` (borrowed: each is duplicated), plane `i` living in
    /// `descriptors[planeDescriptorIndices[i]]` at its layout offset.
    ///
    /// - Parameter byteCounts: the bytes of each buffer to map (a handle's), which the buffer must have when it
    ///   reports a size; `nil` maps each buffer's reported size (or the layout's allocation size if it reports 0).
    static func importDMABuf(
        descriptors borrowed: [FileDescriptor],
        byteCounts: [Int]?,
        planeDescriptorIndices: [Int],
        layout: SurfaceLayout,
        modifier: UInt64,
        readOnly: Bool,
        id: SurfaceID
    ) throws(SurfaceError) -> Surface {
        guard modifier == DRMModifier.linear else {
            throw SurfaceError(
                .invalidLayout,
                "Surface.importDMABuf: modifier 0x\(String(modifier, radix: 16)) is not linear"
            )
        }
        var descriptors: [FileDescriptor] = []
        var mappings: [Mapping] = []
        do throws(SurfaceError) {
            for (index, descriptor) in borrowed.enumerated() {
                // Only a real DMA-BUF has a size fixed at export: anything else (a memfd, a file) could be shrunk by
                // its sender under our mapping and make us SIGBUS.
                let fileSystem = try Syscall.fileSystemType(descriptor)
                    .mapError { SurfaceError(.systemCall, "fstatfs(dma-buf)", errno: $0) }.get()
                guard fileSystem == DMABufSync.fileSystemMagic else {
                    throw SurfaceError(
                        .notADMABuf,
                        "Surface.importDMABuf: file system 0x\(String(fileSystem, radix: 16))"
                    )
                }
                let info = try Syscall.fileSize(descriptor)
                    .mapError { SurfaceError(.systemCall, "fstat(dma-buf)", errno: $0) }.get()
                // Exporters report a DMA-BUF's size in st_size (0 when unknown): map what the handle says, which
                // the buffer must hold, or else what the buffer reports.
                let size: Int
                if let byteCounts {
                    size = byteCounts[index]
                    guard info.byteCount == 0 || info.byteCount >= size else {
                        throw SurfaceError(
                            .tooSmall,
                            "Surface.importDMABuf: buffer has \(info.byteCount) bytes, handle says \(size)"
                        )
                    }
                } else {
                    size = info.byteCount > 0 ? info.byteCount : layout.allocationSize
                }
                let duplicate = try Syscall.duplicate(descriptor)
                    .mapError { SurfaceError(.systemCall, "fcntl(F_DUPFD_CLOEXEC)", errno: $0) }.get()
                descriptors.append(duplicate)
                switch Mapping.map(duplicate, byteCount: size, writable: !readOnly) {
                case .success(let mapping): mappings.append(mapping)
                case .failure(let errno): throw SurfaceError(.systemCall, "mmap(dma-buf)", errno: errno)
                }
            }
            var finalLayout = layout
            finalLayout.allocationSize = mappings.reduce(0) { $0 + $1.byteCount }
            // Bounds every plane's numbers first, so the sums below cannot overflow.
            try finalLayout.validate()
            for (index, plane) in finalLayout.planes.enumerated() {
                let mapping = planeDescriptorIndices[index]
                guard plane.offset + plane.byteCount <= mappings[mapping].byteCount else {
                    throw SurfaceError(.invalidLayout, "Surface.importDMABuf: plane \(index) outside its buffer")
                }
            }
            return Surface(
                id: id,
                layout: finalLayout,
                backing: .dmaBuf(modifier: modifier),
                isReadOnly: readOnly,
                descriptors: descriptors,
                mappings: mappings,
                planeLocations: finalLayout.planes.enumerated().map {
                    (planeDescriptorIndices[$0.offset], $0.element.offset)
                }
            )
        } catch {
            for mapping in mappings { mapping.unmap() }
            for descriptor in descriptors { Syscall.close(descriptor) }
            throw error
        }
    }
}

/// DRM format modifiers FrameBus understands.
public enum DRMModifier {
    /// `DRM_FORMAT_MOD_LINEAR`: plain row-major memory.
    public static let linear: UInt64 = 0
    /// `DRM_FORMAT_MOD_INVALID`: no modifier was given.
    public static let invalid: UInt64 = 0x00ff_ffff_ffff_ffff
}
