import SystemPackage

extension Surface {
    /// Makes a surface backed by a new memfd, sealed against shrinking, growing and writes through any mapping but
    /// its own, with every page populated unless asked otherwise.
    ///
    /// The memfd is created with `MFD_CLOEXEC | MFD_ALLOW_SEALING`, sized once to
    /// ``SurfaceLayout/allocationSize``, sealed with `F_SEAL_SHRINK | F_SEAL_GROW`, mapped read-write once, then
    /// sealed with `F_SEAL_FUTURE_WRITE | F_SEAL_SEAL`: from then on only this surface's own mapping can write. No
    /// other process (nor this one) can reopen it writable through `/proc/self/fd`, map it `PROT_WRITE`, or
    /// `write(2)` to it. It is then populated (`MADV_POPULATE_WRITE`, or a write per page on older kernels): a first
    /// touch of a page costs about 3 µs per 4 KiB in a VM, which a frame pool must not pay per frame.
    ///
    /// The corresponding system calls are `memfd_create(2)`, `ftruncate(2)`, `fcntl(F_ADD_SEALS)`, `mmap(2)`.
    ///
    /// - Parameters:
    ///   - layout: the memory layout; validated first.
    ///   - name: the memfd's name, shown in `/proc/PID/fd` (for debugging only).
    ///   - populatesPages: whether every page is allocated now. Pass `false` for a surface that is mostly
    ///     unused, such as a compressed surface sized for the worst case: its pages are then committed only
    ///     when first written, and the rest stay sparse.
    /// - Throws: ``SurfaceError/Code-swift.struct/invalidLayout``, or
    ///   ``SurfaceError/Code-swift.struct/systemCall`` with the errno of the call that failed.
    public static func makeMemFD(
        layout: SurfaceLayout,
        name: String = "framebus",
        populatesPages: Bool = true
    ) throws(SurfaceError) -> Surface {
        try layout.validate()
        let descriptor = try Syscall.memfdCreate(name: name, flags: MemFD.createFlags)
            .mapError { SurfaceError(.systemCall, "memfd_create", errno: $0) }.get()
        do throws(SurfaceError) {
            try Syscall.truncate(descriptor, byteCount: layout.allocationSize)
                .mapError { SurfaceError(.systemCall, "ftruncate", errno: $0) }.get()
            try Syscall.addSeals(descriptor, MemFD.sealShrink | MemFD.sealGrow)
                .mapError { SurfaceError(.systemCall, "fcntl(F_ADD_SEALS)", errno: $0) }.get()
            let mapping = try Mapping.map(descriptor, byteCount: layout.allocationSize, writable: true)
                .mapError { SurfaceError(.systemCall, "mmap", errno: $0) }.get()
            // F_SEAL_FUTURE_WRITE keeps the writable mapping made above and refuses every later one (and write(2));
            // F_SEAL_SEAL, added last, stops anyone from changing the seals again.
            if case .failure(let errno) = Syscall.addSeals(descriptor, MemFD.sealFutureWrite | MemFD.sealSeal) {
                mapping.unmap()
                throw SurfaceError(.systemCall, "fcntl(F_ADD_SEALS)", errno: errno)
            }
            if populatesPages { mapping.populate() }
            return Surface(
                id: .next(),
                layout: layout,
                backing: .memfd,
                isReadOnly: false,
                descriptors: [descriptor],
                mappings: [mapping],
                planeLocations: layout.planes.map { (0, $0.offset) }
            )
        } catch {
            Syscall.close(descriptor)
            throw error
        }
    }
}

