// FrameBus's system calls for watching a directory (a waiting subscriber's DirectoryWatch), as an extension of the
// package's one syscall layer (`Syscall` in Surfaces/Internal/Syscalls.swift).
import Glibc
import Surfaces
import SystemPackage

extension Syscall {
    /// `inotify_init1(IN_NONBLOCK | IN_CLOEXEC)`.
    static func inotifyInit() -> Result<Int32, Errno> {
        valueOrErrno { Glibc.inotify_init1(Int32(IN_NONBLOCK) | Int32(IN_CLOEXEC)) }
    }

    /// `inotify_add_watch(2)`: returns the watch descriptor.
    static func inotifyAddWatch(_ descriptor: Int32, path: String, mask: UInt32) -> Result<Int32, Errno> {
        valueOrErrno { unsafe Glibc.inotify_add_watch(descriptor, path, mask) }
    }

    /// `read(2)` of a non-blocking descriptor into `buffer`: the bytes read (`EAGAIN` when there are none).
    static func readAvailable(_ descriptor: Int32, into buffer: inout [UInt8]) -> Result<Int, Errno> {
        let capacity = buffer.count
        return valueOrErrno {
            unsafe buffer.withUnsafeMutableBytes { unsafe Glibc.read(descriptor, $0.baseAddress, capacity) }
        }
    }
}
