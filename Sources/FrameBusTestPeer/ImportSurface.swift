// Mode "import-surface SOCKET_PATH": receive one surface handle over a SOCK_SEQPACKET socket (SCM_RIGHTS), import it
// read-only, verify every byte against the test pattern, try to write, and reply with a one-line report.
//
// Message from the test: ASCII "id allocationSize format width height planeCount (offset bytesPerRow width height
// bytesPerElement)*" plus one descriptor. Reply: "ok bytes=N readWriteLock=<error code> mmapWrite=<errno>" or
// "error <SurfaceError code>".
import CFrameBusShims
import Foundation
import FrameBus
import Glibc
import SystemPackage

/// The byte the test writes at (plane, row, column).
func testPatternByte(plane: Int, row: Int, column: Int) -> UInt8 {
    UInt8(truncatingIfNeeded: plane &* 101 &+ row &* 7 &+ column &* 3 &+ (row >> 3))
}

func runImportSurface(_ arguments: [String]) -> Int32 {
    guard let path = arguments.first else { return 2 }
    let socket = Glibc.socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard socket >= 0, connectUnix(socket, path: path) else { return 3 }
    defer { close(socket) }
    guard let (text, descriptor) = receiveWithDescriptor(socket) else { return 4 }
    let fields = text.split(separator: " ").compactMap { Int($0) }
    guard fields.count >= 6, fields.count == 6 + 5 * fields[5] else { return 5 }
    var planes: [PlaneLayout] = []
    for index in 0..<fields[5] {
        let f = Array(fields[(6 + 5 * index)..<(11 + 5 * index)])
        planes.append(PlaneLayout(offset: f[0], bytesPerRow: f[1], width: f[2], height: f[3], bytesPerElement: f[4]))
    }
    let layout = SurfaceLayout(
        pixelFormat: UInt32(fields[2]),
        width: fields[3],
        height: fields[4],
        planes: planes,
        allocationSize: fields[1]
    )
    // Before importing: can this descriptor be mapped for writing? It must not (the exporter reopened it O_RDONLY).
    let writableMapping = mmap(nil, max(1, layout.allocationSize), PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0)
    let mmapWrite: String
    if writableMapping == MAP_FAILED {
        mmapWrite = "\(Errno(rawValue: errno))"
    } else {
        munmap(writableMapping, max(1, layout.allocationSize))
        mmapWrite = "succeeded"
    }
    let handle = SurfaceHandle(
        id: SurfaceID(rawValue: UInt64(fields[0])),
        layout: layout,
        descriptor: FileDescriptor(rawValue: descriptor)
    )
    let surface: Surface
    do {
        surface = try Surface.importing(handle)
    } catch {
        sendText(socket, "error \(error.code)")
        return 0
    }
    var checked = 0
    var mismatches = 0
    do {
        try surface.lock(.readOnly)
        for (index, plane) in layout.planes.enumerated() {
            surface.withUnsafeBytes(ofPlane: index) { bytes in
                for row in 0..<plane.height {
                    for column in 0..<(plane.width * plane.bytesPerElement) {
                        if bytes[row * plane.bytesPerRow + column]
                            != testPatternByte(plane: index, row: row, column: column)
                        {
                            mismatches += 1
                        }
                        checked += 1
                    }
                }
            }
        }
        try surface.unlock(.readOnly)
    } catch {
        sendText(socket, "error \(error.code)")
        return 0
    }
    var readWriteLock = "succeeded"
    do { try surface.lock() } catch { readWriteLock = "\(error.code)" }
    sendText(
        socket,
        "ok bytes=\(checked) mismatches=\(mismatches) readWriteLock=\(readWriteLock) mmapWrite=\(mmapWrite) id=\(surface.id.rawValue)"
    )
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

func receiveWithDescriptor(_ socket: Int32) -> (String, Int32)? {
    var payload = [UInt8](repeating: 0, count: 4096)
    var control = [UInt8](repeating: 0, count: cfb_cmsg_space(MemoryLayout<Int32>.size))
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
                guard count > 0, let header = cfb_cmsg_firsthdr(&message), header.pointee.cmsg_type == SCM_RIGHTS
                else { return -1 }
                let descriptor = UnsafeRawPointer(cfb_cmsg_data(header)).loadUnaligned(as: Int32.self)
                controlBytes.storeBytes(of: descriptor, toByteOffset: 0, as: Int32.self)
                return count
            }
        }
    }
    guard received > 0 else { return nil }
    let descriptor = control.withUnsafeBytes { $0.load(fromByteOffset: 0, as: Int32.self) }
    return (String(decoding: payload[0..<received], as: UTF8.self), descriptor)
}

func sendText(_ socket: Int32, _ text: String) {
    _ = Array(text.utf8).withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
}
