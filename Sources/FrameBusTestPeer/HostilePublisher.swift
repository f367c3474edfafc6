// Mode "hostile-publisher PATH SCENARIO": a publisher that breaks the protocol on purpose, for the tests of a real
// Subscriber in the test process. It listens at PATH, prints "listening", accepts one subscriber (exiting if none
// comes within a minute), answers its HELLO with a WELCOME for the first format it asked for, then plays SCENARIO
// and reports on stdout:
//   sent N            messages of the scenario sent so far (after the scenario's burst)
//   error code=C      the subscriber replied with ERROR code C
//   closed after N    the subscriber closed the connection after N scenario messages
//
// Scenarios:
//   drop-everything   DROP 0...UInt64.max (outOfBuffers), then an honest surface and frame 0, then END_OF_STREAM
//   drop-overflow     two DROPs of 2^63-1 frames each (0...2^63-2, 2^63-1...2^64-3), a frame, END_OF_STREAM
//   unsealed-surface  a SURFACE whose memfd has no seals at all
//   no-write-seal     a SURFACE whose memfd is sealed against shrinking and growing but not against writes (anyone
//                     holding it could reopen it writable and change what others read)
//   reannounce        SURFACE 1, then SURFACE 1 again while it is live
//   surface-flood     SURFACEs 1, 2, 3, ... until the subscriber hangs up (at most 100000)
//   never-read        SURFACE 1, then FRAMEs on it forever without ever reading the subscriber's RELEASEs
//   huge-compressed   (the subscriber accepts &8v0) an honest 64x48 compressed surface and a damaged frame on it;
//                     once that frame is given back (at most 5 s), a surface of 4 KiB that claims 16384x16384 and a
//                     frame on it
//   huge-sparse-compressed  (the subscriber accepts &8v0) a compressed surface that claims 16384x16384 in a sparse
//                     memfd as large as such a surface must be (the size rule of PROTOCOL.md §5.4 holds), of which
//                     only the first 4 KiB are written, and a frame of 3,328 bytes on it: the decode amplification
//                     a subscriber's size policy refuses (§8.2)
//   multi-descriptor  an honest surface with one memfd per plane (Y bytes 0x11, CbCr bytes 0x22), frame 0,
//                     END_OF_STREAM
//   multi-descriptor-short  the same, but the CbCr descriptor's byte count claims twice its memfd's size
//   dma-buf           the same as multi-descriptor with a DMA-BUF surface from /dev/dma_heap/system or /dev/udmabuf
//   dma-buf-per-plane the same with one DMA-BUF per plane (two /dev/dma_heap/system buffers)
//   dma-buf-short     a DMA-BUF surface whose CbCr byte count claims twice the buffer's size
//   memfd-as-dma-buf  an honest sealed memfd surface announced as a DMA-BUF
//   dma-buf-tiled     a DMA-BUF surface announced with a tiled modifier (I915_FORMAT_MOD_X_TILED)
//   dma-buf-write-only  a DMA-BUF its exporter made write-only (DMA_HEAP_IOCTL_ALLOC with O_WRONLY): every read
//                     mapping of it is refused (EACCES)
//   over-grant        SURFACE 1, then 50 FRAMEs, 5 ms apart, reading our RELEASEs but ignoring its own grant of 8 held
//                     frames (the test keeps every frame)
//   error-reason      ERROR tooSlow whose reason holds terminal escape sequences, then close
//   rewrite           SURFACE 1 and frames on it, rewriting its bytes (0x11, 0x22, ...) while the subscriber holds
//                     them, until the subscriber hangs up
import CFrameBusShims
import Foundation
import FrameBus
import Glibc
import SystemPackage

/// A raw SOCK_SEQPACKET connection of the hostile publisher.
struct RawConnection {
    let descriptor: Int32

    /// Sends one datagram (with `fds` as SCM_RIGHTS); false when the peer is gone.
    @discardableResult
    func send(_ message: WireMessage, fds: [Int32] = [], blocking: Bool = true) -> Bool {
        let bytes = message.encoded()
        while true {
            let result = sendRaw(bytes, fds: fds)
            if result >= 0 { return true }
            if errno == EAGAIN && blocking {
                var poll = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                _ = Glibc.poll(&poll, 1, 1000)
                continue
            }
            return false
        }
    }

