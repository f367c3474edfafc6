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
    ///   non-linear modifier), ``SurfaceError/Code-swift.struct/systemCall``.
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
        guard modifier == DRMModifier.linear else {
            throw SurfaceError(
                .invalidLayout,
                "Surface.importDMABuf: modifier 0x\(String(modifier, radix: 16)) is not linear"
            )
        }
        // Group planes by buffer (same inode), so each buffer is duplicated and mapped once.
        var descriptors: [FileDescriptor] = []
        var mappings: [Mapping] = []
        var inodes: [UInt64] = []
        var locations: [(mapping: Int, offset: Int)] = []
        var planeLayouts = layout.planes
        func cleanUp() {
            for mapping in mappings { mapping.unmap() }
            for descriptor in descriptors { Syscall.close(descriptor) }
        }
        do throws(SurfaceError) {
            var totalSize = 0
            for (index, plane) in planes.enumerated() {
                let info = try Syscall.fileSize(plane.descriptor)
                    .mapError { SurfaceError(.systemCall, "fstat(dma-buf)", errno: $0) }.get()
                // A DMA-BUF reports its size through lseek(SEEK_END) on most exporters and st_size on some;
                // st_size is 0 when unknown, so trust the plane geometry only when the size is reported.
                let bufferIndex: Int
                if let existing = inodes.firstIndex(of: info.inode) {
                    bufferIndex = existing
                } else {
                    let duplicate = try Syscall.duplicate(plane.descriptor)
                        .mapError { SurfaceError(.systemCall, "fcntl(F_DUPFD_CLOEXEC)", errno: $0) }.get()
                    descriptors.append(duplicate)
                    let size = info.byteCount > 0 ? info.byteCount : layout.allocationSize
                    switch Mapping.map(duplicate, byteCount: size, writable: !readOnly) {
                    case .success(let mapping): mappings.append(mapping)
                    case .failure(let errno): throw SurfaceError(.systemCall, "mmap(dma-buf)", errno: errno)
                    }
                    inodes.append(info.inode)
                    totalSize += size
                    bufferIndex = mappings.count - 1
                }
                planeLayouts[index].offset = plane.offset
                planeLayouts[index].bytesPerRow = plane.bytesPerRow
                let (end, overflow) = plane.offset.addingReportingOverflow(planeLayouts[index].byteCount)
                guard plane.offset >= 0, !overflow, end <= mappings[bufferIndex].byteCount,
                    plane.bytesPerRow >= planeLayouts[index].width * planeLayouts[index].bytesPerElement
                else {
                    throw SurfaceError(.invalidLayout, "Surface.importDMABuf: plane \(index) outside its buffer")
                }
                locations.append((bufferIndex, plane.offset))
            }
            var finalLayout = layout
            finalLayout.planes = planeLayouts
            finalLayout.allocationSize = mappings.count == 1 ? mappings[0].byteCount : totalSize
            return Surface(
                id: id,
                layout: finalLayout,
                backing: .dmaBuf(modifier: modifier),
                isReadOnly: readOnly,
                descriptors: descriptors,
                mappings: mappings,
                planeLocations: locations
            )
        } catch {
            cleanUp()
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
