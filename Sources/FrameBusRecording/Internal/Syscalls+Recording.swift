// The recorder's file calls, as an extension of the package's one syscall layer (Surfaces/Internal/Syscalls.swift).
import CFrameBusRecordingShims
import Foundation
import Glibc
import Surfaces
import SystemPackage

extension Syscall {
    /// `open(2)` of a new recording for writing (truncating), with `O_DIRECT` when `direct`.
    static func openRecording(_ path: String, direct: Bool) -> Result<Int32, Errno> {
        valueOrErrno { unsafe cfbr_open_recording(path, direct ? 1 : 0) }
    }

    /// `fcntl(F_SETFL)` turning `O_DIRECT` on or off.
    static func setDirect(_ fd: Int32, _ direct: Bool) -> Result<Void, Errno> {
        valueOrErrno { cfbr_set_direct(fd, direct ? 1 : 0) }.map { _ in () }
    }

    /// `pwrite(2)` of all of `bytes` at `offset` (short writes are continued; a zero-byte write is `EIO`).
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Result<Void, Errno> {
        var done = 0
        while done < bytes.count {
            let result = valueOrErrno {
                unsafe pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + Int64(done)))
            }
            switch result {
            case .success(let count):
                if count <= 0 { return .failure(.ioError) }
                done += count
            case .failure(let error): return .failure(error)
            }
        }
        return .success(())
    }

    /// `pread(2)` of `count` bytes at `offset` into a new array, one copy from the page cache (short reads are
    /// continued; end of file before `count` bytes is `.success(nil)`).
    static func readAll(_ fd: Int32, count: Int, at offset: Int64) -> Result<[UInt8]?, Errno> {
        var outcome: Result<Bool, Errno> = .success(false)
        let bytes = unsafe [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            outcome = unsafe readAll(fd, into: UnsafeMutableRawBufferPointer(buffer), at: offset)
            initialized = (try? outcome.get()) == true ? count : 0
        }
        return outcome.map { $0 ? bytes : nil }
    }

    /// `pread(2)` of all of `destination` at `offset` (short reads are continued): true, or false at the end of
    /// the file before it was filled.
    static func readAll(
        _ fd: Int32,
        into destination: UnsafeMutableRawBufferPointer,
        at offset: Int64
    ) -> Result<
        Bool, Errno
    > {
        var done = 0
        while done < destination.count {
            let result = valueOrErrno {
                unsafe pread(fd, destination.baseAddress! + done, destination.count - done, off_t(offset + Int64(done)))
            }
            switch result {
            case .success(let read):
                guard read > 0 else { return .success(false) }
                done += read
            case .failure(let error): return .failure(error)
            }
        }
        return .success(true)
    }

    /// `fallocate(2)` with `FALLOC_FL_KEEP_SIZE`.
    static func reserve(_ fd: Int32, offset: Int64, length: Int64) -> Result<Void, Errno> {
        valueOrErrno { cfbr_reserve(fd, offset, length) }.map { _ in () }
    }

    /// `fdatasync(2)`.
    static func syncData(_ fd: Int32) -> Result<Void, Errno> {
        valueOrErrno { fdatasync(fd) }.map { _ in () }
    }

    /// `sync_file_range(2)`: start writeback of a range, and with `wait` wait for it.
    static func syncRange(_ fd: Int32, offset: Int64, length: Int64, wait: Bool) -> Result<Void, Errno> {
        valueOrErrno { cfbr_sync_range(fd, offset, length, wait ? 1 : 0) }.map { _ in () }
    }

    /// `posix_fadvise(2)` `POSIX_FADV_DONTNEED` (which returns its error instead of setting `errno`).
    static func dropCache(_ fd: Int32, offset: Int64, length: Int64) -> Result<Void, Errno> {
        let result = cfbr_drop_cache(fd, offset, length)
        return result == 0 ? .success(()) : .failure(Errno(rawValue: result))
    }

    /// `ftruncate(2)`.
    static func truncate(_ fd: Int32, to size: Int64) -> Result<Void, Errno> {
        valueOrErrno { ftruncate(fd, off_t(size)) }.map { _ in () }
    }

    /// Bytes an unprivileged writer may still allocate on the descriptor's file system (`fstatvfs(3)`).
    static func availableBytes(_ fd: Int32) -> Result<Int64, Errno> {
        var status = statvfs()
        return valueOrErrno { unsafe fstatvfs(fd, &status) }.map { _ in
            let blocks = Int64(clamping: status.f_bavail)
            let size = Int64(clamping: status.f_frsize)
            let product = blocks.multipliedReportingOverflow(by: size)
            return product.overflow ? .max : product.partialValue
        }
    }

    /// The bytes of a small file another process wrote: a regular file (`O_NOFOLLOW`) owned by one of `owners`, of
    /// at most `limit` bytes (one read of `limit + 1`); nil otherwise.
    static func readSmallFile(_ path: String, ownedBy owners: Set<UInt32>, atMost limit: Int) -> Data? {
        let fd = unsafe Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var info = stat()
        guard unsafe fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, owners.contains(info.st_uid),
            info.st_size >= 0, info.st_size <= limit
        else { return nil }
        var bytes = [UInt8](repeating: 0, count: limit + 1)
        let count = unsafe bytes.withUnsafeMutableBytes { unsafe Glibc.read(fd, $0.baseAddress!, $0.count) }
        guard count > 0, count <= limit else { return nil }
        return Data(bytes[0..<count])
    }

    /// Replaces the file at `path` with `data` (mode 0600): written whole to `path.tmp`, then renamed over it, so a
    /// reader sees the old file or the new one. Failures leave the old file.
    static func replaceFile(_ path: String, with data: Data) {
        let temporary = path + ".tmp"
        let fd = unsafe Glibc.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return }
        let written = unsafe data.withUnsafeBytes { unsafe Glibc.write(fd, $0.baseAddress!, $0.count) }
        Glibc.close(fd)
        guard written == data.count else {
            unsafe unlink(temporary)
            return
        }
        unsafe rename(temporary, path)
    }

    /// `unlink(2)`, its failure ignored.
    static func removeFile(_ path: String) { unsafe unlink(path) }

    /// `close(2)` of a file descriptor we own.
    static func closeFile(_ fd: Int32) { close(fd) }
}