    enum SendResult { case sent, full, closed }

    /// Sends without waiting for room.
    func trySend(_ message: WireMessage) -> SendResult {
        if sendRaw(message.encoded(), fds: []) >= 0 { return .sent }
        return errno == EAGAIN ? .full : .closed
    }

    private func sendRaw(_ bytes: [UInt8], fds: [Int32]) -> Int {
        var bytes = bytes
        return bytes.withUnsafeMutableBytes { payload in
            var vector = iovec(iov_base: payload.baseAddress, iov_len: payload.count)
            var message = msghdr()
            return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                message.msg_iov = vectorPointer
                message.msg_iovlen = 1
                guard !fds.isEmpty else {
                    return Glibc.sendmsg(descriptor, &message, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                }
                let payloadSize = fds.count * MemoryLayout<Int32>.size
                var control = [UInt8](repeating: 0, count: cfb_cmsg_space(payloadSize))
                return control.withUnsafeMutableBytes { controlBytes in
                    message.msg_control = controlBytes.baseAddress
                    message.msg_controllen = controlBytes.count
                    let header = cfb_cmsg_firsthdr(&message)!
                    header.pointee.cmsg_level = SOL_SOCKET
                    header.pointee.cmsg_type = Int32(SCM_RIGHTS)
                    header.pointee.cmsg_len = cfb_cmsg_len(payloadSize)
                    let data = UnsafeMutableRawPointer(cfb_cmsg_data(header))
                    for (index, fd) in fds.enumerated() {
                        data.storeBytes(of: fd, toByteOffset: index * 4, as: Int32.self)
                    }
                    return Glibc.sendmsg(descriptor, &message, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                }
            }
        }
    }

    enum Incoming {
        case message(WireMessage)
        case closed
        case nothing
    }

    /// Reads one datagram if one is there (or waits up to `timeout` ms).
    func receive(timeout: Int32 = 0) -> Incoming {
        var poll = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard Glibc.poll(&poll, 1, timeout) > 0 else { return .nothing }
        var buffer = [UInt8](repeating: 0, count: 4097)
        var count = Glibc.recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        if count < 0 && errno == ECONNRESET {
            // The subscriber closed with our datagrams unread: the reset is reported before the datagrams it sent
            // first (its ERROR); read once more to get them.
            count = Glibc.recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        }
        if count == 0 { return .closed }
        if count < 0 { return errno == EAGAIN ? .nothing : .closed }
        // A version-3 HELLO's two fds were closed by the kernel (no room for control data): this publisher speaks
        // version 2 and answers it with a version-2 WELCOME, which the protocol allows (docs/PROTOCOL.md §9.1).
        let bytes = Array(buffer[0..<count])
        guard
            let message = (try? WireMessage.decode(bytes, descriptorCount: 0))
                ?? (try? WireMessage.decode(bytes, descriptorCount: 2))
        else {
            return .nothing
        }
        return .message(message)
    }

    /// Reads everything waiting; returns false when the peer closed. Reports an ERROR.
    func drain(sent: Int) -> Bool {
        while true {
            switch receive() {
            case .nothing: return true
            case .closed:
                emit("closed after \(sent)")
                return false
            case .message(.error(let error)):
                emit("error code=\(error.code)")
            case .message: continue
            }
        }
    }

    /// Waits (up to `seconds`) for the subscriber to reply or hang up, reporting what it did.
    /// Waits (at most `seconds`) for the subscriber to give a frame back (RELEASE): what it has taken is then out of
    /// its queue, whatever the next message does to the session. Returns whether a RELEASE came.
    @discardableResult
    func awaitRelease(seconds: Int = 30) -> Bool {
        let deadline = Date().addingTimeInterval(Double(seconds))
        while Date() < deadline {
            switch receive(timeout: 100) {
            case .closed: return false
            case .message(.release): return true
            default: continue
            }
        }
        return false
    }

    func awaitVerdict(sent: Int, seconds: Int = 120) {
        let deadline = Date().addingTimeInterval(Double(seconds))
        while Date() < deadline {
            switch receive(timeout: 100) {
            case .closed:
                emit("closed after \(sent)")
                return
            case .message(.error(let error)):
                emit("error code=\(error.code)")
            default: continue
            }
        }
        emit("still open after \(sent)")
    }
}

func listenUnix(path: String) -> Int32? {
    unlink(path)
    let socket = Glibc.socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard socket >= 0 else { return nil }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (index, byte) in bytes.enumerated() { raw[index] = byte }
    }
    let bound = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(socket, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
        }
    }
    guard bound, listen(socket, 4) == 0 else { return nil }
    return socket
}

