// FrameBus's system calls for protocol version 3's rings and wake-ups (eventfd, reading a descriptor's kind), as an
// extension of the package's one syscall layer (`Syscall` in Surfaces/Internal/Syscalls.swift).
import CFrameBusShims
import Glibc
import Surfaces
import SystemPackage

extension Syscall {
    /// `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`.
    static func eventFD() -> Result<Int32, Errno> {
        valueOrErrno { cfb_eventfd_create() }
    }

    /// Adds 1 to an eventfd's counter (`write(2)` of 8 bytes). `EAGAIN` (the counter is at its maximum: the reader
    /// has wake-ups waiting already) is success.
    static func signalEventFD(_ descriptor: Int32) -> Result<Void, Errno> {
        var one: UInt64 = 1
        let result = valueOrErrno { unsafe Glibc.write(descriptor, &one, 8) }
        switch result {
        case .success, .failure(.resourceTemporarilyUnavailable): return .success(())
        case .failure(let errno): return .failure(errno)
        }
    }

    /// Resets an eventfd's counter (`read(2)` of 8 bytes); `EAGAIN` (nothing to read) is success.
    static func drainEventFD(_ descriptor: Int32) -> Result<Void, Errno> {
        var value: UInt64 = 0
        let result = valueOrErrno { unsafe Glibc.read(descriptor, &value, 8) }
        switch result {
        case .success, .failure(.resourceTemporarilyUnavailable): return .success(())
        case .failure(let errno): return .failure(errno)
        }
    }

    /// `fcntl(F_GETFL)` of a raw descriptor.
    static func descriptorStatusFlags(_ descriptor: Int32) -> Result<Int32, Errno> {
        valueOrErrno { cfb_get_status_flags(descriptor) }
    }

    /// What `/proc/self/fd/N` links to, e.g. `anon_inode:[eventfd]` (at most 255 bytes).
    static func descriptorLink(_ descriptor: Int32) -> Result<String, Errno> {
        var buffer = [UInt8](repeating: 0, count: 256)
        let path = "/proc/self/fd/\(descriptor)"
        let count = valueOrErrno { unsafe buffer.withUnsafeMutableBytes { unsafe readlink(path, $0.baseAddress!, 255) } }
        return count.map { String(decoding: buffer[0..<$0], as: UTF8.self) }
    }
}
