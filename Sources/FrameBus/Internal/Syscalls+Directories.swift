// FrameBus's system calls for the private runtime directory (SocketPath's fallback), as an extension of the
// package's one syscall layer (`Syscall` in Surfaces/Internal/Syscalls.swift).
import Glibc
import Surfaces
import SystemPackage

extension Syscall {
    /// What `lstat(2)` says about a path: its type, owner and permission bits. Symbolic links are not followed.
    struct PathStatus: Equatable {
        var isDirectory: Bool
        var isSymbolicLink: Bool
        var ownerID: UInt32
        /// The permission bits (`st_mode & 07777`).
        var permissions: UInt32
    }

    /// `lstat(2)`.
    static func pathStatus(_ path: String) -> Result<PathStatus, Errno> {
        var information = stat()
        return valueOrErrno { unsafe Glibc.lstat(path, &information) }.map { _ in
            PathStatus(
                isDirectory: (information.st_mode & S_IFMT) == S_IFDIR,
                isSymbolicLink: (information.st_mode & S_IFMT) == S_IFLNK,
                ownerID: information.st_uid,
                permissions: information.st_mode & 0o7777
            )
        }
    }

    /// `mkdir(2)` (the mode is reduced by the umask).
    static func makeDirectory(_ path: String, mode: mode_t) -> Result<Void, Errno> {
        valueOrErrno { unsafe Glibc.mkdir(path, mode) }.map { _ in () }
    }

    /// `getenv(3)`: the variable's value, or `nil` when it is unset or not UTF-8.
    static func environmentVariable(_ name: String) -> String? {
        guard let value = unsafe Glibc.getenv(name) else { return nil }
        return unsafe String(validatingCString: value)
    }

    /// `getuid(2)`: cannot fail.
    static func userID() -> UInt32 {
        Glibc.getuid()
    }
}