/// A sealed, honest surface of the library's own making, and the read-only descriptor to send with it.
func honestSurface(
    _ format: PixelFormat,
    width: Int = 64,
    height: Int = 48,
    fill: UInt8 = 0x11
) throws -> (
    buffer: PixelBuffer, announcement: WireSurface, descriptor: Int32
) {
    let buffer: PixelBuffer
    if format.isCompressed {
        buffer = try SurfaceCodec.makeCompressedBuffer(width: width, height: height, format: format)
        let raw = try PixelBuffer(width: width, height: height, pixelFormat: format.base)
        try raw.lock()
        try raw.withUnsafeMutableBytes(ofPlane: 0) { bytes in
            for index in bytes.indices { bytes[index] = fill }
        }
        try raw.unlock()
        _ = try SurfaceCodec.compress(raw, into: buffer)
    } else {
        buffer = try PixelBuffer(width: width, height: height, pixelFormat: format)
        try buffer.lock()
        for plane in 0..<buffer.planeCount {
            try buffer.withUnsafeMutableBytes(ofPlane: plane) { bytes in
                for index in bytes.indices { bytes[index] = fill }
            }
        }
        try buffer.unlock()
    }
    let layout = buffer.surface.layout
    let announcement = WireSurface(
        surfaceID: 1,
        pixelFormat: layout.pixelFormat,
        width: UInt32(layout.width),
        height: UInt32(layout.height),
        descriptorByteCounts: [UInt64(layout.allocationSize)],
        planes: layout.planes.map {
            WireSurfacePlane(
                offset: UInt64($0.offset),
                bytesPerRow: UInt32($0.bytesPerRow),
                width: UInt32($0.width),
                height: UInt32($0.height),
                bytesPerElement: UInt32($0.bytesPerElement)
            )
        }
    )
    let handle = try buffer.surface.makeHandle()
    return (buffer, announcement, handle.takeDescriptor().rawValue)
}

func hostileFrame(_ sequence: UInt64, surface: UInt64 = 1, bytesUsed: UInt64 = 16) -> WireMessage {
    .frame(
        WireFrame(
            sequence: sequence,
            surfaceID: surface,
            presentationTime: .invalid,
            duration: .invalid,
            publishTime: UInt64(DispatchTime.now().uptimeNanoseconds),
            bytesUsed: bytesUsed,
            flags: 0
        )
    )
}

func runHostilePublisher(_ arguments: [String]) -> Int32 {
    guard arguments.count >= 2, let listener = listenUnix(path: arguments[0]) else { return 2 }
    let scenario = arguments[1]
    emit("listening")
    defer { unlink(arguments[0]) }
    // A test that died before connecting ends this peer through its lifeline (main.swift); without one, give up after
    // ten minutes without a subscriber, long enough for any slow machine.
    var pending = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
    guard Glibc.poll(&pending, 1, 600_000) > 0 else {
        emit("nobody connected")
        return 3
    }
    let accepted = accept(listener, nil, nil)
    guard accepted >= 0 else { return 3 }
    let connection = RawConnection(descriptor: accepted)
    guard case .message(.hello(let hello)) = connection.receive(timeout: 120_000) else {
        emit("no hello")
        return 4
    }
    let format = (try? PixelFormat(fourCC: hello.formats[0])) ?? .yuv420BiPlanarVideoRange8
    connection.send(
        .welcome(
            WireWelcome(
                version: 2,
                deliveryMode: hello.deliveryMode,
                queueDepth: hello.queueDepth,
                maximumHeldFrames: 8,
                format: format.fourCC,
                maximumMessageSize: 4096,
                streamID: 99,
                subscriberID: 1,
                nextSequence: 0,
                maximumAnnouncedSurfaces: 256
            )
        )
    )
    do {
        try play(scenario, format: format, on: connection)
    } catch {
        emit("peer failed: \(error)")
        return 5
    }
    return 0
}

