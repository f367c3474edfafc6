// A Unix SOCK_SEQPACKET socket: listen at a path (replacing a stale socket file), connect, accept, peer
// credentials, and one-datagram send/receive with SCM_RIGHTS.
import Atomics
import Glibc
import Surfaces
import SystemPackage

/// A descriptor received with `SCM_RIGHTS`; closed on deinit unless ``take()`` gave it away.
///
/// `@unchecked Sendable`: the descriptor is only read or taken under the owner's lock (the subscriber's state
/// mutex), and `take` is called at most once.
package final class OwnedDescriptor: @unchecked Sendable {
    private var raw: Int32

    init(_ raw: Int32) { self.raw = raw }

    /// Hands the descriptor to the caller, who must close it; afterwards this object owns nothing.
    package func take() -> FileDescriptor? {
        guard raw >= 0 else { return nil }
        defer { raw = -1 }
        return FileDescriptor(rawValue: raw)
    }

    var rawValue: Int32 { raw }

    deinit { if raw >= 0 { Syscall.close(raw) } }
}

/// One datagram read from a socket.
package struct ReceivedDatagram {
    /// The datagram's bytes (at most the receive buffer's size).
    package var bytes: [UInt8]
    /// Descriptors that arrived with it; dropping the array closes them.
    package var descriptors: [OwnedDescriptor]
    /// The datagram was larger than the receive buffer, or its descriptors did not fit.
    var isTruncated: Bool
}

