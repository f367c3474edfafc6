// Raw transports for `framebus bench bus`: the SEQPACKET and eventfd floors and the stream-socket copy the bus is compared with.
// Part of the bench harness (FrameBusBench), built on FrameBus's own socket through `package` access.
import CFrameBusShims
import FrameBus
import Glibc
import Surfaces
import SystemPackage

/// A blocking-style Unix socket for measuring the transports the bus is compared against.
final class BenchmarkSocket: Sendable {
    let socket: Socket

    init(_ socket: Socket) { self.socket = socket }

    /// Listens at `path` (SOCK_SEQPACKET, or SOCK_STREAM when `stream`).
    public static func listen(path: String, stream: Bool) throws(FrameBusError) -> BenchmarkSocket {
        BenchmarkSocket(try Socket.listen(path: path, mode: 0o600, stream: stream).get())
    }

    /// Connects to `path`.
    public static func connect(path: String, stream: Bool) throws(FrameBusError) -> BenchmarkSocket {
        BenchmarkSocket(try Socket.connect(path: path, timeoutNanoseconds: 5_000_000_000, stream: stream).get())
    }

    /// Accepts one connection, waiting up to `timeoutMilliseconds`.
    public func accept(timeoutMilliseconds: Int32) throws(FrameBusError) -> BenchmarkSocket {
        _ = socket.waitReadable(timeoutMilliseconds: timeoutMilliseconds)
        switch socket.accept() {
        case .success(let accepted?): return BenchmarkSocket(accepted)
        case .success(nil): throw FrameBusError(.timedOut, "BenchmarkSocket.accept")
        case .failure(let errno): throw .systemCall("accept", errno)
        }
    }

    /// Waits up to a second for room to send (`poll` for `POLLOUT`).
    private func waitWritable() {
        var descriptor = pollfd(fd: socket.descriptor, events: Int16(POLLOUT), revents: 0)
        _ = unsafe Glibc.poll(&descriptor, 1, 1000)
    }

    /// Sends one datagram, waiting for room.
    public func send(_ bytes: [UInt8]) throws(FrameBusError) {
        while true {
            switch socket.send(bytes) {
            case .success(.sent): return
            case .success(.wouldBlock): waitWritable()
            case .failure(let errno): throw .systemCall("sendmsg", errno)
            }
        }
    }

    /// Receives one datagram, blocking in `poll` (so the wake-up is what a blocking consumer pays); nil at end of
    /// file or after `timeoutMilliseconds`.
    public func receive(maximumSize: Int = 4096, timeoutMilliseconds: Int32 = 10_000) throws(FrameBusError) -> [UInt8]?
    {
        while true {
            switch socket.receive(maximumSize: maximumSize, maximumDescriptors: 0) {
            case .success(.datagram(let datagram)): return datagram.bytes
            case .success(.endOfFile): return nil
            case .success(.wouldBlock):
                guard case .success(true) = socket.waitReadable(timeoutMilliseconds: timeoutMilliseconds) else {
                    return nil
                }
            case .failure(let errno): throw .systemCall("recvmsg", errno)
            }
        }
    }

    /// Stream: sends all of `bytes`.
    public func sendAll(_ bytes: [UInt8]) throws(FrameBusError) {
        let result = unsafe bytes.withUnsafeBytes { unsafe socket.sendAll($0) }
        if case .failure(let errno) = result { throw .systemCall("send", errno) }
    }

    /// Stream: fills all of `bytes`.
    public func receiveAll(into bytes: inout [UInt8]) throws(FrameBusError) {
        let result = unsafe bytes.withUnsafeMutableBytes { unsafe socket.receiveAll($0) }
        if case .failure(let errno) = result { throw .systemCall("recv", errno) }
    }

    /// Sends one datagram carrying `descriptors` (`SCM_RIGHTS`), waiting for room.
    public func send(_ bytes: [UInt8], descriptors: [Int32]) throws(FrameBusError) {
        while true {
            switch socket.send(bytes, descriptors: descriptors) {
            case .success(.sent): return
            case .success(.wouldBlock): waitWritable()
            case .failure(let errno): throw .systemCall("sendmsg", errno)
            }
        }
    }

    /// Receives one datagram with up to 4 descriptors (now owned by the caller); nil at end of file or after
    /// `timeoutMilliseconds`.
    public func receiveDescriptors(timeoutMilliseconds: Int32 = 10_000) throws(FrameBusError) -> [Int32]? {
        while true {
            switch socket.receive(maximumSize: 64, maximumDescriptors: 4) {
            case .success(.datagram(let datagram)): return datagram.descriptors.compactMap { $0.take()?.rawValue }
            case .success(.endOfFile): return nil
            case .success(.wouldBlock):
                guard case .success(true) = socket.waitReadable(timeoutMilliseconds: timeoutMilliseconds) else {
                    return nil
                }
            case .failure(let errno): throw .systemCall("recvmsg", errno)
            }
        }
    }

    /// A blocking eventfd (`EFD_CLOEXEC`), for the eventfd ping-pong floor.
    public static func makeEventfd() throws(FrameBusError) -> Int32 {
        let fd = cfb_eventfd_blocking()
        guard fd >= 0 else { throw .systemCall("eventfd", Errno(rawValue: errno)) }
        return fd
    }

    /// Adds `value` (non-zero) to an eventfd's counter, waking a reader blocked in ``eventfdRead(_:)``.
    public static func eventfdWrite(_ fd: Int32, _ value: UInt64) {
        var value = value
        _ = unsafe write(fd, &value, 8)
    }

    /// Blocks until an eventfd's counter is non-zero, then reads and resets it; 0 on error.
    public static func eventfdRead(_ fd: Int32) -> UInt64 {
        var value: UInt64 = 0
        while true {
            let count = unsafe read(fd, &value, 8)
            if count == 8 { return value }
            if count < 0 && errno == EINTR { continue }
            return 0
        }
    }

    /// Closes a descriptor made or received here.
    public static func closeDescriptor(_ fd: Int32) { _ = Glibc.close(fd) }

    /// `CLOCK_MONOTONIC` in nanoseconds (the clock the bus stamps frames with).
    public static func monotonicNanoseconds() -> UInt64 { Syscall.monotonicNanoseconds() }

    /// CPU time of this process (user + system), in nanoseconds.
    public static func processCPUNanoseconds() -> UInt64 { Syscall.processCPUNanoseconds() }
}
