import SystemPackage

/// One shared mapping of a file: a base address and its length. The owner (``Surface``) unmaps it.
@safe struct Mapping: @unchecked Sendable {
    // @unchecked: the pointer is immutable after creation; the bytes it points at are shared memory whose
    // access is bracketed by Surface.lock/unlock, like IOSurface.
    let base: UnsafeMutableRawPointer
    let byteCount: Int

    /// Maps `byteCount` bytes of `descriptor` from offset 0, shared (`mmap(2)`).
    static func map(_ descriptor: FileDescriptor, byteCount: Int, writable: Bool) -> Result<Mapping, Errno> {
        unsafe Syscall.mapShared(descriptor, byteCount: byteCount, writable: writable).map {
            unsafe Mapping(base: $0, byteCount: byteCount)
        }
    }

    /// Allocates and maps every page now rather than on first touch.
    func populate() {
        if case .success = unsafe Syscall.populateWrite(base, byteCount: byteCount) { return }
        // Kernels before 5.14 lack MADV_POPULATE_WRITE: touch one byte per page (a new memfd is zero-filled).
        var offset = 0
        while offset < byteCount {
            unsafe base.storeBytes(of: 0, toByteOffset: offset, as: UInt8.self)
            offset += Syscall.pageSize
        }
    }

    /// The bytes from `offset`, `count` long.
    ///
    /// - Precondition: the range lies inside the mapping (layouts are validated against the file before mapping).
    @unsafe func bytes(from offset: Int, count: Int) -> UnsafeMutableRawBufferPointer {
        precondition(offset >= 0 && count >= 0 && offset + count <= byteCount, "range outside the mapping")
        return unsafe UnsafeMutableRawBufferPointer(start: base + offset, count: count)
    }

    func unmap() {
        unsafe Syscall.unmap(base, byteCount: byteCount)
    }
}
