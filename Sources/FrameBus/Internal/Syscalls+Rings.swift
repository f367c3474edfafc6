// FrameBus's system calls for protocol version 3's wake-up sockets (sending and draining wake-ups, checking a
// descriptor's socket kind), as an extension of the package's one syscall layer (`Syscall` in
// Surfaces/Internal/Syscalls.swift). The socket pair itself is `makeDoorbellPair()` (Syscalls+Sockets.swift).
import CFrameBusShims
import Glibc
import Surfaces
import SystemPackage

extension Syscall {
    /// `getsockopt(descriptor, level, name)` of an `int` option (e.g. `SO_DOMAIN`, `SO_TYPE`); `ENOTSOCK` for a
    /// descriptor that is not a socket.
    static func socketOption(_ descriptor: Int32, _ level: Int32, _ name: Int32) -> Result<Int32, Errno> {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return valueOrErrno { unsafe getsockopt(descriptor, level, name, &value, &length) }.map { _ in value }
    }

    /// `getpeername(2)` of a Unix socket: the length of its peer's address. A socket pair's end (`socketpair(2)`)
    /// has an unnamed peer, whose address is only the family (2 bytes); a socket connected to a bound name (a path or
    /// an abstract name) returns that name, longer. `ENOTCONN` for a socket that is not connected.
    static func peerAddressLength(_ descriptor: Int32) -> Result<Int, Errno> {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        return valueOrErrno {
            unsafe withUnsafeMutablePointer(to: &address) {
                unsafe $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { unsafe getpeername(descriptor, $0, &length) }
            }
        }.map { _ in Int(length) }
    }

    /// Sends one byte with `MSG_DONTWAIT | MSG_NOSIGNAL`: never blocks, whatever the descriptor's (shared)
    /// `O_NONBLOCK`. `EAGAIN` or `ENOBUFS` (the receiver's queue is full: wake-ups are pending already) is success;
    /// `EINTR` is retried.
    static func sendWake(_ descriptor: Int32) -> Result<Void, Errno> {
        var one: UInt8 = 1
        let flags = Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)
        switch valueOrErrno({ unsafe Glibc.send(descriptor, &one, 1, flags) }) {
        case .success, .failure(.resourceTemporarilyUnavailable), .failure(.noBufferSpace): return .success(())
        case .failure(let errno): return .failure(errno)
        }
    }

    /// Reads datagrams with `MSG_DONTWAIT` (never blocks) until none is left (`EAGAIN`) or `limit` were read;
    /// `EINTR` is retried. Each datagram is truncated to 8 bytes: only its arrival matters. Returns how many it read.
    static func drainWake(_ descriptor: Int32, limit: Int) -> Result<Int, Errno> {
        var bytes: UInt64 = 0
        var read = 0
        for _ in 0..<limit {
            let result = valueOrErrno {
                unsafe withUnsafeMutableBytes(of: &bytes) {
                    unsafe Glibc.recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
                }
            }
            switch result {
            case .success: read += 1
            case .failure(.resourceTemporarilyUnavailable): return .success(read)
            case .failure(let errno): return .failure(errno)
            }
        }
        return .success(read)
    }

    /// `FUTEX_WAKE` of at most one waiter on the 32-bit word at `word` (`isPrivate`: private memory, else a shared
    /// mapping): never blocks, whoever else maps the word. False if the kernel refused (`EFAULT`, `EINVAL`).
    static func futexWake(_ word: UnsafeMutablePointer<UInt32>, isPrivate: Bool) -> Bool {
        unsafe cfb_futex_wake(word, 1, isPrivate ? 1 : 0) >= 0
    }

    /// `futex_waitv` on a word of a shared mapping (read-only is enough) and a word of private memory: sleeps while
    /// they hold `sharedSeen` and `localSeen`, at most `timeoutNanoseconds`. `.success(0)` or `.success(1)`: that
    /// word was woken; `EAGAIN` (a word differed), `ETIMEDOUT`, `EINTR` as errors.
    static func futexWaitTwo(
        shared: UnsafePointer<UInt32>,
        sharedSeen: UInt32,
        local: UnsafeMutablePointer<UInt32>,
        localSeen: UInt32,
        timeoutNanoseconds: Int64
    ) -> Result<Int32, Errno> {
        valueOrErrno { unsafe cfb_futex_waitv2(shared, sharedSeen, local, localSeen, timeoutNanoseconds) }
    }

    /// Whether this process can sleep in `futex_waitv` (Linux 5.16+), probed once. A subscriber offers futex
    /// wake-ups (docs/PROTOCOL.md §9.8) only if it can.
    static let hasFutexWaitv: Bool = {
        var shared: UInt32 = 0
        var local: UInt32 = 0
        let result = valueOrErrno {
            unsafe cfb_futex_waitv2(&shared, 1, &local, 1, 0)
        }
        // Both words differ from the values given (0 ≠ 1): a kernel with the call answers EAGAIN at once. Anything
        // else means no: ENOSYS on an older kernel, EPERM (or another errno) where a seccomp filter that predates
        // the call refuses it, as container runtimes' default profiles did; offering then would end every session
        // at its first sleep.
        if case .failure(.resourceTemporarilyUnavailable) = result { return true }
        return false
    }()
}
