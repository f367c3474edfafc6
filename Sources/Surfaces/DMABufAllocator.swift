import SystemPackage

/// Where DMA-BUF surfaces come from on machines that have the device nodes.
///
/// ```swift
/// let allocator = DMABufAllocator.systemHeap
/// guard allocator.isAvailable else { ... }   // no /dev/dma_heap/system here
/// let surface = try allocator.makeSurface(layout: layout)
/// ```
public struct DMABufAllocator: Hashable, Sendable {
    /// Which kernel interface allocates.
    public enum Kind: Hashable, Sendable {
        /// A DMA heap (`/dev/dma_heap/<name>`), `DMA_HEAP_IOCTL_ALLOC`.
        case dmaHeap
        /// `/dev/udmabuf`: a sealed memfd turned into a DMA-BUF with `UDMABUF_CREATE`.
        case udmabuf
    }

    /// The allocator's kind.
    public let kind: Kind
    /// The device node it opens.
    public let devicePath: String

    /// The system DMA heap, `/dev/dma_heap/system`.
    public static let systemHeap = DMABufAllocator(kind: .dmaHeap, devicePath: "/dev/dma_heap/system")
    /// `/dev/udmabuf`.
    public static let udmabuf = DMABufAllocator(kind: .udmabuf, devicePath: "/dev/udmabuf")

    public init(kind: Kind, devicePath: String) {
        self.kind = kind
        self.devicePath = devicePath
    }

    /// Whether the device node exists on this machine.
    public var isAvailable: Bool { Syscall.exists(devicePath) }

    /// Allocates a linear DMA-BUF surface for `layout` and maps it read-write.
    ///
    /// - Throws: ``SurfaceError/Code-swift.struct/deviceUnavailable`` naming the device node when it is absent;
    ///   ``SurfaceError/Code-swift.struct/invalidLayout``; ``SurfaceError/Code-swift.struct/systemCall``.
    public func makeSurface(layout: SurfaceLayout) throws(SurfaceError) -> Surface {
        try layout.validate()
        guard isAvailable else {
            throw SurfaceError(.deviceUnavailable, "open(\(devicePath))", errno: .noSuchFileOrDirectory)
        }
        // Both interfaces allocate whole pages.
        let pageSize = Syscall.pageSize
        let byteCount = (layout.allocationSize + pageSize - 1) / pageSize * pageSize
        let device = try Syscall.open(devicePath, flags: FileDescriptor.AccessMode.readWrite.rawValue)
            .mapError { SurfaceError(.systemCall, "open(\(devicePath))", errno: $0) }.get()
        defer { Syscall.close(device) }
        let buffer: FileDescriptor
        switch kind {
        case .dmaHeap:
            buffer = try Syscall.dmaHeapAllocate(device, byteCount: byteCount)
                .mapError { SurfaceError(.systemCall, "DMA_HEAP_IOCTL_ALLOC", errno: $0) }.get()
        case .udmabuf:
            // udmabuf needs a memfd sealed against shrinking and not sealed against writes.
            let memfd = try Syscall.memfdCreate(name: "framebus-udmabuf", flags: MemFD.createFlags)
                .mapError { SurfaceError(.systemCall, "memfd_create", errno: $0) }.get()
            defer { Syscall.close(memfd) }
            try Syscall.truncate(memfd, byteCount: byteCount)
                .mapError { SurfaceError(.systemCall, "ftruncate", errno: $0) }.get()
            try Syscall.addSeals(memfd, MemFD.sealShrink)
                .mapError { SurfaceError(.systemCall, "fcntl(F_ADD_SEALS)", errno: $0) }.get()
            buffer = try Syscall.udmabufCreate(device, memfd: memfd, byteCount: byteCount)
                .mapError { SurfaceError(.systemCall, "UDMABUF_CREATE", errno: $0) }.get()
        }
        defer { Syscall.close(buffer) }
        var sized = layout
        sized.allocationSize = byteCount
        let planes = layout.planes.map {
            DMABufPlane(descriptor: buffer, offset: $0.offset, bytesPerRow: $0.bytesPerRow)
        }
        return try Surface.importDMABuf(planes: planes, layout: sized, modifier: DRMModifier.linear, readOnly: false)
    }
}
