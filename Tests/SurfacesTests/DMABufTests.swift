import Glibc
import Testing

@testable import Surfaces

private let hasSystemHeap = access("/dev/dma_heap/system", F_OK) == 0
private let hasUDMABuf = access("/dev/udmabuf", F_OK) == 0

@Suite struct DMABufTests {
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

    @Test(.enabled(if: hasSystemHeap, "needs /dev/dma_heap/system (absent on this machine)"))
    func systemHeapSurfaceRoundTripsThroughSyncedLocks() throws {
        let surface = try DMABufAllocator.systemHeap.makeSurface(layout: makeTestLayout())
        try roundTrip(surface)
    }

    @Test(.enabled(if: hasUDMABuf, "needs /dev/udmabuf (absent on this machine)"))
    func udmabufSurfaceRoundTripsThroughSyncedLocks() throws {
        let surface = try DMABufAllocator.udmabuf.makeSurface(layout: makeTestLayout())
        try roundTrip(surface)
    }

    @Test(.enabled(if: hasUDMABuf, "needs /dev/udmabuf (absent on this machine)"))
    func dmaBufHandleImportsInAnotherSurface() throws {
        let surface = try DMABufAllocator.udmabuf.makeSurface(layout: makeTestLayout())
        try surface.lock()
        unsafe surface.withUnsafeMutableBytes(ofPlane: 1) { unsafe $0[5] = 42 }
        try surface.unlock()
        let imported = try Surface.importing(try surface.makeHandle())
        try imported.lock(.readOnly)
        #expect(unsafe imported.withUnsafeBytes(ofPlane: 1) { unsafe $0[5] } == 42)
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
