// Hostile subscriber modes of the test peer (the publisher's tests; hostile publishers live elsewhere).
//
// bus-hoarder PATH [--queue N] [--version 1|2] [--timeout S]
//   Speaks the protocol by hand: HELLO (queue N, or latest-only without --queue), then reads every message and
//   never releases a frame. Prints "welcome held=H" and then "hoard frames=F drops=D" once a second.
//
// bus-flood PATH --count N [--timeout S]
//   Keeps up to N connections open that never say HELLO, replacing those the publisher closes. Prints
//   "flood open=O opened=T refused=R" once a second.
// CFrameBusShims includes <sys/socket.h>: in a compile job that also loads it (other files of this target import
// it), the socket constants may belong to it rather than to Glibc, and a file that imports only Glibc then fails
// with "cannot find 'SOCK_SEQPACKET' in scope" depending on how files are batched. Importing both is robust.
import CFrameBusShims
import Foundation
import FrameBus
import Glibc

struct PeerErrno: Error {
    var code: Int32
}

/// A SOCK_SEQPACKET connection to `path`, or the errno.
func connectSeqpacket(_ path: String, nonBlocking: Bool) -> Result<Int32, PeerErrno> {
    var type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    if nonBlocking { type |= Int32(SOCK_NONBLOCK.rawValue) }
    let fd = socket(AF_UNIX, type, 0)
    guard fd >= 0 else { return .failure(PeerErrno(code: errno)) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
        close(fd)
        return .failure(PeerErrno(code: ENAMETOOLONG))
    }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (index, byte) in bytes.enumerated() { raw[index] = byte }
    }
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard result == 0 else {
        let error = errno
        close(fd)
        return .failure(PeerErrno(code: error))
    }
    return .success(fd)
}

func runBusHoarder(_ arguments: [String]) -> Int32 {
    guard let path = arguments.first else { return 2 }
    let options = PeerOptions(arguments.dropFirst())
    guard case .success(let fd) = connectSeqpacket(path, nonBlocking: false) else {
        emit("refused connect")
        return 0
    }
    defer { close(fd) }
    let depth = options.values["queue"].flatMap { UInt16($0) }
    // --accept 420v,&8v0: the formats asked for (default 420v).
    let formats = (options.values["accept"] ?? "420v").split(separator: ",").compactMap {
        try? PixelFormat(String($0)).fourCC
    }
    let hello = WireMessage.hello(
        WireHello(
            version: UInt16(options.int("version", 2)),
            deliveryMode: depth == nil ? 0 : 1,
            queueDepth: depth ?? 1,
            formats: formats
        )
    ).encoded()
    _ = hello.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    let deadline = Date().addingTimeInterval(Double(options.int("timeout", 60)))
    var frames = 0
    var drops: UInt64 = 0
    var lastReport = Date()
    var buffer = [UInt8](repeating: 0, count: 4097)
    var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    while Date() < deadline {
        // recv without room for control data: the kernel closes any fds that came along (MSG_CTRUNC).
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count == 0 { break }
        if count > 0, let message = try? WireMessage.decode(Array(buffer[0..<count]), descriptorCount: 0) {
            switch message {
            case .welcome(let welcome): emit("welcome held=\(welcome.maximumHeldFrames)")
            case .frame: frames += 1
            case .drop(let drop): drops &+= drop.frameCount
            case .error(let error): emit("error code=\(error.code)")
            default: break
            }
        } else if count > 0, buffer[0] == 0x12 || buffer[0] == 0x10 {
            // A SURFACE: its fds were cut off, so it does not decode with its descriptor count; fine.
        }
        if Date().timeIntervalSince(lastReport) >= 1 {
            lastReport = Date()
            emit("hoard frames=\(frames) drops=\(drops)")
        }
    }
    emit("hoard frames=\(frames) drops=\(drops)")
    return 0
}

func runBusFlood(_ arguments: [String]) -> Int32 {
    guard let path = arguments.first else { return 2 }
    let options = PeerOptions(arguments.dropFirst())
    let target = options.int("count", 1000)
    let deadline = Date().addingTimeInterval(Double(options.int("timeout", 60)))
    var open: [Int32] = []
    var opened = 0
    var refused = 0
    var lastReport = Date()
    var scratch = [UInt8](repeating: 0, count: 4097)
    while Date() < deadline {
        // Top up: as many new connections as the backlog takes right now.
        topUp: while open.count < target {
            switch connectSeqpacket(path, nonBlocking: true) {
            case .success(let fd):
                open.append(fd)
                opened += 1
            case .failure:
                refused += 1
                break topUp
            }
        }
        // Forget the connections the publisher closed (it may have sent an ERROR first).
        open = open.filter { fd in
            let count = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count == 0 || (count < 0 && errno != EAGAIN) {
                close(fd)
                return false
            }
            return true
        }
        if Date().timeIntervalSince(lastReport) >= 1 {
            lastReport = Date()
            emit("flood open=\(open.count) opened=\(opened) refused=\(refused)")
        }
        usleep(10_000)
    }
    for fd in open { close(fd) }
    return 0
}
