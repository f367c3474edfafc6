// FrameBus's system calls for sockets, descriptor passing and polling, as an extension of the package's one
// syscall layer (`Syscall` in Surfaces/Internal/Syscalls.swift, which also holds `valueOrErrno` and `close`).
//
// Every wrapper returns `Result<_, Errno>` built right after the call, so nothing can run between the call and
// reading `errno`. `EINTR` is retried everywhere except on `close`.
import CFrameBusShims
import Glibc
import Surfaces
import SystemPackage

extension Syscall {
    /// `socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)`, or `SOCK_STREAM` when asked.
    static func unixSocket(stream: Bool = false) -> Result<Int32, Errno> {
        let type = Int32(stream ? SOCK_STREAM.rawValue : SOCK_SEQPACKET.rawValue)
        let flags = Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        return valueOrErrno { Glibc.socket(AF_UNIX, type | flags, 0) }
    }

    /// `socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)`; used by tests and benchmarks.
    static func unixSocketPair(stream: Bool = false) -> Result<(Int32, Int32), Errno> {
        let type = Int32(stream ? SOCK_STREAM.rawValue : SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        var pair: (Int32, Int32) = (-1, -1)
        let result = valueOrErrno {
            unsafe withUnsafeMutableBytes(of: &pair) { bytes in
                unsafe Glibc.socketpair(AF_UNIX, type, 0, bytes.baseAddress!.assumingMemoryBound(to: Int32.self))
            }
        }
        return result.map { _ in pair }
    }

    /// Calls `body` with a `sockaddr_un` for `path`; fails with `ENAMETOOLONG` when the path does not fit.
    private static func withSocketAddress<R>(
        _ path: String,
        _ body: (UnsafePointer<sockaddr>, socklen_t) -> Result<R, Errno>
    ) -> Result<R, Errno> {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity, !bytes.contains(0) else { return .failure(.fileNameTooLong) }
        unsafe withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { unsafe raw[index] = byte }
            unsafe raw[bytes.count] = 0
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1)
        return unsafe withUnsafePointer(to: &address) { pointer in
            unsafe pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { unsafe body($0, length) }
        }
    }

    /// `bind(2)` to a filesystem path.
    static func bind(_ socket: Int32, path: String) -> Result<Void, Errno> {
        unsafe withSocketAddress(path) { address, length in
            valueOrErrno { unsafe Glibc.bind(socket, address, length) }.map { _ in () }
        }
    }

    /// `connect(2)` to a filesystem path. On a non-blocking socket `EAGAIN` means the listen backlog is full.
    static func connect(_ socket: Int32, path: String) -> Result<Void, Errno> {
        unsafe withSocketAddress(path) { address, length in
            valueOrErrno { unsafe Glibc.connect(socket, address, length) }.map { _ in () }
        }
    }

    /// `listen(2)`.
    static func listen(_ socket: Int32, backlog: Int32) -> Result<Void, Errno> {
        valueOrErrno { Glibc.listen(socket, backlog) }.map { _ in () }
    }

    /// `accept4(2)` with `SOCK_CLOEXEC | SOCK_NONBLOCK`.
    static func accept(_ socket: Int32) -> Result<Int32, Errno> {
        // Through the shim, which is built with _GNU_SOURCE: no window in which a child forked by another thread
        // could inherit the descriptor.
        valueOrErrno { cfb_accept_cloexec_nonblock(socket) }
    }

    /// `fchmod(2)`; on Linux a socket's inode mode becomes the mode of the file `bind` creates.
    static func changeMode(_ descriptor: Int32, _ mode: mode_t) -> Result<Void, Errno> {
        valueOrErrno { Glibc.fchmod(descriptor, mode) }.map { _ in () }
    }

    /// `chmod(2)`.
    static func changeMode(path: String, _ mode: mode_t) -> Result<Void, Errno> {
        valueOrErrno { unsafe Glibc.chmod(path, mode) }.map { _ in () }
    }