private func play(_ scenario: String, format: PixelFormat, on connection: RawConnection) throws {
    switch scenario {
    case "drop-everything":
        connection.send(.drop(WireDrop(firstSequence: 0, lastSequence: .max, reason: 2)))
        let surface = try honestSurface(format)
        connection.send(.surface(surface.announcement), fds: [surface.descriptor])
        connection.send(hostileFrame(0))
        connection.send(.endOfStream(WireEndOfStream(lastSequence: 0, reason: 0)))
        emit("sent 4")
        connection.awaitVerdict(sent: 4)
    case "drop-overflow":
        let half = UInt64(Int64.max)  // 2^63 - 1 frames per DROP
        connection.send(.drop(WireDrop(firstSequence: 0, lastSequence: half - 1, reason: 2)))
        connection.send(.drop(WireDrop(firstSequence: half, lastSequence: 2 * half - 1, reason: 2)))
        let surface = try honestSurface(format)
        connection.send(.surface(surface.announcement), fds: [surface.descriptor])
        connection.send(hostileFrame(2 * half))
        connection.send(.endOfStream(WireEndOfStream(lastSequence: 2 * half, reason: 0)))
        emit("sent 5")
        connection.awaitVerdict(sent: 5)
    case "unsealed-surface", "no-write-seal":
        let surface = try honestSurface(format)
        let fd = cfb_memfd_create("hostile", CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING)
        guard fd >= 0, ftruncate(fd, off_t(surface.announcement.descriptorByteCounts[0])) == 0 else { return }
        if scenario == "no-write-seal" {
            guard cfb_add_seals(fd, CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW | CFB_F_SEAL_SEAL) == 0 else { return }
        }
        connection.send(.surface(surface.announcement), fds: [fd])
        connection.send(hostileFrame(0))
        emit("sent 2")
        connection.awaitVerdict(sent: 2)
    case "reannounce":
        let first = try honestSurface(format)
        let second = try honestSurface(format)
        connection.send(.surface(first.announcement), fds: [first.descriptor])
        connection.send(.surface(second.announcement), fds: [second.descriptor])
        emit("sent 2")
        connection.awaitVerdict(sent: 2)
    case "surface-flood":
        let surface = try honestSurface(format)
        var sent = 0
        for id in 1...100_000 {
            var announcement = surface.announcement
            announcement.surfaceID = UInt64(id)
            let fd = dup(surface.descriptor)
            let ok = connection.send(.surface(announcement), fds: [fd])
            close(fd)
            guard ok else { break }
            sent += 1
            guard connection.drain(sent: sent) else { return }
        }
        emit("sent \(sent)")
        connection.awaitVerdict(sent: sent)
    case "never-read":
        let surface = try honestSurface(format)
        connection.send(.surface(surface.announcement), fds: [surface.descriptor])
        var sent = 0
        var sequence: UInt64 = 0
        let deadline = Date().addingTimeInterval(60)
        // Never reads: keeps writing until the subscriber hangs up.
        while Date() < deadline {
            switch connection.trySend(hostileFrame(sequence)) {
            case .sent:
                sequence += 1
                sent += 1
                continue
            case .full:
                usleep(200)
                continue
            case .closed:
                break
            }
            break
        }
        emit("closed after \(sent)")
    case "huge-compressed":
        let honest = try honestSurface(format)
        connection.send(.surface(honest.announcement), fds: [honest.descriptor])
        connection.send(hostileFrame(0, bytesUsed: 64))
        // The damaged frame is taken (and given back) before the surface that ends the session: a subscriber that read
        // both at once could end the session before its consumer took the frame (a race a loaded CI machine won).
        // A consumer that keeps the frame (the tests that collect every event) gets the surface after 5 s anyway.
        connection.awaitRelease(seconds: 5)
        let tiny = cfb_memfd_create("tiny", CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING)
        guard tiny >= 0, ftruncate(tiny, 4096) == 0 else { return }
        _ = cfb_add_seals(tiny, CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW | CFB_F_SEAL_WRITE | CFB_F_SEAL_SEAL)
        var huge = honest.announcement
        huge.surfaceID = 2
        huge.width = 16384
        huge.height = 16384
        huge.descriptorByteCounts = [4096]
        connection.send(.surface(huge), fds: [tiny])
        connection.send(hostileFrame(1, surface: 2, bytesUsed: 64))
        emit("sent 4")
        connection.awaitVerdict(sent: 4)
    case "huge-sparse-compressed":
        let size = try SurfaceCodec.minimumCompressedByteCount(width: 16384, height: 16384, format: format)
        let sparse = cfb_memfd_create("sparse", CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING)
        guard sparse >= 0, ftruncate(sparse, off_t(size)) == 0 else { return }
        var page = [UInt8](repeating: 0, count: 4096)
        guard pwrite(sparse, &page, page.count, 0) == page.count else { return }
        _ = cfb_add_seals(sparse, CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW | CFB_F_SEAL_WRITE | CFB_F_SEAL_SEAL)
        var huge = try honestSurface(format).announcement
        huge.width = 16384
        huge.height = 16384
        huge.descriptorByteCounts = [UInt64(size)]
        connection.send(.surface(huge), fds: [sparse])
        connection.send(hostileFrame(0, surface: huge.surfaceID, bytesUsed: 3328))
        emit("sent 2")
        connection.awaitVerdict(sent: 2)
    case "multi-descriptor", "multi-descriptor-short", "dma-buf", "dma-buf-per-plane", "dma-buf-short",
        "memfd-as-dma-buf", "dma-buf-tiled", "dma-buf-write-only":
        let layout = try PixelBuffer.layout(width: 64, height: 48, pixelFormat: format)
        let surface: Surface
        let allocator = [DMABufAllocator.systemHeap, .udmabuf].first(where: \.isAvailable)
        if scenario.hasPrefix("dma-buf") && allocator == nil {
            emit("no DMA-BUF device")
            return
        }
        if scenario == "dma-buf-write-only" {
            try playWriteOnlyDMABuf(layout: layout, on: connection)
            return
        }
        if scenario == "dma-buf-per-plane" {
            surface = try makeDMABufPerPlane(layout: layout)
        } else if scenario.hasPrefix("dma-buf"), let allocator {
            surface = try allocator.makeSurface(layout: layout)
        } else if scenario == "memfd-as-dma-buf" {
            surface = try Surface.makeMemFD(layout: layout, name: "hostile-posing")
        } else {
            surface = try Surface.makeMemFD(layout: layout, name: "hostile-planes", descriptorPerPlane: true)
        }
        try surface.lock()
        for plane in surface.layout.planes.indices {
            surface.withUnsafeMutableBytes(ofPlane: plane) { (bytes: UnsafeMutableRawBufferPointer) in
                for index in bytes.indices { bytes[index] = plane == 0 ? 0x11 : 0x22 }
            }
        }
        try surface.unlock()
        let handle = try surface.makeHandle()
        var byteCounts = handle.descriptorByteCounts.map { UInt64($0) }
        if scenario == "multi-descriptor-short" || scenario == "dma-buf-short" {
            byteCounts[byteCounts.count - 1] *= 2
        }
        let announcement = WireSurface(
            surfaceID: 1,
            pixelFormat: handle.layout.pixelFormat,
            width: UInt32(handle.layout.width),
            height: UInt32(handle.layout.height),
            backing: scenario.hasPrefix("dma-buf") || scenario == "memfd-as-dma-buf" ? .dmaBuf : .memfd,
            modifier: scenario == "dma-buf-tiled" ? 0x0100_0000_0000_0001 : WireSurface.linearModifier,
            descriptorByteCounts: byteCounts,
            planes: zip(handle.layout.planes, handle.planeDescriptorIndices).map { plane, index in
                WireSurfacePlane(
                    descriptorIndex: UInt32(index),
                    offset: UInt64(plane.offset),
                    bytesPerRow: UInt32(plane.bytesPerRow),
                    width: UInt32(plane.width),
                    height: UInt32(plane.height),
                    bytesPerElement: UInt32(plane.bytesPerElement)
                )
            }
        )
        let fds = handle.takeDescriptors().map(\.rawValue)
        connection.send(.surface(announcement), fds: fds)
        connection.send(hostileFrame(0))
        connection.send(.endOfStream(WireEndOfStream(lastSequence: 0, reason: 0)))
        emit("sent 3 with \(fds.count) descriptors")
        connection.awaitVerdict(sent: 3)
    case "over-grant":
        let surface = try honestSurface(format)
        connection.send(.surface(surface.announcement), fds: [surface.descriptor])
        var sent = 0
        for sequence in 0..<50 as Range<UInt64> {
            guard connection.send(hostileFrame(sequence)) else { break }
            sent += 1
            guard connection.drain(sent: sent) else { return }
            usleep(5000)
        }
        emit("sent \(sent)")
        connection.awaitVerdict(sent: sent)
    case "error-reason":
        let reason = "slow\u{1B}]0;pwned\u{07}\u{1B}[2J\u{1B}[31mred\r\nfake line"
        connection.send(.error(WireErrorMessage(code: WireErrorCode.tooSlow.rawValue, reason: reason)))
        emit("sent 1")
        usleep(200_000)
    case "rewrite":
        let surface = try honestSurface(format)
        connection.send(.surface(surface.announcement), fds: [surface.descriptor])
        var sequence: UInt64 = 0
        var value: UInt8 = 0x11
        // Long enough for a test starved by a busy machine to take its 50 frames (a CI run under two CPU hogs
        // took 6 in 30 s); the test's cancel closes the connection and ends this loop long before.
        let deadline = Date().addingTimeInterval(240)
        while Date() < deadline {
            // The producer's own mapping stays writable (F_SEAL_FUTURE_WRITE spares it): scribble while read.
            let memory = surface.buffer.surface
            try memory.lock()
            memory.withUnsafeMutableBytes { (bytes: UnsafeMutableRawBufferPointer) in
                for index in bytes.indices { bytes[index] = value }
            }
            try memory.unlock()
            value &+= 0x11
            guard connection.trySend(hostileFrame(sequence)) != .closed else { break }
            sequence += 1
            guard connection.drain(sent: Int(sequence)) else { return }
            usleep(1000)
        }
        emit("still open after \(sequence)")
    default:
        emit("unknown scenario \(scenario)")
    }
}

