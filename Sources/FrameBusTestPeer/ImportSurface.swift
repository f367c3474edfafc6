// Mode "import-surface SOCKET_PATH": receive one surface handle over a SOCK_SEQPACKET socket (SCM_RIGHTS), try to
// write through it the ways a hostile consumer would, import it read-only, verify every byte against the test
// pattern, and reply with a one-line report. Then, until the socket closes, answer each "again X" with a re-read of
// the surface against the pattern XOR X (the producer has rewritten it in the meantime).
//
// Message from the test: ASCII
//   "id allocationSize format width height backing modifier descriptorCount byteCount{descriptorCount}
//    planeCount (descriptorIndex offset bytesPerRow width height bytesPerElement){planeCount}"
// (backing: 0 memfd, 1 DMA-BUF) plus `descriptorCount` descriptors.
// Replies: "ok bytes=N mismatches=M readWriteLock=<error> mmapWrite=<errno> reopen=<errno> reopenMmapWrite=<errno>
// pwrite=<errno> mprotectWrite=<errno> id=ID" (each attack says "succeeded" if it worked, "n/a" for a DMA-BUF) or
// "error <SurfaceError code>"; then "reread mismatches=M" per "again X".
import CFrameBusShims
import Foundation
import FrameBus
import Glibc
import SystemPackage

/// The byte the test writes at (plane, row, column).
func testPatternByte(plane: Int, row: Int, column: Int) -> UInt8 {
    UInt8(truncatingIfNeeded: plane &* 101 &+ row &* 7 &+ column &* 3 &+ (row >> 3))
}

/// What a hostile consumer tries on a memfd it received: each field is "succeeded" or the errno that stopped it.
struct WriteAttempts {
    var mmapWrite = "n/a"
    var reopen = "n/a"
    var reopenMmapWrite = "n/a"
    var pwrite = "n/a"
    var mprotectWrite = "n/a"

    var report: String {
        "mmapWrite=\(mmapWrite) reopen=\(reopen) reopenMmapWrite=\(reopenMmapWrite) pwrite=\(pwrite) mprotectWrite=\(mprotectWrite)"
    }

    /// Keeps "succeeded" from any descriptor; otherwise the first descriptor's errno.
    mutating func merge(_ other: WriteAttempts, first: Bool) {
        func pick(_ mine: String, _ theirs: String) -> String {
            if first || theirs == "succeeded" { return theirs }
            return mine
        }
        mmapWrite = pick(mmapWrite, other.mmapWrite)
        reopen = pick(reopen, other.reopen)
        reopenMmapWrite = pick(reopenMmapWrite, other.reopenMmapWrite)
        pwrite = pick(pwrite, other.pwrite)
        mprotectWrite = pick(mprotectWrite, other.mprotectWrite)
    }
}

private func errnoText() -> String { "\(Errno(rawValue: errno))" }

/// Tries to get write access to `descriptor`'s file: a writable shared mapping of the descriptor itself; a reopen
/// through /proc/self/fd with O_RDWR (memfd inodes are mode 0777), then a writable mapping, `pwrite`, and `mprotect`
/// of a read-only mapping to read-write. Nothing written changes a byte (the byte at 0 is written back as read).
func attemptWrites(_ descriptor: Int32, byteCount: Int) -> WriteAttempts {
    var attempts = WriteAttempts()
    let length = max(1, byteCount)
    let direct = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0)
    if direct == MAP_FAILED {
        attempts.mmapWrite = errnoText()
    } else {
        munmap(direct, length)
        attempts.mmapWrite = "succeeded"
    }
    let reopened = open("/proc/self/fd/\(descriptor)", O_RDWR | O_CLOEXEC)
    guard reopened >= 0 else {
        attempts.reopen = errnoText()
        return attempts
    }
    defer { close(reopened) }
    attempts.reopen = "succeeded"
    let writable = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, reopened, 0)
    if writable == MAP_FAILED {
        attempts.reopenMmapWrite = errnoText()
    } else {
        munmap(writable, length)
        attempts.reopenMmapWrite = "succeeded"
    }
    var byte: UInt8 = 0
    _ = pread(reopened, &byte, 1, 0)
    attempts.pwrite = pwrite(reopened, &byte, 1, 0) == 1 ? "succeeded" : errnoText()
    let readable = mmap(nil, length, PROT_READ, MAP_SHARED, reopened, 0)
    if readable == MAP_FAILED {
        attempts.mprotectWrite = "mmap: \(errnoText())"
    } else {
        attempts.mprotectWrite = mprotect(readable, length, PROT_READ | PROT_WRITE) == 0 ? "succeeded" : errnoText()
        munmap(readable, length)
    }
    return attempts
}