    /// `link(2)`: a second name for the file at `existing`; fails with `EEXIST` if `new` exists.
    static func link(_ existing: String, _ new: String) -> Result<Void, Errno> {
        valueOrErrno { unsafe Glibc.link(existing, new) }.map { _ in () }
    }

    /// `unlink(2)`.
    static func unlink(_ path: String) -> Result<Void, Errno> {
        valueOrErrno { unsafe Glibc.unlink(path) }.map { _ in () }
    }

    /// `lstat(2)`: whether `path` names a socket. Fails with the errno of `lstat`.
    static func isSocket(path: String) -> Result<Bool, Errno> {
        var information = stat()
        return valueOrErrno { unsafe Glibc.lstat(path, &information) }.map { _ in
            (information.st_mode & S_IFMT) == S_IFSOCK
        }
    }

    /// `shutdown(2)` both directions; wakes a peer and a local poller without freeing the descriptor number.
    static func shutdown(_ socket: Int32) {
        _ = Glibc.shutdown(socket, Int32(SHUT_RDWR))
    }

    /// `getsockopt(SO_PEERCRED)`.
    static func peerCredentials(_ socket: Int32) -> Result<(pid: Int32, uid: UInt32, gid: UInt32), Errno> {
        var pid: pid_t = 0
        var uid: uid_t = 0
        var gid: gid_t = 0
        return valueOrErrno { unsafe cfb_peer_credentials(socket, &pid, &uid, &gid) }.map { _ in
            (pid, uid, gid)
        }
    }