extension Surface {
    /// Makes a surface backed by new memfds, one per plane when `descriptorPerPlane` is true, sealed and populated
    /// as ``makeMemFD(layout:name:)`` describes.
    ///
    /// With one memfd per plane, each plane starts at offset 0 of its own memfd, which is sized to the plane's bytes
    /// rounded up to whole pages; the surface's layout then has plane offsets of 0 and an allocation size that is
    /// the sum of the memfds' sizes. Its handle carries one descriptor per plane. Layouts without planes (opaque,
    /// compressed surfaces) always get one memfd.
    ///
    /// - Parameters:
    ///   - layout: the memory layout; validated first. With `descriptorPerPlane`, its plane offsets and allocation
    ///     size are replaced as described above.
    ///   - name: the memfds' name, shown in `/proc/PID/fd` (for debugging only).
    ///   - descriptorPerPlane: one memfd per plane (`true`) or one for all (`false`, as ``makeMemFD(layout:name:)``).
    /// - Throws: ``SurfaceError/Code-swift.struct/invalidLayout``, or
    ///   ``SurfaceError/Code-swift.struct/systemCall`` with the errno of the call that failed.
    public static func makeMemFD(
        layout: SurfaceLayout,
        name: String = "framebus",
        descriptorPerPlane: Bool
    ) throws(SurfaceError) -> Surface {
        guard descriptorPerPlane, !layout.planes.isEmpty else { return try makeMemFD(layout: layout, name: name) }
        try layout.validate()
        let pageSize = Syscall.pageSize
        var planeLayout = layout
        var byteCounts: [Int] = []
        for index in planeLayout.planes.indices {
            planeLayout.planes[index].offset = 0
            // validate() bounds a plane to 2^36 bytes, so rounding up cannot overflow.
            byteCounts.append((layout.planes[index].byteCount + pageSize - 1) / pageSize * pageSize)
        }
        planeLayout.allocationSize = byteCounts.reduce(0, +)
        try planeLayout.validate()
        var descriptors: [FileDescriptor] = []
        var mappings: [Mapping] = []
        do throws(SurfaceError) {
            for byteCount in byteCounts {
                let (descriptor, mapping) = try makeSealedMemFD(name: name, byteCount: byteCount)
                descriptors.append(descriptor)
                mappings.append(mapping)
            }
        } catch {
            for mapping in mappings { mapping.unmap() }
            for descriptor in descriptors { Syscall.close(descriptor) }
            throw error
        }
        return Surface(
            id: .next(),
            layout: planeLayout,
            backing: .memfd,
            isReadOnly: false,
            descriptors: descriptors,
            mappings: mappings,
            planeLocations: planeLayout.planes.indices.map { ($0, 0) }
        )
    }

    /// One memfd of `byteCount` bytes, mapped read-write and sealed as ``makeMemFD(layout:name:)`` seals, populated.
    private static func makeSealedMemFD(
        name: String,
        byteCount: Int
    ) throws(SurfaceError) -> (FileDescriptor, Mapping) {
        let descriptor = try Syscall.memfdCreate(name: name, flags: MemFD.createFlags)
            .mapError { SurfaceError(.systemCall, "memfd_create", errno: $0) }.get()
        do throws(SurfaceError) {
            try Syscall.truncate(descriptor, byteCount: byteCount)
                .mapError { SurfaceError(.systemCall, "ftruncate", errno: $0) }.get()
            try Syscall.addSeals(descriptor, MemFD.sealShrink | MemFD.sealGrow)
                .mapError { SurfaceError(.systemCall, "fcntl(F_ADD_SEALS)", errno: $0) }.get()
            let mapping = try Mapping.map(descriptor, byteCount: byteCount, writable: true)
                .mapError { SurfaceError(.systemCall, "mmap", errno: $0) }.get()
            if case .failure(let errno) = Syscall.addSeals(descriptor, MemFD.sealFutureWrite | MemFD.sealSeal) {
                mapping.unmap()
                throw SurfaceError(.systemCall, "fcntl(F_ADD_SEALS)", errno: errno)
            }
            mapping.populate()
            return (descriptor, mapping)
        } catch {
            Syscall.close(descriptor)
            throw error
        }
    }
}
