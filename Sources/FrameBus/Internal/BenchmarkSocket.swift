// Raw transports for `framebus bench bus`: the SEQPACKET floor and the stream-socket copy the bus is compared with.
// Not API: exposed to the command line and benchmarks as SPI.
import Surfaces
import SystemPackage

/// A blocking-style Unix socket for measuring the transports the bus is compared against.
@_spi(Benchmark) public final class BenchmarkSocket: Sendable {
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

    /// Sends one datagram, waiting for room.
    public func send(_ bytes: [UInt8]) throws(FrameBusError) {
        while true {
            switch socket.send(bytes) {
            case .success(.sent): return
            case .success(.wouldBlock): _ = Syscall.poll([(socket.descriptor, PollEvents.writable)], timeout: 1000)
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

    /// `CLOCK_MONOTONIC` in nanoseconds (the clock the bus stamps frames with).
    public static func monotonicNanoseconds() -> UInt64 { Syscall.monotonicNanoseconds() }

    /// CPU time of this process (user + system), in nanoseconds.
    public static func processCPUNanoseconds() -> UInt64 { Syscall.processCPUNanoseconds() }
}
