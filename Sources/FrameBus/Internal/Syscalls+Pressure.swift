// The system calls behind SystemPressureMonitor: pressure stall information (PSI) files and their poll()able triggers,
// thermal zones, and the cgroup v2 directory of this process; as an extension of the package's one syscall layer
// (`Syscall` in Surfaces/Internal/Syscalls.swift).
import Glibc
import Surfaces
import SystemPackage

extension Syscall {
    /// `poll(2)` event of a PSI trigger that fired (`POLLPRI`); `POLLERR` means the file went away (its cgroup was
    /// removed).
    static let pressureTriggerEvent = Int16(POLLPRI)
    static let pressureTriggerError = Int16(POLLERR) | Int16(POLLNVAL)

    /// Opens a PSI file (`/proc/pressure/cpu`, or a cgroup's `cpu.pressure`) and arms a trigger on it: `poll(2)` then
    /// reports `POLLPRI` when the tasks' stall time (`kind` "some" or "full") passed `stallMicroseconds` within a
    /// window of `windowMicroseconds` (docs: the kernel's `Documentation/accounting/psi.rst`; a window must be a
    /// multiple of 2 s without `CAP_SYS_RESOURCE`).
    ///
    /// - Returns: the descriptor, owned by the caller (close it with ``close(_:)-(Int32)``).
    static func openPressureTrigger(
        _ path: String,
        kind: String,
        stallMicroseconds: UInt64,
        windowMicroseconds: UInt64
    ) -> Result<Int32, Errno> {
        let opened = valueOrErrno { unsafe Glibc.open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC) }
        guard case .success(let descriptor) = opened else { return opened }
        // The trigger is written with its terminating NUL, as psi.rst's example does.
        var text = Array("\(kind) \(stallMicroseconds) \(windowMicroseconds)".utf8)
        text.append(0)
        let written = valueOrErrno { unsafe Glibc.write(descriptor, text, text.count) }
        if case .failure(let errno) = written {
            close(descriptor)
            return .failure(errno)
        }
        return .success(descriptor)
    }

    /// The contents of a small text file (a PSI file, a thermal zone's `temp`), read from offset 0 with one `pread`:
    /// at most `maximumSize` bytes; nil when it cannot be opened or read.
    static func readSmallFile(_ path: String, maximumSize: Int = 512) -> String? {
        guard case .success(let descriptor) = valueOrErrno({ unsafe Glibc.open(path, O_RDONLY | O_CLOEXEC) }) else {
            return nil
        }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: maximumSize)
        let count = unsafe bytes.withUnsafeMutableBytes { buffer in
            valueOrErrno { unsafe Glibc.pread(descriptor, buffer.baseAddress, buffer.count, 0) }
        }
        guard case .success(let read) = count, read >= 0 else { return nil }
        return String(decoding: bytes.prefix(read), as: UTF8.self)
    }

    /// The names in a directory (without `.` and `..`), or nil when it cannot be read.
    static func directoryEntries(_ path: String) -> [String]? {
        guard let directory = unsafe Glibc.opendir(path) else { return nil }
        defer { _ = unsafe Glibc.closedir(directory) }
        var names: [String] = []
        while let entry = unsafe Glibc.readdir(directory) {
            let name = unsafe withUnsafeBytes(of: entry.pointee.d_name) { raw in
                unsafe String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Whether a path exists and can be read (`access(2)` with `R_OK`).
    static func isReadable(_ path: String) -> Bool {
        unsafe Glibc.access(path, R_OK) == 0
    }
}
