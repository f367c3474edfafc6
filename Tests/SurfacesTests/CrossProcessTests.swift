import CFrameBusShims
import Foundation
import Glibc
import SystemPackage
import Testing
import TestSupport

@testable import Surfaces

/// The byte written at (plane, row, column); FrameBusTestPeer's `testPatternByte` computes the same.
func testPatternByte(plane: Int, row: Int, column: Int) -> UInt8 {
    UInt8(truncatingIfNeeded: plane &* 101 &+ row &* 7 &+ column &* 3 &+ (row >> 3))
}

struct PeerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A FrameBusTestPeer child process in `mode`, connected over a SOCK_SEQPACKET socket: send it text with
/// descriptors, read its one-line replies. Every wait is bounded (60 s) so a broken peer fails the test, never hangs it;
/// the peer exits when the session goes (end of file on its socket, and its TestSupport lifeline).
final class PeerSession {
    private let process: ChildProcess
    private let connection: Int32

    init(mode: String) async throws {
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
        // A peer that fails to connect is killed when `process` goes.
        process = try await startPeer([mode, path], captureStandardError: true)
        // The wait is on a thread of its own, never one of Swift's cooperative pool.
        let connected = try await onDedicatedThread("peer-connect") { () -> Bool in
            var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            return poll(&poller, 1, 60_000) == 1
        }
        guard connected else { throw PeerError("peer did not connect: \(process.output)") }
        connection = accept(listener, nil, nil)
        guard connection >= 0 else { throw PeerError("accept: errno \(errno)") }
    }

    deinit {
        close(connection)  // the peer sees end of file and exits; `process` kills it if it has not yet
    }

    /// Sends `text` with `descriptors` (SCM_RIGHTS) in one datagram.
    func send(_ text: String, descriptors: [Int32] = []) throws {
        var control = [UInt8](repeating: 0, count: cfb_cmsg_space(max(1, descriptors.count) * 4))
        var payload = Array(text.utf8)
        let sent = payload.withUnsafeMutableBytes { payloadBytes in
            control.withUnsafeMutableBytes { controlBytes in
                var vector = iovec(iov_base: payloadBytes.baseAddress, iov_len: payloadBytes.count)
                return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                    var message = msghdr()
                    message.msg_iov = vectorPointer
                    message.msg_iovlen = 1
                    if !descriptors.isEmpty {
                        message.msg_control = controlBytes.baseAddress
                        message.msg_controllen = controlBytes.count
                        let header = cfb_cmsg_firsthdr(&message)!
                        header.pointee.cmsg_level = SOL_SOCKET
                        header.pointee.cmsg_type = Int32(SCM_RIGHTS)
                        header.pointee.cmsg_len = Int(cfb_cmsg_len(descriptors.count * 4))
                        let data = UnsafeMutableRawPointer(cfb_cmsg_data(header))
                        for (index, descriptor) in descriptors.enumerated() {
                            data.storeBytes(of: descriptor, toByteOffset: index * 4, as: Int32.self)
                        }
                    }
                    return sendmsg(connection, &message, Int32(MSG_NOSIGNAL))
                }
            }
        }
        guard sent == payload.count else { throw PeerError("sendmsg: errno \(errno)") }
    }

    /// The peer's next reply.
    func receive() async throws -> String {
        let connection = self.connection
        // The wait is on a thread of its own, never one of Swift's cooperative pool.
        let answered = try await onDedicatedThread("peer-reply") { () -> Bool in
            var poller = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
            return poll(&poller, 1, 60_000) == 1
        }
        guard answered else { throw PeerError("peer did not answer") }
        var reply = [UInt8](repeating: 0, count: 1024)
        let count = recv(connection, &reply, reply.count, 0)
        guard count > 0 else { throw PeerError("peer closed without answering") }
        return String(decoding: reply[0..<count], as: UTF8.self)
    }
}

/// Starts the peer in `mode`, hands it `descriptors` with `text`, and returns its first reply.
func exchangeWithPeer(mode: String, text: String, descriptors: [Int32]) async throws -> String {
    let session = try await PeerSession(mode: mode)
    try session.send(text, descriptors: descriptors)
    return try await session.receive()
}

/// The peer's text for a handle: see FrameBusTestPeer/ImportSurface.swift.
func describe(
    _ layout: SurfaceLayout,
    id: SurfaceID,
    dmaBufModifier: UInt64? = nil,
    byteCounts: [Int]? = nil,
    planeDescriptorIndices: [Int]? = nil
) -> String {
    let byteCounts = byteCounts ?? [layout.allocationSize]
    let indices = planeDescriptorIndices ?? layout.planes.map { _ in 0 }
    var fields = [
        Int(id.rawValue & 0x7fff_ffff_ffff_ffff), layout.allocationSize, Int(layout.pixelFormat), layout.width,
        layout.height, dmaBufModifier == nil ? 0 : 1, Int(truncatingIfNeeded: dmaBufModifier ?? 0), byteCounts.count,
    ]
    fields += byteCounts
    fields.append(layout.planes.count)
    for (index, plane) in layout.planes.enumerated() {
        fields += [indices[index], plane.offset, plane.bytesPerRow, plane.width, plane.height, plane.bytesPerElement]
    }
    return fields.map(String.init).joined(separator: " ")
}

/// Writes the test pattern XOR `mask` into every plane of `surface` (through its own, writable mapping).
func writeTestPattern(_ surface: Surface, mask: UInt8 = 0) throws {
    try surface.lock()
    for (index, plane) in surface.layout.planes.enumerated() {
        unsafe surface.withUnsafeMutableBytes(ofPlane: index) { bytes in
            for row in 0..<plane.height {
                for column in 0..<(plane.width * plane.bytesPerElement) {
                    unsafe bytes[row * plane.bytesPerRow + column] =
                        testPatternByte(plane: index, row: row, column: column) ^ mask
                }
            }
        }
    }
    try surface.unlock()
}

