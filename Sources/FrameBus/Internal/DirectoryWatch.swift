// A waiting subscriber's ear on its publisher's directory: inotify(7), so that a publisher that appears is noticed
// at once instead of at the next retry. Internal: it wraps a kernel object and parses the kernel's event records.
import Glibc
import Surfaces
import SystemPackage

/// Watches one directory for a name appearing in it (created, linked, moved in, or its attributes changed): the
/// publisher binds a private name and links it to its socket path once it listens, so the name's creation means
/// "connect now".
///
/// The corresponding system calls are `inotify_init1(2)`, `inotify_add_watch(2)` and `read(2)` of the inotify
/// descriptor. Where inotify is not available (`ENOSYS`, the per-user instance or watch limit reached: `EMFILE`,
/// `ENOSPC`), or the directory does not exist yet, ``make(path:)`` returns nil and the caller retries on its
/// interval instead.
@safe final class DirectoryWatch {
    /// Poll this one for `POLLIN`.
    let descriptor: Int32
    /// The last path component watched for.
    private let name: [UInt8]

    private init(descriptor: Int32, name: [UInt8]) {
        self.descriptor = descriptor
        self.name = name
    }

    deinit { Syscall.close(descriptor) }

    /// A watch on the directory of `path` for its last component; nil when inotify or the directory is unavailable.
    static func make(path: String) -> DirectoryWatch? {
        let bytes = Array(path.utf8)
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else {
            return make(directory: ".", name: bytes)
        }
        let directory = slash == 0 ? "/" : String(decoding: bytes[..<slash], as: UTF8.self)
        let name = Array(bytes[(slash + 1)...])
        guard !name.isEmpty else { return nil }
        return make(directory: directory, name: name)
    }

    private static func make(directory: String, name: [UInt8]) -> DirectoryWatch? {
        guard case .success(let descriptor) = Syscall.inotifyInit() else { return nil }
        let mask = UInt32(IN_CREATE) | UInt32(IN_MOVED_TO) | UInt32(IN_ATTRIB) | UInt32(IN_ONLYDIR)
        guard case .success = Syscall.inotifyAddWatch(descriptor, path: directory, mask: mask) else {
            Syscall.close(descriptor)
            return nil
        }
        return DirectoryWatch(descriptor: descriptor, name: name)
    }

    /// Reads every event waiting (without blocking) and returns whether one named the watched name, or the queue
    /// overflowed (`IN_Q_OVERFLOW`: events were lost, so the name may have appeared).
    func drain() -> Bool {
        var seen = false
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count: Int
            switch Syscall.readAvailable(descriptor, into: &buffer) {
            case .success(let read) where read > 0: count = read
            default: return seen
            }
            if Self.events(in: buffer[..<count], name: name) { seen = true }
        }
    }

    /// Whether the records in `bytes` (`struct inotify_event`: wd i32, mask u32, cookie u32, len u32, then `len` bytes
    /// of NUL-padded name) name `name` or report an overflow. Every length is checked against what was read.
    static func events(in bytes: ArraySlice<UInt8>, name: [UInt8]) -> Bool {
        let headerSize = 16
        var offset = bytes.startIndex
        var seen = false
        while bytes.endIndex - offset >= headerSize {
            func word(_ at: Int) -> UInt32 {
                UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3])
                    << 24
            }
            let mask = word(offset + 4)
            let length = Int(word(offset + 12))
            guard length <= bytes.endIndex - offset - headerSize else { return true }
            if mask & UInt32(IN_Q_OVERFLOW) != 0 { seen = true }
            let nameStart = offset + headerSize
            var nameEnd = nameStart
            while nameEnd < nameStart + length && bytes[nameEnd] != 0 { nameEnd += 1 }
            if bytes[nameStart..<nameEnd].elementsEqual(name) { seen = true }
            offset = nameStart + length
        }
        return seen
    }
}