/// A handle description parsed from the test's message.
struct HandleDescription {
    var id: UInt64
    var layout: SurfaceLayout
    var isDMABuf: Bool
    var modifier: UInt64
    var byteCounts: [Int]
    var planeDescriptorIndices: [Int]

    init?(_ text: String) {
        let fields = text.split(separator: " ").compactMap { Int($0) }
        guard fields.count >= 8 else { return nil }
        let descriptorCount = fields[7]
        guard descriptorCount >= 0, descriptorCount <= 8, fields.count >= 9 + descriptorCount else { return nil }
        let planeCount = fields[8 + descriptorCount]
        let planeStart = 9 + descriptorCount
        guard planeCount >= 0, planeCount <= 8, fields.count == planeStart + 6 * planeCount else { return nil }
        var planes: [PlaneLayout] = []
        var indices: [Int] = []
        for index in 0..<planeCount {
            let f = Array(fields[(planeStart + 6 * index)..<(planeStart + 6 * index + 6)])
            indices.append(f[0])
            planes.append(
                PlaneLayout(offset: f[1], bytesPerRow: f[2], width: f[3], height: f[4], bytesPerElement: f[5])
            )
        }
        id = UInt64(fields[0])
        layout = SurfaceLayout(
            pixelFormat: UInt32(truncatingIfNeeded: fields[2]),
            width: fields[3],
            height: fields[4],
            planes: planes,
            allocationSize: fields[1]
        )
        isDMABuf = fields[5] == 1
        modifier = UInt64(bitPattern: Int64(fields[6]))
        byteCounts = Array(fields[8..<(8 + descriptorCount)])
        planeDescriptorIndices = indices
    }
}

/// Counts the plane bytes (row padding excluded) that differ from the test pattern XOR `mask`.
func countMismatches(_ surface: Surface, mask: UInt8) throws(SurfaceError) -> (checked: Int, mismatches: Int) {
    var checked = 0
    var mismatches = 0
    try surface.lock(.readOnly)
    for (index, plane) in surface.layout.planes.enumerated() {
        surface.withUnsafeBytes(ofPlane: index) { bytes in
            for row in 0..<plane.height {
                for column in 0..<(plane.width * plane.bytesPerElement) {
                    if bytes[row * plane.bytesPerRow + column]
                        != testPatternByte(plane: index, row: row, column: column) ^ mask
                    {
                        mismatches += 1
                    }
                    checked += 1
                }
            }
        }
    }
    try surface.unlock(.readOnly)
    return (checked, mismatches)
}