/// A memfd of `byteCount` bytes with `seals` added, or -1.
func makeMemFD(_ name: String, byteCount: Int, seals: Int32) -> Int32 {
    let fd = cfb_memfd_create(name, CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING)
    guard fd >= 0 else { return -1 }
    guard ftruncate(fd, off_t(byteCount)) == 0, seals == 0 || cfb_add_seals(fd, seals) == 0 else {
        close(fd)
        return -1
    }
    return fd
}

@Suite(.timeLimit(.minutes(5))) struct CrossProcessTests {
    /// Issue 7, item 1: a consumer cannot write a surface by any route, the producer still can, and the consumer
    /// sees the producer's new bytes.
    @Test func consumerCannotWriteTheSurfaceButSeesTheProducersWrites() async throws {
        let layout = makeTestLayout(width: 320, height: 240)
        let surface = try Surface.makeMemFD(layout: layout)
        try writeTestPattern(surface)
        let handle = try surface.makeHandle()
        let sentID = SurfaceID(rawValue: surface.id.rawValue & 0x7fff_ffff_ffff_ffff)
        let peer = try await PeerSession(mode: "import-surface")
        try peer.send(describe(layout, id: surface.id), descriptors: [handle.borrowedDescriptor.rawValue])
        let reply = try await peer.receive()
        let expectedBytes = layout.planes.reduce(0) { $0 + $1.width * $1.bytesPerElement * $1.height }
        // The exported descriptor is O_RDONLY (mmap: EACCES); a reopen of /proc/self/fd/N with O_RDWR succeeds
        // (memfd inodes are 0777), but F_SEAL_FUTURE_WRITE refuses a writable mapping, pwrite and mprotect (EPERM).
        #expect(
            reply
                == "ok bytes=\(expectedBytes) mismatches=0 readWriteLock=surface is read-only mmapWrite=Permission denied reopen=succeeded reopenMmapWrite=Operation not permitted pwrite=Operation not permitted mprotectWrite=Permission denied id=\(sentID.rawValue)"
        )
        // The producer's own mapping still writes, and the consumer sees it.
        try writeTestPattern(surface, mask: 0x5a)
        try peer.send("again \(0x5a)")
        await #expect(try peer.receive() == "reread mismatches=0")
    }

    /// Protocol v2 surfaces: a memfd per plane, several descriptors in one handle, every plane bit-exact in the
    /// other process, and still no way to write any of them.
    @Test func anotherProcessImportsAMemfdPerPlaneBitExact() async throws {
        let layout = makeTestLayout(width: 320, height: 240)
        let surface = try Surface.makeMemFD(layout: layout, descriptorPerPlane: true)
        try writeTestPattern(surface)
        let handle = try surface.makeHandle()
        #expect(handle.descriptorCount == 2)
        let peer = try await PeerSession(mode: "import-surface")
        try peer.send(
            describe(
                handle.layout,
                id: handle.id,
                byteCounts: handle.descriptorByteCounts,
                planeDescriptorIndices: handle.planeDescriptorIndices
            ),
            descriptors: handle.borrowedDescriptors.map(\.rawValue)
        )
        let reply = try await peer.receive()
        let expectedBytes = layout.planes.reduce(0) { $0 + $1.width * $1.bytesPerElement * $1.height }
        let sentID = surface.id.rawValue & 0x7fff_ffff_ffff_ffff
        #expect(
            reply
                == "ok bytes=\(expectedBytes) mismatches=0 readWriteLock=surface is read-only mmapWrite=Permission denied reopen=succeeded reopenMmapWrite=Operation not permitted pwrite=Operation not permitted mprotectWrite=Permission denied id=\(sentID)"
        )
        try writeTestPattern(surface, mask: 0xa5)
        try peer.send("again \(0xa5)")
        await #expect(try peer.receive() == "reread mismatches=0")
    }

    @Test func anotherProcessRefusesAMemfdWithoutAWriteSeal() async throws {
        let layout = makeTestLayout()
        let fd = makeMemFD(
            "unsealed-writes",
            byteCount: layout.allocationSize,
            seals: CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW | CFB_F_SEAL_SEAL
        )
        try #require(fd >= 0)
        defer { close(fd) }
        let reply = try await exchangeWithPeer(mode: "import-surface", text: describe(layout, id: .next()), descriptors: [fd])
        #expect(reply == "error \(SurfaceError.Code.notWriteSealed)")
    }

    @Test func anotherProcessRefusesAnUnsealedMemfd() async throws {
        let layout = makeTestLayout()
        let fd = makeMemFD("unsealed", byteCount: layout.allocationSize, seals: 0)
        try #require(fd >= 0)
        defer { close(fd) }
        let reply = try await exchangeWithPeer(mode: "import-surface", text: describe(layout, id: .next()), descriptors: [fd])
        #expect(reply == "error \(SurfaceError.Code.notSealed)")
    }

    @Test func anotherProcessRefusesATooSmallMemfd() async throws {
        let layout = makeTestLayout()
        let fd = makeMemFD(
            "small",
            byteCount: layout.allocationSize / 2,
            seals: CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW | CFB_F_SEAL_FUTURE_WRITE | CFB_F_SEAL_SEAL
        )
        try #require(fd >= 0)
        defer { close(fd) }
        let reply = try await exchangeWithPeer(mode: "import-surface", text: describe(layout, id: .next()), descriptors: [fd])
        #expect(reply == "error \(SurfaceError.Code.tooSmall)")
    }
}