/// Owns one socket descriptor.
///
/// The descriptor is closed only in `deinit`; ``shutdown()`` ends the connection without freeing the number, so
/// another thread holding a reference can never act on a reused descriptor. `@unchecked Sendable`: the
/// descriptor is immutable, and the kernel serialises calls on it.
@safe package final class Socket: @unchecked Sendable {
    package let descriptor: Int32

    /// Receive scratch: one datagram of the largest size we accept plus one byte, then control data for a few
    /// descriptors. Reused by every receive; a socket has one reader at a time (its owner's loop, or a handshake
    /// before that loop starts, or the reader thread holding the subscriber's reader lock).
    private let scratch: UnsafeMutableRawBufferPointer
    private static let scratchDataSize = WireProtocol.maximumMessageSize + 1
    private static let scratchControlSize = Syscall.controlSpace(descriptors: 4)

    init(adopting descriptor: Int32) {
        self.descriptor = descriptor
        unsafe scratch = UnsafeMutableRawBufferPointer.allocate(
            byteCount: Self.scratchDataSize + Self.scratchControlSize,
            alignment: 16
        )
    }

    deinit {
        Syscall.close(descriptor)
        unsafe scratch.deallocate()
    }

    /// Ends both directions; the peer sees end of file and local pollers wake with `POLLHUP`.
    package func shutdown() { Syscall.shutdown(descriptor) }

    /// Listens at `path` (created with `mode`), replacing a stale socket file left by a dead publisher.
    ///
    /// `path` appears only once the socket listens: the socket is bound to a private name in the same directory,
    /// set to `mode` and listening, and only then linked to `path`. So a client that waits for the file to exist
    /// and connects is never refused, and a second publisher starting meanwhile never takes a listening socket
    /// for a stale one. A socket file at `path` that refuses a connection (`ECONNREFUSED`) is stale and is
    /// replaced; one that accepts is a live publisher and gives ``FrameBusError/Code-swift.struct/addressInUse``.
    /// Anything at the path that is not a socket is never removed.
    package static func listen(
        path: String,
        mode: mode_t,
        backlog: Int32 = 64,
        stream: Bool = false
    ) -> Result<Socket, FrameBusError> {
        listen(path: path, mode: mode, backlog: backlog, stream: stream, replacingStale: true)
    }

    private static func listen(
        path: String,
        mode: mode_t,
        backlog: Int32,
        stream: Bool,
        replacingStale: Bool
    ) -> Result<Socket, FrameBusError> {
        let socket: Socket
        switch Syscall.unixSocket(stream: stream) {
        case .success(let raw): socket = Socket(adopting: raw)
        case .failure(let errno): return .failure(.systemCall("socket", errno))
        }
        // The private name is no longer than `path` where it can be (so it fits sockaddr_un whenever `path` does);
        // a path whose file name is shorter than that is bound directly, with the window described above.
        let privateName = Self.privateName(besides: path)
        let bound = privateName ?? path
        // The socket inode's mode becomes the file's mode at bind (less the umask); chmod again after.
        _ = Syscall.changeMode(socket.descriptor, mode)
        switch Syscall.bind(socket.descriptor, path: bound) {
        case .success: break
        case .failure(.addressInUse) where privateName == nil && replacingStale:
            if case .failure(let error) = Self.replaceIfStale(path, stream: stream) { return .failure(error) }
            return listen(path: path, mode: mode, backlog: backlog, stream: stream, replacingStale: false)
        case .failure(.addressInUse) where privateName == nil:
            return .failure(FrameBusError(.addressInUse, "Socket.listen", message: path))
        case .failure(.fileNameTooLong):
            return .failure(FrameBusError(.invalidArgument, "Socket.listen", errno: .fileNameTooLong, message: path))
        case .failure(let errno):
            return .failure(.systemCall("bind", errno))
        }
        if case .failure(let errno) = Syscall.changeMode(path: bound, mode) {
            _ = Syscall.unlink(bound)
            return .failure(.systemCall("chmod", errno))
        }
        if case .failure(let errno) = Syscall.listen(socket.descriptor, backlog: backlog) {
            _ = Syscall.unlink(bound)
            return .failure(.systemCall("listen", errno))
        }
        guard let privateName else { return .success(socket) }
        defer { _ = Syscall.unlink(privateName) }
        for attempt in 0..<2 {
            switch Syscall.link(privateName, path) {
            case .success:
                return .success(socket)
            case .failure(.fileExists) where attempt == 0:
                if case .failure(let error) = Self.replaceIfStale(path, stream: stream) { return .failure(error) }
            case .failure(let errno):
                return .failure(.systemCall("link", errno))
            }
        }
        return .failure(FrameBusError(.addressInUse, "Socket.listen", message: path))
    }

    /// A name in `path`'s directory for binding before the socket is linked to `path`, or nil if the file name of
    /// `path` is too short to make one of at most its length (".fb" and 8 hexadecimal digits).
    private static func privateName(besides path: String) -> String? {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[...$0]) } ?? ""
        let name = ".fb" + String(UInt32.random(in: 0x1000_0000...UInt32.max), radix: 16)
        guard path.utf8.count - directory.utf8.count >= name.utf8.count else { return nil }
        return directory + name
    }

    /// Unlinks the socket file at `path` if nobody listens there (`ECONNREFUSED`: a dead publisher's file);
    /// fails with ``FrameBusError/Code-swift.struct/addressInUse`` if it is live or not a socket.
    private static func replaceIfStale(_ path: String, stream: Bool) -> Result<Void, FrameBusError> {
        let operation = "Socket.listen"
        guard case .success(true) = Syscall.isSocket(path: path) else {
            return .failure(FrameBusError(.addressInUse, operation, message: "\(path) exists and is not a socket"))
        }
        let probe: Socket
        switch Syscall.unixSocket(stream: stream) {
        case .success(let raw): probe = Socket(adopting: raw)
        case .failure(let errno): return .failure(.systemCall("socket", errno))
        }
        switch Syscall.connect(probe.descriptor, path: path) {
        case .failure(.connectionRefused):
            _ = Syscall.unlink(path)
            return .success(())
        case .success, .failure(.resourceTemporarilyUnavailable):
            return .failure(FrameBusError(.addressInUse, operation, message: "a publisher is live at \(path)"))
        case .failure(let errno):
            return .failure(FrameBusError(.addressInUse, operation, errno: errno, message: path))
        }
    }

    /// Connects to a listener at `path`, retrying a full backlog until `timeoutNanoseconds` pass.
    package static func connect(
        path: String,
        timeoutNanoseconds: UInt64,
        stream: Bool = false
    ) -> Result<Socket, FrameBusError> {
        let deadline = Syscall.monotonicNanoseconds() &+ timeoutNanoseconds
        while true {
            let socket: Socket
            switch Syscall.unixSocket(stream: stream) {
            case .success(let raw): socket = Socket(adopting: raw)
            case .failure(let errno): return .failure(.systemCall("socket", errno))
            }
            switch Syscall.connect(socket.descriptor, path: path) {
            case .success:
                return .success(socket)
            case .failure(.resourceTemporarilyUnavailable) where Syscall.monotonicNanoseconds() < deadline:
                usleep(1000)
            case .failure(.fileNameTooLong):
                return .failure(FrameBusError(.invalidArgument, "connect", errno: .fileNameTooLong, message: path))
            case .failure(let errno):
                return .failure(FrameBusError(.systemCall, "connect", errno: errno, message: path))
            }
        }
    }

    /// Accepts one pending connection; `nil` when none is pending.
    package func accept() -> Result<Socket?, Errno> {
        switch Syscall.accept(descriptor) {
        case .success(let raw): return .success(Socket(adopting: raw))
        case .failure(.resourceTemporarilyUnavailable), .failure(.connectionAbort): return .success(nil)
        case .failure(let errno): return .failure(errno)
        }
    }

    /// The peer's process, user and group ids (`SO_PEERCRED`).
    func peerCredentials() -> Result<(pid: Int32, uid: UInt32, gid: UInt32), Errno> {
        Syscall.peerCredentials(descriptor)
    }

    /// Whether a datagram went out or the socket buffer is full.
    package enum SendOutcome { case sent, wouldBlock }

    /// Sends one datagram, optionally with descriptors (`SCM_RIGHTS`); never blocks, never raises `SIGPIPE`.
    package func send(_ bytes: [UInt8], descriptors: [Int32] = []) -> Result<SendOutcome, Errno> {
        let result = unsafe bytes.withUnsafeBytes {
            unsafe Syscall.sendMessage(descriptor, $0, descriptors: descriptors)
        }
        switch result {
        case .success: return .success(.sent)
        case .failure(.resourceTemporarilyUnavailable): return .success(.wouldBlock)
        case .failure(let errno): return .failure(errno)
        }
    }

    /// Outcome of a receive.
    package enum ReceiveOutcome {
        case datagram(ReceivedDatagram)
        case wouldBlock
        case endOfFile
    }

    /// Reads one datagram of at most `maximumSize` bytes without blocking.
    ///
    /// A longer datagram is reported with `isTruncated` (`MSG_TRUNC`), as is one whose descriptors did not fit
    /// (`MSG_CTRUNC`); received descriptors are owned by the result and closed when it is dropped.
    package func receive(maximumSize: Int, maximumDescriptors: Int = 1) -> Result<ReceiveOutcome, Errno> {
        precondition(maximumSize < Self.scratchDataSize && maximumDescriptors <= 4, "receive limits")
        let data = unsafe UnsafeMutableRawBufferPointer(rebasing: scratch[0..<(maximumSize + 1)])
        let control = unsafe UnsafeMutableRawBufferPointer(
            rebasing: scratch[
                Self.scratchDataSize..<(Self.scratchDataSize + Syscall.controlSpace(descriptors: maximumDescriptors))
            ]
        )
        var result = unsafe Syscall.receiveMessage(descriptor, into: data, control: control)
        if case .failure(.connectionReset) = result {
            // A peer that closed with our data unread leaves ECONNRESET pending, reported (and cleared) before
            // the datagrams it sent first; read once more to get those (e.g. its ERROR), then end of file.
            result = unsafe Syscall.receiveMessage(descriptor, into: data, control: control)
        }
        switch result {
        case .failure(.resourceTemporarilyUnavailable):
            return .success(.wouldBlock)
        case .failure(.connectionReset):
            return .success(.endOfFile)
        case .failure(let errno):
            return .failure(errno)
        case .success(let received):
            let descriptors = received.descriptors.map(OwnedDescriptor.init)
            if received.byteCount == 0 && !received.isTruncated { return .success(.endOfFile) }
            let truncated = received.isTruncated || received.isControlTruncated || received.byteCount > maximumSize
            let bytes = unsafe [UInt8](UnsafeRawBufferPointer(rebasing: data[0..<min(received.byteCount, maximumSize)]))
            return .success(.datagram(ReceivedDatagram(bytes: bytes, descriptors: descriptors, isTruncated: truncated)))
        }
    }

    /// Stream sockets: sends every byte, waiting for room (poll) as needed.
    package func sendAll(_ bytes: UnsafeRawBufferPointer) -> Result<Void, Errno> {
        var offset = 0
        while offset < bytes.count {
            let rest = unsafe UnsafeRawBufferPointer(rebasing: bytes[offset...])
            switch unsafe Syscall.send(descriptor, rest) {
            case .success(let count): offset += count
            case .failure(.resourceTemporarilyUnavailable):
                _ = Syscall.poll([(descriptor, PollEvents.writable)], timeout: 1000)
            case .failure(let errno): return .failure(errno)
            }
        }
        return .success(())
    }

    /// Stream sockets: fills `bytes` completely, waiting for data (poll) as needed; fails with `ECONNRESET` at
    /// end of file.
    package func receiveAll(_ bytes: UnsafeMutableRawBufferPointer) -> Result<Void, Errno> {
        var offset = 0
        while offset < bytes.count {
            let rest = unsafe UnsafeMutableRawBufferPointer(rebasing: bytes[offset...])
            switch unsafe Syscall.receive(descriptor, into: rest) {
            case .success(0): return .failure(.connectionReset)
            case .success(let count): offset += count
            case .failure(.resourceTemporarilyUnavailable):
                _ = Syscall.poll([(descriptor, PollEvents.readable)], timeout: 1000)
            case .failure(let errno): return .failure(errno)
            }
        }
        return .success(())
    }

    /// Waits until the socket is readable, hung up, or `timeoutMilliseconds` pass (-1: forever).
    package func waitReadable(timeoutMilliseconds: Int32) -> Result<Bool, Errno> {
        Syscall.poll([(descriptor, Int16(POLLIN))], timeout: timeoutMilliseconds).map { $0[0] != 0 }
    }
}

