import SystemPackage

/// DMA-BUF descriptors over a memfd surface's memory, made with `/dev/udmabuf`: a device imports them and writes
/// the surface's memory directly. Closed when this goes away; they are the owner's alone (never sent to a peer).
public final class UDMABufDescriptors: Sendable {
    /// One DMA-BUF per memfd of the surface, in the surface's descriptor order (one for all planes, or one per
    /// plane).
    public let descriptors: [FileDescriptor]
    /// Each DMA-BUF's size in bytes (whole pages).
    public let byteCounts: [Int]

    init(descriptors: [FileDescriptor], byteCounts: [Int]) {
        self.descriptors = descriptors
        self.byteCounts = byteCounts
    }

    deinit { for descriptor in descriptors { Syscall.close(descriptor) } }
}

extension Surface {
    /// Makes a sealed memfd surface, as ``makeMemFD(layout:name:descriptorPerPlane:)`` does, together with a
    /// udmabuf DMA-BUF over each of its memfds, so that a device (a V4L2 capture with `V4L2_MEMORY_DMABUF`) writes
    /// the very memory the surface's memfds carry to subscribers.
    ///
    /// `UDMABUF_CREATE` needs a memfd sealed `F_SEAL_SHRINK`, not sealed against writes, and whole pages. So each
    /// memfd is sized to whole pages, sealed `F_SEAL_SHRINK | F_SEAL_GROW`, mapped read-write, wrapped with
    /// `UDMABUF_CREATE`, and only then sealed `F_SEAL_FUTURE_WRITE | F_SEAL_SEAL`: the surface is then sealed
    /// exactly as any other memfd surface (no peer can map it writable), while the DMA-BUF made before the seal
    /// keeps the device's write access. With one memfd for all planes the layout's allocation size is rounded up to
    /// whole pages; with one per plane, plane offsets become 0 as ``makeMemFD(layout:name:descriptorPerPlane:)``
    /// describes.
    ///
    /// - Parameters:
    ///   - layout: the memory layout; validated first.
    ///   - name: the memfds' name, shown in `/proc/PID/fd`.
    ///   - descriptorPerPlane: one memfd (and DMA-BUF) per plane, or one for all planes.
    ///   - minimumByteCounts: the least size of each memfd (a device's buffer may need more than its planes, such as
    ///     a V4L2 driver's `sizeimage`); empty for none. Sizes are rounded up to whole pages.
    ///   - devicePath: the udmabuf device node.
    /// - Throws: ``SurfaceError/Code-swift.struct/deviceUnavailable`` naming the node when it is absent;
    ///   ``SurfaceError/Code-swift.struct/invalidLayout``; ``SurfaceError/Code-swift.struct/systemCall``.
    public static func makeMemFDWithUDMABufs(
        layout: SurfaceLayout,
        name: String = "framebus-udmabuf",
        descriptorPerPlane: Bool = false,
        minimumByteCounts: [Int] = [],
        devicePath: String = DMABufAllocator.udmabuf.devicePath
    ) throws(SurfaceError) -> (surface: Surface, udmabufs: UDMABufDescriptors) {
        try layout.validate()
        guard Syscall.exists(devicePath) else {
            throw SurfaceError(.deviceUnavailable, "open(\(devicePath))", errno: .noSuchFileOrDirectory)
        }
        let pageSize = Syscall.pageSize
        // validate() bounds sizes to 2^36 bytes, so rounding up cannot overflow.
        func pages(_ byteCount: Int) -> Int { (byteCount + pageSize - 1) / pageSize * pageSize }
        var sized = layout
        let perPlane = descriptorPerPlane && !layout.planes.isEmpty
        var byteCounts: [Int]
        if perPlane {
            byteCounts = layout.planes.map { pages($0.byteCount) }
            for index in sized.planes.indices { sized.planes[index].offset = 0 }
        } else {
            byteCounts = [pages(layout.allocationSize)]
        }
        guard minimumByteCounts.isEmpty || minimumByteCounts.count == byteCounts.count else {
            throw SurfaceError(.invalidLayout, "Surface.makeMemFDWithUDMABufs: \(minimumByteCounts.count) sizes")
        }
        for (index, minimum) in minimumByteCounts.enumerated() {
            guard minimum >= 0, minimum <= SurfaceLayout.maximumAllocationSize else {
                throw SurfaceError(.invalidLayout, "Surface.makeMemFDWithUDMABufs: size \(minimum)")
            }
            byteCounts[index] = max(byteCounts[index], pages(minimum))
        }
        sized.allocationSize = byteCounts.reduce(0, +)
        try sized.validate()
        let device = try Syscall.open(devicePath, flags: FileDescriptor.AccessMode.readWrite.rawValue)
            .mapError { SurfaceError(.systemCall, "open(\(devicePath))", errno: $0) }.get()
        defer { Syscall.close(device) }
        var memfds: [FileDescriptor] = []
        var mappings: [Mapping] = []
        var udmabufs: [FileDescriptor] = []
        do throws(SurfaceError) {
            for byteCount in byteCounts {
                let memfd = try Syscall.memfdCreate(name: name, flags: MemFD.createFlags)
                    .mapError { SurfaceError(.systemCall, "memfd_create", errno: $0) }.get()
                memfds.append(memfd)
                try Syscall.truncate(memfd, byteCount: byteCount)
                    .mapError { SurfaceError(.systemCall, "ftruncate", errno: $0) }.get()
                try Syscall.addSeals(memfd, MemFD.sealShrink | MemFD.sealGrow)
                    .mapError { SurfaceError(.systemCall, "fcntl(F_ADD_SEALS)", errno: $0) }.get()
                let mapping = try Mapping.map(memfd, byteCount: byteCount, writable: true)
                    .mapError { SurfaceError(.systemCall, "mmap", errno: $0) }.get()
                mappings.append(mapping)
                mapping.populate()
                udmabufs.append(
                    try Syscall.udmabufCreate(device, memfd: memfd, byteCount: byteCount)
                        .mapError { SurfaceError(.systemCall, "UDMABUF_CREATE", errno: $0) }.get()
                )
                // After UDMABUF_CREATE, which refuses a memfd sealed against writes: from now on only the surface's
                // mapping and the device (through the DMA-BUF) write.
                try Syscall.addSeals(memfd, MemFD.sealFutureWrite | MemFD.sealSeal)
                    .mapError { SurfaceError(.systemCall, "fcntl(F_ADD_SEALS)", errno: $0) }.get()
            }
        } catch {
            for mapping in mappings { mapping.unmap() }
            for descriptor in memfds + udmabufs { Syscall.close(descriptor) }
            throw error
        }
        let surface = Surface(
            id: .next(),
            layout: sized,
            backing: .memfd,
            isReadOnly: false,
            descriptors: memfds,
            mappings: mappings,
            planeLocations: perPlane ? sized.planes.indices.map { ($0, 0) } : sized.planes.map { (0, $0.offset) }
        )
        return (surface, UDMABufDescriptors(descriptors: udmabufs, byteCounts: byteCounts))
    }
}
