import Foundation
import FrameBusTesting
import Glibc
import SystemPackage
import TestSupport
import Testing

@testable import FrameBus

/// A version-2 subscriber written against docs/PROTOCOL.md alone: it receives SURFACE with all its fds.
struct RawV2Peer {
    let socket: Socket

    init(connectingTo path: String) throws {
        socket = try Socket.connect(path: path, timeoutNanoseconds: 2_000_000_000).get()
    }

    func send(_ bytes: [UInt8]) { _ = socket.send(bytes) }

    /// The next message with the fds that came with it (room for 4, as §1 asks).
    func next(timeout: Double = 20) -> (WireMessage, [OwnedDescriptor])? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            _ = socket.waitReadable(timeoutMilliseconds: 100)
            switch socket.receive(maximumSize: WireProtocol.maximumMessageSize, maximumDescriptors: 4) {
            case .success(.datagram(let datagram)):
                guard !datagram.isTruncated,
                    let message = try? WireMessage.decode(datagram.bytes, descriptorCount: datagram.descriptors.count)
                else { return nil }
                return (message, datagram.descriptors)
            case .success(.wouldBlock): continue
            default: return nil
            }
        }
        return nil
    }
}

extension RawV2Peer {
    /// ``next(timeout:)`` on a thread of its own, not holding one of Swift's cooperative pool while it polls.
    func next(timeout: Double = 20) async -> (WireMessage, [OwnedDescriptor])? {
        let peer = self
        return try! await onDedicatedThread("raw-peer-wait") { peer.next(timeout: timeout) }
    }
}

@Suite(.timeLimit(.minutes(5))) struct SurfaceV2Tests {
    /// SURFACE v2 carries a surface whose planes live in two memfds; a version-2 subscriber imports both and reads
    /// the producer's pixels bit-exact, while a version-1 subscriber of the same frame gets a DROP instead.
    @Test func aSurfaceWithADescriptorPerPlaneTravelsWithEveryDescriptor() async throws {
        let path = temporaryBusPath("multi")
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        defer { publisher.stop() }
        let v2 = try RawV2Peer(connectingTo: path)
        v2.send(
            WireMessage.hello(
                WireHello(deliveryMode: 0, queueDepth: 1, formats: [PixelFormat.yuv420BiPlanarVideoRange8.fourCC])
            ).encoded()
        )
        guard case .welcome(let welcome)? = await v2.next()?.0 else {
            Issue.record("no WELCOME")
            return
        }
        #expect(welcome.version == 2)
        let v1 = try RawPeer(connectingTo: path)
        try #require(await v1.handshake() != nil)
        try #require(await eventually { publisher.subscriberCount == 2 })

        let layout = try PixelBuffer.layout(width: 64, height: 48, pixelFormat: .yuv420BiPlanarVideoRange8)
        let surface = try Surface.makeMemFD(layout: layout, descriptorPerPlane: true)
        let buffer = try PixelBuffer(surface: surface)
        let hash = try fillFrame(buffer, index: 7)
        try buffer.lock(.readOnly)
        let expected = try buffer.packedBytes()
        try buffer.unlock(.readOnly)
        try publisher.publish(buffer)

        guard let (message, descriptors) = await v2.next(), case .surface(let announced) = message else {
            Issue.record("no SURFACE")
            return
        }
        #expect(announced.backing == .memfd)
        #expect(announced.descriptorByteCounts.count == 2)
        #expect(announced.planes.map(\.descriptorIndex) == [0, 1])
        #expect(descriptors.count == 2)
        guard case .frame(let frame)? = await v2.next()?.0 else {
            Issue.record("no FRAME")
            return
        }
        #expect(frame.surfaceID == announced.surfaceID)
        // Import as the document says: every descriptor, every plane at its offset in its own descriptor.
        let importedLayout = SurfaceLayout(
            pixelFormat: announced.pixelFormat,
            width: Int(announced.width),
            height: Int(announced.height),
            planes: announced.planes.map {
                PlaneLayout(
                    offset: Int($0.offset),
                    bytesPerRow: Int($0.bytesPerRow),
                    width: Int($0.width),
                    height: Int($0.height),
                    bytesPerElement: Int($0.bytesPerElement)
                )
            },
            allocationSize: Int(announced.descriptorByteCounts.reduce(0, +))
        )
        let handle = SurfaceHandle(
            id: SurfaceID(rawValue: announced.surfaceID),
            layout: importedLayout,
            backing: .memfd,
            descriptors: descriptors.compactMap { $0.take() },
            planeDescriptorIndices: announced.planes.map { Int($0.descriptorIndex) },
            descriptorByteCounts: announced.descriptorByteCounts.map { Int($0) }
        )
        let imported = try PixelBuffer(surface: try Surface.importing(handle))
        try imported.lock(.readOnly)
        let received = try imported.packedBytes()
        try imported.unlock(.readOnly)
        #expect(received == expected)
        #expect(fnv1a(received) == hash)
        v2.send(
            WireMessage.release(WireRelease(sequence: frame.sequence, surfaceID: frame.surfaceID, flags: 0)).encoded()
        )

        // Version 1 cannot describe two descriptors: that subscriber is told it lost the frame.
        var drop: WireDrop?
        while drop == nil, let message = await v1.next(timeout: 20) {
            if case .drop(let received) = message { drop = received }
            if case .frame = message { Issue.record("a version-1 subscriber got a two-descriptor frame") }
        }
        #expect(drop == WireDrop(frame.sequence...frame.sequence, reason: .outOfBuffers))
    }

    static let dmaBufNode: String? = ["/dev/udmabuf", "/dev/dma_heap/system"].first {
        FileManager.default.fileExists(atPath: $0)
    }

    /// DMA-BUF surfaces go only to version-2 subscribers that accept them. Needs /dev/udmabuf or
    /// /dev/dma_heap/system; skipped on machines without either.
    @Test(
        .enabled(
            if: dmaBufNode != nil || BusDeviceRequirement.requireAll,
            "needs /dev/udmabuf or /dev/dma_heap/system (neither exists here)"
        )
    )
    func aDMABufSurfaceTravelsToSubscribersThatAcceptIt() async throws {
        let allocator = FileManager.default.fileExists(atPath: "/dev/udmabuf") ? DMABufAllocator.udmabuf : .systemHeap
        let path = temporaryBusPath("dmabuf")
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        defer { publisher.stop() }
        let peer = try RawV2Peer(connectingTo: path)
        peer.send(
            WireMessage.hello(
                WireHello(
                    deliveryMode: 0,
                    queueDepth: 1,
                    flags: WireHello.acceptsDMABufFlag,
                    formats: [PixelFormat.yuv420BiPlanarVideoRange8.fourCC]
                )
            ).encoded()
        )
        guard case .welcome? = await peer.next()?.0 else {
            Issue.record("no WELCOME")
            return
        }
        try #require(await eventually { publisher.subscriberCount == 1 })
        let layout = try PixelBuffer.layout(width: 64, height: 48, pixelFormat: .yuv420BiPlanarVideoRange8)
        let buffer = try PixelBuffer(surface: try allocator.makeSurface(layout: layout))
        _ = try fillFrame(buffer, index: 1)
        try publisher.publish(buffer)
        guard let (message, descriptors) = await peer.next(), case .surface(let announced) = message else {
            Issue.record("no SURFACE")
            return
        }
        #expect(announced.backing == .dmaBuf)
        #expect(descriptors.count == announced.descriptorByteCounts.count)
    }
}