/// A surface whose planes live in two DMA-BUFs of the system heap.
private func makeDMABufPerPlane(layout: SurfaceLayout) throws -> Surface {
    var buffers: [FileDescriptor] = []
    defer { for buffer in buffers { Syscall.close(buffer) } }
    let heap = try Syscall.open(DMABufAllocator.systemHeap.devicePath, flags: O_RDWR).get()
    defer { Syscall.close(heap) }
    for plane in layout.planes {
        let pages = (plane.byteCount + Syscall.pageSize - 1) / Syscall.pageSize * Syscall.pageSize
        buffers.append(try Syscall.dmaHeapAllocate(heap, byteCount: pages).get())
    }
    let planes = zip(layout.planes, buffers).map { DMABufPlane(descriptor: $1, offset: 0, bytesPerRow: $0.bytesPerRow) }
    return try Surface.importDMABuf(planes: planes, layout: layout, modifier: DRMModifier.linear)
}

/// SURFACE of a DMA-BUF exported write-only, a frame on it, END_OF_STREAM; reports like the others.
private func playWriteOnlyDMABuf(layout: SurfaceLayout, on connection: RawConnection) throws {
    let heap = try Syscall.open(DMABufAllocator.systemHeap.devicePath, flags: O_RDWR).get()
    defer { Syscall.close(heap) }
    let pages = (layout.allocationSize + Syscall.pageSize - 1) / Syscall.pageSize * Syscall.pageSize
    let buffer = try Syscall.dmaHeapAllocate(heap, byteCount: pages, accessMode: .writeOnly).get()
    defer { Syscall.close(buffer) }
    let announcement = WireSurface(
        surfaceID: 1,
        pixelFormat: layout.pixelFormat,
        width: UInt32(layout.width),
        height: UInt32(layout.height),
        backing: .dmaBuf,
        descriptorByteCounts: [UInt64(pages)],
        planes: layout.planes.map { plane in
            WireSurfacePlane(
                descriptorIndex: 0,
                offset: UInt64(plane.offset),
                bytesPerRow: UInt32(plane.bytesPerRow),
                width: UInt32(plane.width),
                height: UInt32(plane.height),
                bytesPerElement: UInt32(plane.bytesPerElement)
            )
        }
    )
    connection.send(.surface(announcement), fds: [buffer.rawValue])
    connection.send(hostileFrame(0))
    connection.send(.endOfStream(WireEndOfStream(lastSequence: 0, reason: 0)))
    emit("sent 3 with 1 descriptors")
    connection.awaitVerdict(sent: 3)
}