func runImportSurface(_ arguments: [String]) -> Int32 {
    guard let path = arguments.first else { return 2 }
    let socket = Glibc.socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard socket >= 0, connectUnix(socket, path: path) else { return 3 }
    defer { close(socket) }
    guard let (text, descriptors) = receiveWithDescriptors(socket) else { return 4 }
    guard let description = HandleDescription(text), description.byteCounts.count == descriptors.count else {
        for descriptor in descriptors { close(descriptor) }
        sendText(socket, "error unparsable handle")
        return 5
    }
    var attempts = WriteAttempts()
    if !description.isDMABuf {
        for (index, descriptor) in descriptors.enumerated() {
            attempts.merge(
                attemptWrites(descriptor, byteCount: description.byteCounts[index]),
                first: index == 0
            )
        }
    }
    let handle = SurfaceHandle(
        id: SurfaceID(rawValue: description.id),
        layout: description.layout,
        backing: description.isDMABuf ? .dmaBuf(modifier: description.modifier) : .memfd,
        descriptors: descriptors.map { FileDescriptor(rawValue: $0) },
        planeDescriptorIndices: description.planeDescriptorIndices,
        descriptorByteCounts: description.byteCounts
    )
    let surface: Surface
    do {
        surface = try Surface.importing(handle)
    } catch {
        sendText(socket, "error \(error.code)")
        return 0
    }
    let first: (checked: Int, mismatches: Int)
    do { first = try countMismatches(surface, mask: 0) } catch {
        sendText(socket, "error \(error.code)")
        return 0
    }
    var readWriteLock = "succeeded"
    do { try surface.lock() } catch { readWriteLock = "\(error.code)" }
    sendText(
        socket,
        "ok bytes=\(first.checked) mismatches=\(first.mismatches) readWriteLock=\(readWriteLock) \(attempts.report) id=\(surface.id.rawValue)"
    )
    // Re-reads on request, until the test closes the socket.
    while let (request, extra) = receiveWithDescriptors(socket) {
        for descriptor in extra { close(descriptor) }
        let words = request.split(separator: " ")
        guard words.count == 2, words[0] == "again", let mask = UInt8(words[1]) else { break }
        do {
            let again = try countMismatches(surface, mask: mask)
            sendText(socket, "reread mismatches=\(again.mismatches)")
        } catch {
            sendText(socket, "error \(error.code)")
        }
    }
    return 0
}

func connectUnix(_ socket: Int32, path: String) -> Bool {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (index, byte) in bytes.enumerated() { raw[index] = byte }
    }
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(socket, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
        }
    }
}

/// Receives one datagram and the descriptors (up to 8) that came with it; `nil` at end of file or on error.
func receiveWithDescriptors(_ socket: Int32) -> (String, [Int32])? {
    var payload = [UInt8](repeating: 0, count: 4096)
    var control = [UInt8](repeating: 0, count: cfb_cmsg_space(8 * MemoryLayout<Int32>.size))
    var descriptors: [Int32] = []
    let received: Int = payload.withUnsafeMutableBytes { payloadBytes in
        control.withUnsafeMutableBytes { controlBytes in
            var vector = iovec(iov_base: payloadBytes.baseAddress, iov_len: payloadBytes.count)
            return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                var message = msghdr()
                message.msg_iov = vectorPointer
                message.msg_iovlen = 1
                message.msg_control = controlBytes.baseAddress
                message.msg_controllen = controlBytes.count
                let count = recvmsg(socket, &message, Int32(MSG_CMSG_CLOEXEC))
                guard count > 0 else { return -1 }
                var cursor = cfb_cmsg_firsthdr(&message)
                while let header = cursor {
                    if header.pointee.cmsg_level == SOL_SOCKET && header.pointee.cmsg_type == SCM_RIGHTS {
                        let dataLength = Int(header.pointee.cmsg_len) - Int(cfb_cmsg_len(0))
                        let data = UnsafeRawPointer(cfb_cmsg_data(header))
                        for index in 0..<max(0, dataLength / 4) {
                            descriptors.append(data.loadUnaligned(fromByteOffset: index * 4, as: Int32.self))
                        }
                    }
                    cursor = cfb_cmsg_nxthdr(&message, header)
                }
                return count
            }
        }
    }
    guard received > 0 else { return nil }
    return (String(decoding: payload[0..<received], as: UTF8.self), descriptors)
}

func sendText(_ socket: Int32, _ text: String) {
    _ = Array(text.utf8).withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
}
