import CFrameBusShims
import Foundation
import Glibc
import SystemPackage
import Testing

@testable import Surfaces

/// The byte written at (plane, row, column); FrameBusTestPeer's `testPatternByte` computes the same.
func testPatternByte(plane: Int, row: Int, column: Int) -> UInt8 {
    UInt8(truncatingIfNeeded: plane &* 101 &+ row &* 7 &+ column &* 3 &+ (row >> 3))
}

/// The FrameBusTestPeer executable, built next to the test bundle.
func peerExecutable() throws -> URL {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
        Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent(),
    ]
    for directory in candidates {
        let url = directory.appendingPathComponent("FrameBusTestPeer")
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    throw PeerError("FrameBusTestPeer not found next to \(CommandLine.arguments[0]); run `swift build` first")
}

struct PeerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Starts the peer in `mode`, hands it `descriptor` with `text` over a SOCK_SEQPACKET socket, and returns its reply.
func exchangeWithPeer(mode: String, text: String, descriptor: Int32) throws -> String {
    let path = "/tmp/framebus-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
    let listener = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    defer {
        close(listener)
        unlink(path)
    }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
    }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard bound == 0, listen(listener, 1) == 0 else { throw PeerError("bind/listen: errno \(errno)") }

    let process = Process()
    process.executableURL = try peerExecutable()
    process.arguments = [mode, path]
    try process.run()
    defer {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    // Never hang: wait at most 20 s for the peer to connect and to answer.
    var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
    guard poll(&poller, 1, 20_000) == 1 else { throw PeerError("peer did not connect") }
    let connection = accept(listener, nil, nil)
    guard connection >= 0 else { throw PeerError("accept: errno \(errno)") }
    defer { close(connection) }

    var control = [UInt8](repeating: 0, count: cfb_cmsg_space(MemoryLayout<Int32>.size))
    var payload = Array(text.utf8)
    let sent = payload.withUnsafeMutableBytes { payloadBytes in
        control.withUnsafeMutableBytes { controlBytes in
            var vector = iovec(iov_base: payloadBytes.baseAddress, iov_len: payloadBytes.count)
            return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                var message = msghdr()
                message.msg_iov = vectorPointer
                message.msg_iovlen = 1
                message.msg_control = controlBytes.baseAddress
                message.msg_controllen = controlBytes.count
                let header = cfb_cmsg_firsthdr(&message)!
                header.pointee.cmsg_level = SOL_SOCKET
                header.pointee.cmsg_type = Int32(SCM_RIGHTS)
                header.pointee.cmsg_len = Int(cfb_cmsg_len(MemoryLayout<Int32>.size))
                UnsafeMutableRawPointer(cfb_cmsg_data(header)).storeBytes(of: descriptor, as: Int32.self)
                return sendmsg(connection, &message, Int32(MSG_NOSIGNAL))
            }
        }
    }
    guard sent == payload.count else { throw PeerError("sendmsg: errno \(errno)") }
    poller = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
    guard poll(&poller, 1, 20_000) == 1 else { throw PeerError("peer did not answer") }
    var reply = [UInt8](repeating: 0, count: 1024)
    let count = recv(connection, &reply, reply.count, 0)
    guard count > 0 else { throw PeerError("peer closed without answering") }
    return String(decoding: reply[0..<count], as: UTF8.self)
}

func describe(_ layout: SurfaceLayout, id: SurfaceID) -> String {
    var fields = [
        Int(id.rawValue & 0x7fff_ffff_ffff_ffff), layout.allocationSize, Int(layout.pixelFormat), layout.width,
        layout.height, layout.planes.count,
    ]
    for plane in layout.planes {
        fields += [plane.offset, plane.bytesPerRow, plane.width, plane.height, plane.bytesPerElement]
    }
    return fields.map(String.init).joined(separator: " ")
}

@Suite struct CrossProcessTests {
    @Test func anotherProcessImportsReadOnlyAndSeesEveryByte() throws {
        let layout = makeTestLayout(width: 320, height: 240)
        let surface = try Surface.makeMemFD(layout: layout)
        try surface.lock()
        for (index, plane) in layout.planes.enumerated() {
            unsafe surface.withUnsafeMutableBytes(ofPlane: index) { bytes in
                for row in 0..<plane.height {
                    for column in 0..<(plane.width * plane.bytesPerElement) {
                        unsafe bytes[row * plane.bytesPerRow + column] = testPatternByte(
                            plane: index,
                            row: row,
                            column: column
                        )
                    }
                }
            }
        }
        try surface.unlock()
        let handle = try surface.makeHandle()
        let sentID = SurfaceID(rawValue: surface.id.rawValue & 0x7fff_ffff_ffff_ffff)
        let reply = try exchangeWithPeer(
            mode: "import-surface",
            text: describe(layout, id: surface.id),
            descriptor: handle.borrowedDescriptor.rawValue
        )
        let expectedBytes = layout.planes.reduce(0) { $0 + $1.width * $1.bytesPerElement * $1.height }
        #expect(
            reply
                == "ok bytes=\(expectedBytes) mismatches=0 readWriteLock=surface is read-only mmapWrite=Permission denied id=\(sentID.rawValue)"
        )
    }

    @Test func anotherProcessRefusesAnUnsealedMemfd() throws {
        let layout = makeTestLayout()
        let fd = cfb_memfd_create("unsealed", CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING)
        defer { close(fd) }
        #expect(ftruncate(fd, off_t(layout.allocationSize)) == 0)
        let reply = try exchangeWithPeer(mode: "import-surface", text: describe(layout, id: .next()), descriptor: fd)
        #expect(reply == "error \(SurfaceError.Code.notSealed)")
    }

    @Test func anotherProcessRefusesATooSmallMemfd() throws {
        let layout = makeTestLayout()
        let fd = cfb_memfd_create("small", CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING)
        defer { close(fd) }
        #expect(ftruncate(fd, off_t(layout.allocationSize / 2)) == 0)
        #expect(cfb_add_seals(fd, CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW | CFB_F_SEAL_SEAL) == 0)
        let reply = try exchangeWithPeer(mode: "import-surface", text: describe(layout, id: .next()), descriptor: fd)
        #expect(reply == "error \(SurfaceError.Code.tooSmall)")
    }
}
