import CFrameBusShims
import Glibc
import SystemPackage

/// The system calls `Surfaces` makes, one thin wrapper each.
///
/// Each returns `Result<_, Errno>` built right after the call, so nothing runs between the call and reading
/// `errno`. `EINTR` is retried except where noted.
enum Syscall {
    static func valueOrErrno<I: FixedWidthInteger>(retryOnInterrupt: Bool = true, _ call: () -> I) -> Result<I, Errno> {
        while true {
            let result = call()
            if result != -1 { return .success(result) }
            let error = Errno(rawValue: Glibc.errno)
            if retryOnInterrupt && error == .interrupted { continue }
            return .failure(error)
        }
    }

    /// `memfd_create(2)`.
    static func memfdCreate(name: String, flags: UInt32) -> Result<FileDescriptor, Errno> {
        valueOrErrno { unsafe cfb_memfd_create(name, flags) }.map(FileDescriptor.init(rawValue:))
    }

    /// `ftruncate(2)`.
    static func truncate(_ fd: FileDescriptor, byteCount: Int) -> Result<Void, Errno> {
        valueOrErrno { ftruncate(fd.rawValue, off_t(byteCount)) }.map { _ in () }
    }

    /// `fcntl(F_ADD_SEALS)`.
    static func addSeals(_ fd: FileDescriptor, _ seals: Int32) -> Result<Void, Errno> {
        valueOrErrno { cfb_add_seals(fd.rawValue, seals) }.map { _ in () }
    }

    /// `fcntl(F_GET_SEALS)`.
    static func seals(_ fd: FileDescriptor) -> Result<Int32, Errno> {
        valueOrErrno { cfb_get_seals(fd.rawValue) }
    }

    /// `fcntl(F_GETFL)`.
    static func statusFlags(_ fd: FileDescriptor) -> Result<Int32, Errno> {
        valueOrErrno { cfb_get_status_flags(fd.rawValue) }
    }

    /// `fstat(2)`: the size in bytes and whether it is a regular file.
    static func fileSize(_ fd: FileDescriptor) -> Result<(byteCount: Int, isRegular: Bool, inode: UInt64), Errno> {
        var info = stat()
        return valueOrErrno { unsafe fstat(fd.rawValue, &info) }.map { _ in
            (Int(info.st_size), (info.st_mode & S_IFMT) == S_IFREG, UInt64(info.st_ino))
        }
    }

    /// `mmap(2)` of a whole shared file from offset 0.
    static func mapShared(
        _ fd: FileDescriptor,
        byteCount: Int,
        writable: Bool
    ) -> Result<UnsafeMutableRawPointer, Errno> {
        let protection = writable ? PROT_READ | PROT_WRITE : PROT_READ
        let address = unsafe mmap(nil, byteCount, protection, MAP_SHARED, fd.rawValue, 0)
        let failed = unsafe address == MAP_FAILED
        if failed { return unsafe .failure(Errno(rawValue: Glibc.errno)) }
        guard let address = unsafe address else { return unsafe .failure(.noMemory) }
        return unsafe .success(address)
    }

    /// `munmap(2)`. A failure is a programmer error (we only unmap our own mappings).
    static func unmap(_ address: UnsafeMutableRawPointer, byteCount: Int) {
        let result = unsafe munmap(address, byteCount)
        precondition(result == 0, "munmap of our own mapping failed: errno \(Glibc.errno)")
    }

    /// `madvise(MADV_POPULATE_WRITE)`: allocate and map every page now.
    static func populateWrite(_ address: UnsafeMutableRawPointer, byteCount: Int) -> Result<Void, Errno> {
        valueOrErrno { unsafe cfb_madvise_populate_write(address, byteCount) }.map { _ in () }
    }

    /// `open(2)` (O_CLOEXEC always).
    static func open(_ path: String, flags: Int32) -> Result<FileDescriptor, Errno> {
        valueOrErrno { unsafe Glibc.open(path, flags | O_CLOEXEC) }.map(FileDescriptor.init(rawValue:))
    }

    /// `dup(2)` with close-on-exec.
    static func duplicate(_ fd: FileDescriptor) -> Result<FileDescriptor, Errno> {
        valueOrErrno { fcntl(fd.rawValue, F_DUPFD_CLOEXEC, 0) }.map(FileDescriptor.init(rawValue:))
    }

    /// `close(2)`, never retried (Linux closes the descriptor even when it reports EINTR).
    static func close(_ fd: FileDescriptor) {
        _ = Glibc.close(fd.rawValue)
    }

    /// `DMA_BUF_IOCTL_SYNC`.
    static func dmaBufSync(_ fd: FileDescriptor, flags: UInt64) -> Result<Void, Errno> {
        valueOrErrno { cfb_dma_buf_sync(fd.rawValue, flags) }.map { _ in () }
    }

    /// `DMA_HEAP_IOCTL_ALLOC`.
    static func dmaHeapAllocate(_ heap: FileDescriptor, byteCount: Int) -> Result<FileDescriptor, Errno> {
        valueOrErrno { cfb_dma_heap_alloc(heap.rawValue, UInt64(byteCount)) }.map(FileDescriptor.init(rawValue:))
    }

    /// `UDMABUF_CREATE`.
    static func udmabufCreate(
        _ device: FileDescriptor,
        memfd: FileDescriptor,
        byteCount: Int
    )
        -> Result<FileDescriptor, Errno>
    {
        valueOrErrno { cfb_udmabuf_create(device.rawValue, memfd.rawValue, 0, UInt64(byteCount)) }
            .map(FileDescriptor.init(rawValue:))
    }

    /// `access(2)` with F_OK: whether a device node exists.
    static func exists(_ path: String) -> Bool {
        unsafe Glibc.access(path, F_OK) == 0
    }

    /// The system page size.
    static let pageSize: Int = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// This process's id.
    static var processID: Int32 { getpid() }
}

/// DMA_BUF_SYNC_* flags (checked against linux/dma-buf.h in the shim).
enum DMABufSync {
    static let read = CFB_DMA_BUF_SYNC_READ
    static let write = CFB_DMA_BUF_SYNC_WRITE
    static let readWrite = CFB_DMA_BUF_SYNC_RW
    static let start = CFB_DMA_BUF_SYNC_START
    static let end = CFB_DMA_BUF_SYNC_END
}

/// memfd flags and seals (checked against the kernel headers in the shim).
enum MemFD {
    static let createFlags = CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING
    static let sealShrink = CFB_F_SEAL_SHRINK
    static let sealGrow = CFB_F_SEAL_GROW
    static let sealSeal = CFB_F_SEAL_SEAL
    static let sealWrite = CFB_F_SEAL_WRITE
    static let sealFutureWrite = CFB_F_SEAL_FUTURE_WRITE
}