/// Wakes a poll loop from another thread: a non-blocking `eventfd`, readable while rung; one descriptor, and rings
/// that pile up before the loop wakes cost it one `read`.
///
/// A thread that sleeps on a futex instead (a subscriber's connection thread in a futex-woken session,
/// docs/PROTOCOL.md §9.8) watches ``futexWord`` too: every ring adds 1 to it, and wakes it while
/// ``armFutex()`` says someone sleeps on it (store-then-load on both sides, so no ring is missed).
@safe final class Doorbell: @unchecked Sendable {
    // `@unchecked Sendable`: the descriptor and the word's address are immutable; the kernel serialises writes and
    // reads of the counter, and the word and flag are only touched atomically.
    /// Poll this one for `POLLIN`.
    let descriptor: Int32
    /// Private memory of ours: a 32-bit ring count (wraps) and the "a futex sleeper waits" flag.
    private let storage: UnsafeMutablePointer<UnsafeAtomic<UInt32>.Storage>

    init() throws(FrameBusError) {
        switch Syscall.makeEventFD() {
        case .success(let descriptor): self.descriptor = descriptor
        case .failure(let errno): throw .systemCall("eventfd", errno)
        }
        unsafe storage = .allocate(capacity: 2)
        unsafe storage.initialize(repeating: UnsafeAtomic<UInt32>.Storage(0), count: 2)
    }

