import Glibc
import SystemPackage

extension Syscall {
    /// `fstat(2)`'s `st_blocks` in bytes: the memory a file has allocated (for a memfd, its committed pages,
    /// swapped out or not), as opposed to its size, which a sparse file does not back.
    package static func allocatedByteCount(_ fd: FileDescriptor) -> Result<Int, Errno> {
        var info = stat()
        return valueOrErrno { unsafe fstat(fd.rawValue, &info) }.map { _ in
            // st_blocks counts 512-byte units whatever the file system's block size.
            let blocks = max(0, Int(info.st_blocks))
            return blocks > Int.max / 512 ? Int.max : blocks * 512
        }
    }
}
