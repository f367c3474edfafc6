/// One shared mapping of a file: a base address and its length. The owner (``Surface``) unmaps it.
@safe struct Mapping: @unchecked Sendable {
    // @unchecked: the pointer is immutable after creation; the bytes it points at are shared memory whose
    // access is bracketed by Surface.lock/unlock, like IOSurface.
    let base: UnsafeMutableRawPointer
    let byteCount: Int

    func unmap() {
        unsafe Syscall.unmap(base, byteCount: byteCount)
    }
}