    /// `setsockopt(SOL_SOCKET, option, value)` for an `Int32` option.
    static func setSocketOption(_ socket: Int32, _ option: Int32, _ value: Int32) -> Result<Void, Errno> {
        var value = value
        return valueOrErrno {
            unsafe Glibc.setsockopt(socket, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<Int32>.size))
        }.map { _ in () }
    }

    /// `sendmsg(2)` of one datagram with `MSG_NOSIGNAL | MSG_DONTWAIT`, optionally carrying descriptors
    /// (`SCM_RIGHTS`). Returns the number of bytes sent.
    static func sendMessage(
        _ socket: Int32,
        _ bytes: UnsafeRawBufferPointer,
        descriptors: [Int32]
    ) -> Result<Int, Errno> {
        var vector = unsafe iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count)
        let flags = Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)
        if descriptors.isEmpty {
            return unsafe withUnsafeMutablePointer(to: &vector) { vectorPointer in
                var header = unsafe msghdr()
                unsafe header.msg_iov = vectorPointer
                unsafe header.msg_iovlen = 1
                return valueOrErrno { unsafe Glibc.sendmsg(socket, &header, flags) }
            }
        }
        let payload = descriptors.count * MemoryLayout<Int32>.size
        let space = cfb_cmsg_space(payload)
        return unsafe withUnsafeMutablePointer(to: &vector) { vectorPointer in
            let control = UnsafeMutableRawBufferPointer.allocate(byteCount: space, alignment: 8)
            defer { unsafe control.deallocate() }
            unsafe control.initializeMemory(as: UInt8.self, repeating: 0)
            var header = unsafe msghdr()
            unsafe header.msg_iov = vectorPointer
            unsafe header.msg_iovlen = 1
            unsafe header.msg_control = control.baseAddress
            unsafe header.msg_controllen = space
            return unsafe withUnsafeMutablePointer(to: &header) { headerPointer in
                guard let first = unsafe cfb_cmsg_firsthdr(headerPointer) else { return .failure(.invalidArgument) }
                unsafe first.pointee.cmsg_level = SOL_SOCKET
                unsafe first.pointee.cmsg_type = Int32(SCM_RIGHTS)
                unsafe first.pointee.cmsg_len = cfb_cmsg_len(payload)
                let data = unsafe UnsafeMutableRawPointer(cfb_cmsg_data(first))
                for (index, descriptor) in descriptors.enumerated() {
                    unsafe data.storeBytes(of: descriptor, toByteOffset: index * 4, as: Int32.self)
                }
                return valueOrErrno { unsafe Glibc.sendmsg(socket, headerPointer, flags) }
            }
        }
    }

    /// What `recvmsg(2)` returned.
    struct Received {
        /// Bytes of the datagram copied into the buffer; 0 means end of file.
        var byteCount: Int
        /// Descriptors that arrived with `SCM_RIGHTS` (already `O_CLOEXEC`); the caller owns and must close them.
        var descriptors: [Int32]
        /// `MSG_TRUNC`: the datagram was longer than the buffer.
        var isTruncated: Bool
        /// `MSG_CTRUNC`: control data (descriptors) did not fit; the kernel closed those that were cut.
        var isControlTruncated: Bool
    }

    /// `recvmsg(2)` of one datagram with `MSG_DONTWAIT | MSG_CMSG_CLOEXEC`, accepting up to `maximumDescriptors`.
    static func receiveMessage(
        _ socket: Int32,
        into buffer: UnsafeMutableRawBufferPointer,
        maximumDescriptors: Int
    ) -> Result<Received, Errno> {
        let space = cfb_cmsg_space(max(1, maximumDescriptors) * MemoryLayout<Int32>.size)
        let control = UnsafeMutableRawBufferPointer.allocate(byteCount: space, alignment: 8)
        defer { unsafe control.deallocate() }
        return unsafe receiveMessage(socket, into: buffer, control: control)
    }

    /// The control-data space for `count` descriptors.
    static func controlSpace(descriptors count: Int) -> Int {
        cfb_cmsg_space(max(1, count) * MemoryLayout<Int32>.size)
    }

    /// `recvmsg(2)` into caller-owned data and control buffers (reused across calls by ``Socket``).
    static func receiveMessage(
        _ socket: Int32,
        into buffer: UnsafeMutableRawBufferPointer,
        control: UnsafeMutableRawBufferPointer
    ) -> Result<Received, Errno> {
        var vector = unsafe iovec(iov_base: buffer.baseAddress, iov_len: buffer.count)
        let space = control.count
        unsafe control.initializeMemory(as: UInt8.self, repeating: 0)
        let flags = Int32(MSG_DONTWAIT) | Int32(MSG_CMSG_CLOEXEC)
        return unsafe withUnsafeMutablePointer(to: &vector) { vectorPointer in
            var header = unsafe msghdr()
            unsafe header.msg_iov = vectorPointer
            unsafe header.msg_iovlen = 1
            unsafe header.msg_control = control.baseAddress
            unsafe header.msg_controllen = space
            return unsafe withUnsafeMutablePointer(to: &header) { headerPointer in
                let result = valueOrErrno { unsafe Glibc.recvmsg(socket, headerPointer, flags) }
                guard case .success(let count) = result else { return result.map { _ in fatalError() } }
                var descriptors: [Int32] = []
                var cursor = unsafe cfb_cmsg_firsthdr(headerPointer)
                while let current = unsafe cursor {
                    if unsafe current.pointee.cmsg_level == SOL_SOCKET
                        && current.pointee.cmsg_type == Int32(SCM_RIGHTS)
                    {
                        let dataLength = unsafe Int(current.pointee.cmsg_len) - Int(cfb_cmsg_len(0))
                        let data = unsafe UnsafeRawPointer(cfb_cmsg_data(current))
                        for index in 0..<max(0, dataLength / 4) {
                            unsafe descriptors.append(data.loadUnaligned(fromByteOffset: index * 4, as: Int32.self))
                        }
                    }
                    unsafe cursor = unsafe cfb_cmsg_nxthdr(headerPointer, current)
                }
                let messageFlags = unsafe headerPointer.pointee.msg_flags
                return .success(
                    Received(
                        byteCount: count,
                        descriptors: descriptors,
                        isTruncated: messageFlags & Int32(MSG_TRUNC) != 0,
                        isControlTruncated: messageFlags & Int32(MSG_CTRUNC) != 0
                    )
                )
            }
        }
    }

    /// `send(2)` on a stream socket (blocking or not, as the socket is), with `MSG_NOSIGNAL`.
    static func send(_ socket: Int32, _ bytes: UnsafeRawBufferPointer) -> Result<Int, Errno> {
        valueOrErrno { unsafe Glibc.send(socket, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) }
    }

    /// `recv(2)` on a stream socket.
    static func receive(_ socket: Int32, into bytes: UnsafeMutableRawBufferPointer) -> Result<Int, Errno> {
        valueOrErrno { unsafe Glibc.recv(socket, bytes.baseAddress, bytes.count, 0) }
    }

    /// `poll(2)` on `descriptors`; returns `revents` for each, in order. `timeout` in ms, -1 waits forever.
    static func poll(_ descriptors: [(descriptor: Int32, events: Int16)], timeout: Int32) -> Result<[Int16], Errno> {
        var entries = descriptors.map { pollfd(fd: $0.descriptor, events: $0.events, revents: 0) }
        let count = nfds_t(entries.count)
        return valueOrErrno { unsafe Glibc.poll(&entries, count, timeout) }.map { _ in entries.map(\.revents) }
    }

    /// `poll(2)` on a ``PollSet``'s entries, their `revents` filled in.
    static func poll(_ set: inout PollSet, timeout: Int32) -> Result<Void, Errno> {
        set.poll(timeout: timeout)
    }

    /// A non-blocking datagram socket pair (`AF_UNIX`, `SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK`): protocol version
    /// 3's wake-up sockets (`WakeSocket`; one end travels to the peer). Doorbells within a process are eventfds.
    static func makeDoorbellPair() -> Result<(Int32, Int32), Errno> {
        let type = Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        var pair: (Int32, Int32) = (-1, -1)
        let result = valueOrErrno {
            unsafe withUnsafeMutableBytes(of: &pair) { bytes in
                unsafe Glibc.socketpair(AF_UNIX, type, 0, bytes.baseAddress!.assumingMemoryBound(to: Int32.self))
            }
        }
        return result.map { _ in pair }
    }

    /// A non-blocking `eventfd` (`EFD_CLOEXEC | EFD_NONBLOCK`, through the shim built with _GNU_SOURCE): a doorbell.
    static func makeEventFD() -> Result<Int32, Errno> {
        valueOrErrno { cfb_eventfd_nonblocking() }
    }

    /// Adds one to an eventfd's counter; `EAGAIN` (the counter is full) already means "rung".
    static func signal(eventFD descriptor: Int32) {
        var one: UInt64 = 1
        _ = valueOrErrno { unsafe Glibc.write(descriptor, &one, 8) }
    }

    /// Resets an eventfd's counter to zero (one `read`; `EAGAIN` when it was zero already).
    static func drain(eventFD descriptor: Int32) {
        var count: UInt64 = 0
        _ = valueOrErrno { unsafe Glibc.read(descriptor, &count, 8) }
    }
}

/// The descriptors of one `poll(2)`, kept by a loop that polls on every turn: refilled in place (its array keeps its
/// capacity), so a turn allocates nothing (`poll` on a list of descriptors makes two arrays).
struct PollSet {
    private var entries: [pollfd] = []

    /// Forgets the descriptors of the last turn.
    mutating func removeAll() { entries.removeAll(keepingCapacity: true) }

    /// Adds a descriptor to wait on; its index is the number added before it since ``removeAll()``.
    mutating func add(_ descriptor: Int32, events: Int16) {
        entries.append(pollfd(fd: descriptor, events: events, revents: 0))
    }

    /// The events `poll` returned for the descriptor at `index`.
    func events(at index: Int) -> Int16 { entries[index].revents }

    fileprivate mutating func poll(timeout: Int32) -> Result<Void, Errno> {
        let count = nfds_t(entries.count)
        return Syscall.valueOrErrno { unsafe Glibc.poll(&entries, count, timeout) }.map { _ in }
    }
}