    deinit {
        Syscall.close(descriptor)
        unsafe storage.deallocate()
    }

    private var count: UnsafeAtomic<UInt32> { unsafe UnsafeAtomic(at: storage) }
    private var sleeper: UnsafeAtomic<UInt32> { unsafe UnsafeAtomic(at: storage + 1) }

    /// The ring count's address, for `futex_waitv` (private).
    var futexWord: UnsafeMutablePointer<UInt32> {
        unsafe UnsafeMutableRawPointer(storage).assumingMemoryBound(to: UInt32.self)
    }

    /// Rings so far (wrapping): a futex sleeper compares it before and after.
    var ringCount: UInt32 { count.load(ordering: .sequentiallyConsistent) }

    /// Says a thread is about to sleep on ``futexWord`` (load ``ringCount`` after this, then sleep on that value).
    func armFutex() { sleeper.store(1, ordering: .sequentiallyConsistent) }
    func disarmFutex() { sleeper.store(0, ordering: .sequentiallyConsistent) }

    func ring() {
        Syscall.signal(eventFD: descriptor)
        count.wrappingIncrement(ordering: .sequentiallyConsistent)
        if sleeper.load(ordering: .sequentiallyConsistent) != 0 {
            _ = unsafe Syscall.futexWake(futexWord, isPrivate: true)
        }
    }
    func drain() { Syscall.drain(eventFD: descriptor) }
}

/// Poll flags, spelled once.
enum PollEvents {
    static let readable = Int16(POLLIN)
    static let writable = Int16(POLLOUT)
    // 0x2000 is POLLRDHUP, which Swift's Glibc module lacks (it needs _GNU_SOURCE).
    static let hangUp = Int16(POLLHUP) | Int16(POLLERR) | Int16(POLLNVAL) | Int16(0x2000)
}

/// Process-wide helpers that need the C library.
package enum ProcessInfoShim {
    static var userID: UInt32 { Syscall.userID() }
    static var processID: Int32 { Syscall.processID() }
    package static func monotonicNanoseconds() -> UInt64 { Syscall.monotonicNanoseconds() }
}
