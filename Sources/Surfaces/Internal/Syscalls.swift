import CFrameBusShims
import Glibc
import SystemPackage

/// The package's one system-call layer: a thin wrapper per call, for every module of the package.
///
/// Each wrapper returns `Result<_, Errno>` built right after the call, so nothing runs between the call and reading
/// `errno`. `EINTR` is retried everywhere except on `close`. Programmer errors trap (a failing `munmap` of our own
/// mapping, `EBADF` on `close`); environment errors are returned.
///
/// It lives in the lowest Swift module that makes system calls and is `package`, so higher modules extend it
/// with their own areas in `Internal/Syscalls+<Area>.swift` files (`extension Syscall { ... }`) instead of
/// keeping a second layer with other rules.
package enum Syscall {
    /// Runs `call` until it succeeds or fails with something other than `EINTR` (or with anything, when
    /// `retryOnInterrupt` is false).
    @inline(__always)
    package static func valueOrErrno<I: FixedWidthInteger>(
        retryOnInterrupt: Bool = true,
        _ call: () -> I
    ) -> Result<I, Errno> {
        while true {
            let result = call()
            if result != -1 { return .success(result) }
            let error = Errno(rawValue: Glibc.errno)
            if retryOnInterrupt && error == .interrupted { continue }
            return .failure(error)
        }
    }

    /// `close(2)`, never retried: Linux releases the descriptor even when it reports `EINTR`, so a retry could
    /// close a descriptor another thread has just been given. `EBADF` means we closed something we did not own
    /// (or closed it twice): a bug, so it traps, as in swift-nio. Other errors (`EIO` from a file system) are
    /// ignored: the descriptor is gone either way.
    package static func close(_ descriptor: Int32) {
        let result = Glibc.close(descriptor)
        if result == 0 { return }
        let error = Glibc.errno
        precondition(error != EBADF, "close(\(descriptor)): EBADF (not ours, or closed twice)")
    }

    /// `close(2)` of a `FileDescriptor`; see ``close(_:)-(Int32)``.
    package static func close(_ fd: FileDescriptor) {
        close(fd.rawValue)
    }

    /// Closes each distinct descriptor of `descriptors` once: a list that names one descriptor twice (a caller's
    /// mistake) must not close a number that may by then belong to someone else.
    package static func closeEach(_ descriptors: [FileDescriptor]) {
        var closed: Set<Int32> = []
        for descriptor in descriptors where closed.insert(descriptor.rawValue).inserted { close(descriptor) }
    }

    /// `memfd_create(2)`.
    package static func memfdCreate(name: String, flags: UInt32) -> Result<FileDescriptor, Errno> {
        valueOrErrno { unsafe cfb_memfd_create(name, flags) }.map(FileDescriptor.init(rawValue:))
    }

    /// `ftruncate(2)`.
    package static func truncate(_ fd: FileDescriptor, byteCount: Int) -> Result<Void, Errno> {
        valueOrErrno { ftruncate(fd.rawValue, off_t(byteCount)) }.map { _ in () }
    }

    /// `fcntl(F_ADD_SEALS)`.
    package static func addSeals(_ fd: FileDescriptor, _ seals: Int32) -> Result<Void, Errno> {
        valueOrErrno { cfb_add_seals(fd.rawValue, seals) }.map { _ in () }
    }

    /// `fcntl(F_GET_SEALS)`.
    package static func seals(_ fd: FileDescriptor) -> Result<Int32, Errno> {
        valueOrErrno { cfb_get_seals(fd.rawValue) }
    }

    /// `fcntl(F_GETFL)`.
    package static func statusFlags(_ fd: FileDescriptor) -> Result<Int32, Errno> {
        valueOrErrno { cfb_get_status_flags(fd.rawValue) }
    }

    /// `fstat(2)`: the size in bytes and whether it is a regular file.
    package static func fileSize(
        _ fd: FileDescriptor
    ) -> Result<(byteCount: Int, isRegular: Bool, inode: UInt64), Errno> {
        var info = stat()
        return valueOrErrno { unsafe fstat(fd.rawValue, &info) }.map { _ in
            (Int(info.st_size), (info.st_mode & S_IFMT) == S_IFREG, UInt64(info.st_ino))
        }
    }

    /// `fstatfs(2)`: the type of the file system `fd` lives on (`f_type`).
    package static func fileSystemType(_ fd: FileDescriptor) -> Result<Int, Errno> {
        var type = 0
        return valueOrErrno { unsafe cfb_file_system_type(fd.rawValue, &type) }.map { _ in type }
    }

    /// `mmap(2)` of a whole shared file from offset 0.
    package static func mapShared(
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
    package static func unmap(_ address: UnsafeMutableRawPointer, byteCount: Int) {
        let result = unsafe munmap(address, byteCount)
        precondition(result == 0, "munmap of our own mapping failed: errno \(Glibc.errno)")
    }

    /// `madvise(MADV_POPULATE_WRITE)`: allocate and map every page now.
    package static func populateWrite(_ address: UnsafeMutableRawPointer, byteCount: Int) -> Result<Void, Errno> {
        valueOrErrno { unsafe cfb_madvise_populate_write(address, byteCount) }.map { _ in () }
    }

    /// `open(2)` (O_CLOEXEC always).
    package static func open(_ path: String, flags: Int32) -> Result<FileDescriptor, Errno> {
        valueOrErrno { unsafe Glibc.open(path, flags | O_CLOEXEC) }.map(FileDescriptor.init(rawValue:))
    }

    /// `dup(2)` with close-on-exec.
    package static func duplicate(_ fd: FileDescriptor) -> Result<FileDescriptor, Errno> {
        valueOrErrno { fcntl(fd.rawValue, F_DUPFD_CLOEXEC, 0) }.map(FileDescriptor.init(rawValue:))
    }

    /// `DMA_BUF_IOCTL_SYNC`.
    package static func dmaBufSync(_ fd: FileDescriptor, flags: UInt64) -> Result<Void, Errno> {
        valueOrErrno { cfb_dma_buf_sync(fd.rawValue, flags) }.map { _ in () }
    }

    /// `DMA_HEAP_IOCTL_ALLOC`.
    package static func dmaHeapAllocate(_ heap: FileDescriptor, byteCount: Int) -> Result<FileDescriptor, Errno> {
        valueOrErrno { cfb_dma_heap_alloc(heap.rawValue, UInt64(byteCount)) }.map(FileDescriptor.init(rawValue:))
    }

    /// `DMA_HEAP_IOCTL_ALLOC` of a DMA-BUF whose descriptor has `accessMode` (`O_RDONLY`, `O_WRONLY`, `O_RDWR`): what
    /// the exporter lets its importers map (the tests use it to play an exporter that refuses a mapping).
    package static func dmaHeapAllocate(
        _ heap: FileDescriptor,
        byteCount: Int,
        accessMode: FileDescriptor.AccessMode
    ) -> Result<FileDescriptor, Errno> {
        valueOrErrno { cfb_dma_heap_alloc_mode(heap.rawValue, UInt64(byteCount), accessMode.rawValue) }
            .map(FileDescriptor.init(rawValue:))
    }

    /// `UDMABUF_CREATE`.
    package static func udmabufCreate(
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
    package static func exists(_ path: String) -> Bool {
        unsafe Glibc.access(path, F_OK) == 0
    }

    /// `fstat(2)` size of a descriptor.
    package static func fileSize(_ descriptor: Int32) -> Result<Int, Errno> {
        fileSize(FileDescriptor(rawValue: descriptor)).map(\.byteCount)
    }

    /// The system page size.
    package static let pageSize: Int = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// `getuid(2)`.
    package static func userID() -> UInt32 { Glibc.getuid() }

    /// `getpid(2)`.
    package static func processID() -> Int32 { Glibc.getpid() }
}

/// DMA_BUF_SYNC_* flags (checked against linux/dma-buf.h in the shim).
enum DMABufSync {
    static let read = CFB_DMA_BUF_SYNC_READ
    static let write = CFB_DMA_BUF_SYNC_WRITE
    static let readWrite = CFB_DMA_BUF_SYNC_RW
    static let start = CFB_DMA_BUF_SYNC_START
    static let end = CFB_DMA_BUF_SYNC_END
    /// `fstatfs` type of a DMA-BUF.
    static let fileSystemMagic = Int(CFB_DMA_BUF_MAGIC)
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
