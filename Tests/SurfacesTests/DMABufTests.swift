import Glibc
import Testing

@testable import Surfaces

private let hasSystemHeap = access("/dev/dma_heap/system", F_OK) == 0
private let hasUDMABuf = access("/dev/udmabuf", F_OK) == 0
/// Whichever DMA-BUF allocator this machine has.
private let availableAllocator: DMABufAllocator? =
    hasSystemHeap ? .systemHeap : (hasUDMABuf ? .udmabuf : nil)
private let noDMABufDevice = "needs /dev/dma_heap/system or /dev/udmabuf (both absent on this machine)"

/// FRAMEBUS_REQUIRE_ALL=1 runs the device tests without their device, so that they fail (see DeviceRequirement).
@Suite(.timeLimit(.minutes(5))) struct DMABufTests {
    @Test func allocatorsReportAbsentDeviceNodes() throws {
        for allocator in [DMABufAllocator.systemHeap, .udmabuf] where !allocator.isAvailable {
            #expect(
                throws: SurfaceError(
                    code: .deviceUnavailable,
                    operation: "open(\(allocator.devicePath))",
                    errno: .noSuchFileOrDirectory
                )
            ) {
                try allocator.makeSurface(layout: makeTestLayout())
            }
        }
    }

    @Test func nonLinearModifierIsRefused() throws {
        let memfd = try Surface.makeMemFD(layout: makeTestLayout())
        let planes = memfd.layout.planes.map {
            DMABufPlane(descriptor: memfd.descriptors[0], offset: $0.offset, bytesPerRow: $0.bytesPerRow)
        }
        #expect(throws: SurfaceError.self) {
            try Surface.importDMABuf(planes: planes, layout: memfd.layout, modifier: 0x0100_0000_0000_0001)
        }
    }

    @Test(
        .enabled(
            if: hasSystemHeap || DeviceRequirement.requireAll,
            "needs /dev/dma_heap/system (absent on this machine)"
        )
    )
    func systemHeapSurfaceRoundTripsThroughSyncedLocks() throws {
        let surface = try DMABufAllocator.systemHeap.makeSurface(layout: makeTestLayout())
        try roundTrip(surface)
    }

    @Test(.enabled(if: hasUDMABuf || DeviceRequirement.requireAll, "needs /dev/udmabuf (absent on this machine)"))
    func udmabufSurfaceRoundTripsThroughSyncedLocks() throws {
        let surface = try DMABufAllocator.udmabuf.makeSurface(layout: makeTestLayout())
        try roundTrip(surface)
    }

    @Test(.enabled(if: availableAllocator != nil || DeviceRequirement.requireAll, "\(noDMABufDevice)"))
    func dmaBufHandleImportsInAnotherSurface() throws {
        let surface = try #require(availableAllocator).makeSurface(layout: makeTestLayout())
        try surface.lock()
        unsafe surface.withUnsafeMutableBytes(ofPlane: 1) { unsafe $0[5] = 42 }
        try surface.unlock()
        let imported = try Surface.importing(try surface.makeHandle())
        try imported.lock(.readOnly)
        #expect(unsafe imported.withUnsafeBytes(ofPlane: 1) { unsafe $0[5] } == 42)
        try imported.unlock(.readOnly)
    }

    /// Protocol v2: a DMA-BUF handle travels to another process, which imports it (DMA_BUF_IOCTL_SYNC in its
    /// lock/unlock) and reads every plane bit-exact, before and after the producer rewrites it.
    @Test(.enabled(if: availableAllocator != nil || DeviceRequirement.requireAll, "\(noDMABufDevice)"))
    func dmaBufSurfaceTravelsToAnotherProcessBitExact() async throws {
        let layout = makeTestLayout(width: 320, height: 240)
        let surface = try #require(availableAllocator).makeSurface(layout: layout)
        try writeTestPattern(surface)
        let handle = try surface.makeHandle()
        let peer = try await PeerSession(mode: "import-surface")
        try peer.send(
            describe(
                handle.layout,
                id: handle.id,
                dmaBufModifier: DRMModifier.linear,
                byteCounts: handle.descriptorByteCounts,
                planeDescriptorIndices: handle.planeDescriptorIndices
            ),
            descriptors: handle.borrowedDescriptors.map(\.rawValue)
        )
        let reply = try await peer.receive()
        let expectedBytes = layout.planes.reduce(0) { $0 + $1.width * $1.bytesPerElement * $1.height }
        #expect(
            reply.hasPrefix("ok bytes=\(expectedBytes) mismatches=0 readWriteLock=surface is read-only "),
            "\(reply)"
        )
        try writeTestPattern(surface, mask: 0x3c)
        try peer.send("again \(0x3c)")
        await #expect(try peer.receive() == "reread mismatches=0")
    }

    /// A surface whose planes live in two DMA-BUFs exports a two-descriptor handle that imports bit-exact.
    @Test(.enabled(if: availableAllocator != nil || DeviceRequirement.requireAll, "\(noDMABufDevice)"))
    func twoBufferDMABufSurfaceExportsOneDescriptorPerBuffer() throws {
        let allocator = try #require(availableAllocator)
        let layout = makeTestLayout()
        let luma = try allocator.makeSurface(layout: layout)
        let chroma = try allocator.makeSurface(layout: layout)
        let surface = try Surface.importDMABuf(
            planes: [
                DMABufPlane(descriptor: luma.descriptors[0], offset: 0, bytesPerRow: layout.planes[0].bytesPerRow),
                DMABufPlane(descriptor: chroma.descriptors[0], offset: 0, bytesPerRow: layout.planes[1].bytesPerRow),
            ],
            layout: layout,
            modifier: DRMModifier.linear
        )
        #expect(surface.descriptors.count == 2)
        try writeTestPattern(surface)
        let handle = try surface.makeHandle()
        #expect(handle.descriptorCount == 2 && handle.planeDescriptorIndices == [0, 1])
        let imported = try Surface.importing(handle)
        try imported.lock(.readOnly)
        for (index, plane) in imported.layout.planes.enumerated() {
            let matches = unsafe imported.withUnsafeBytes(ofPlane: index) { bytes in
                (0..<plane.height).allSatisfy { row in
                    (0..<(plane.width * plane.bytesPerElement)).allSatisfy { column in
                        unsafe bytes[row * plane.bytesPerRow + column]
                            == testPatternByte(plane: index, row: row, column: column)
                    }
                }
            }
            #expect(matches, "plane \(index)")
        }
        try imported.unlock(.readOnly)
    }

    private func roundTrip(_ surface: Surface) throws {
        guard case .dmaBuf(let modifier) = surface.backing else {
            Issue.record("not a DMA-BUF")
            return
        }
        #expect(modifier == DRMModifier.linear)
        try surface.lock()
        unsafe surface.withUnsafeMutableBytes(ofPlane: 0) { bytes in
            for index in 0..<bytes.count { unsafe bytes[index] = UInt8(truncatingIfNeeded: index) }
        }
        try surface.unlock()
        try surface.lock(.readOnly)
        let ok = unsafe surface.withUnsafeBytes(ofPlane: 0) { bytes in
            (0..<bytes.count).allSatisfy { unsafe bytes[$0] == UInt8(truncatingIfNeeded: $0) }
        }
        try surface.unlock(.readOnly)
        #expect(ok)
    }
}
