import CFrameBusShims
import Glibc
import SystemPackage
import Testing

@testable import Surfaces

/// A memfd sealed as a producer seals it, of `byteCount` bytes, as an owned descriptor.
private func sealedMemFD(byteCount: Int) throws -> FileDescriptor {
    let fd = makeMemFD(
        "handle-test",
        byteCount: byteCount,
        seals: CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW | CFB_F_SEAL_FUTURE_WRITE | CFB_F_SEAL_SEAL
    )
    try #require(fd >= 0)
    return FileDescriptor(rawValue: fd)
}

/// A hostile handle's shape: every field as a peer might send it.
struct ForgedHandle: Sendable, CustomTestStringConvertible {
    var name: String
    var descriptorCount: Int
    var planeDescriptorIndices: [Int]
    var byteCounts: [Int]
    var layout: SurfaceLayout
    var expected: SurfaceError.Code
    var testDescription: String { name }
}

/// The two-plane test layout split over two descriptors, each 4096 bytes.
private let splitLayout: SurfaceLayout = {
    var layout = makeTestLayout()
    layout.planes[1].offset = 0
    layout.allocationSize = 8192
    return layout
}()

private let forgedHandles: [ForgedHandle] = [
    ForgedHandle(
        name: "no descriptors",
        descriptorCount: 0,
        planeDescriptorIndices: [0, 0],
        byteCounts: [],
        layout: makeTestLayout(),
        expected: .invalidHandle
    ),
    ForgedHandle(
        name: "five descriptors",
        descriptorCount: 5,
        planeDescriptorIndices: [0, 1],
        byteCounts: [4096, 4096, 4096, 4096, 4096],
        layout: splitLayout,
        expected: .invalidHandle
    ),
    ForgedHandle(
        name: "byte counts for another descriptor count",
        descriptorCount: 2,
        planeDescriptorIndices: [0, 1],
        byteCounts: [8192],
        layout: splitLayout,
        expected: .invalidHandle
    ),
    ForgedHandle(
        name: "one index for two planes",
        descriptorCount: 2,
        planeDescriptorIndices: [0],
        byteCounts: [4096, 4096],
        layout: splitLayout,
        expected: .invalidHandle
    ),
    ForgedHandle(
        name: "index past the descriptors",
        descriptorCount: 1,
        planeDescriptorIndices: [0, Int.max],
        byteCounts: [8192],
        layout: splitLayout,
        expected: .invalidHandle
    ),
    ForgedHandle(
        name: "negative index",
        descriptorCount: 1,
        planeDescriptorIndices: [0, -1],
        byteCounts: [8192],
        layout: splitLayout,
        expected: .invalidHandle
    ),
    ForgedHandle(
        name: "a descriptor that holds no plane",
        descriptorCount: 2,
        planeDescriptorIndices: [0, 0],
        byteCounts: [4096, 4096],
        layout: splitLayout,
        expected: .invalidHandle
    ),
    ForgedHandle(
        name: "opaque surface with two descriptors",
        descriptorCount: 2,
        planeDescriptorIndices: [],
        byteCounts: [4096, 4096],
        layout: SurfaceLayout(pixelFormat: 0x2638_7630, width: 64, height: 32, planes: [], allocationSize: 8192),
        expected: .invalidHandle
    ),
    ForgedHandle(
        name: "byte counts that do not add up",
        descriptorCount: 2,
        planeDescriptorIndices: [0, 1],
        byteCounts: [4096, 2048],
        layout: splitLayout,
        expected: .invalidHandle
    ),
    ForgedHandle(
        name: "huge byte counts",
        descriptorCount: 2,
        planeDescriptorIndices: [0, 1],
        byteCounts: [Int.max, Int.max],
        layout: splitLayout,
        expected: .invalidHandle
    ),
    ForgedHandle(
        name: "negative byte count",
        descriptorCount: 2,
        planeDescriptorIndices: [0, 1],
        byteCounts: [-4096, 12288],
        layout: splitLayout,
        expected: .invalidHandle
    ),
    ForgedHandle(
        name: "a plane past its own descriptor",
        descriptorCount: 2,
        planeDescriptorIndices: [0, 1],
        byteCounts: [7168, 1024],
        layout: {
            // Inside the allocation (8192 bytes), but not inside its own descriptor's 1024.
            var layout = splitLayout
            layout.planes[1].offset = 1536
            return layout
        }(),
        expected: .invalidHandle
    ),
    ForgedHandle(
        name: "absurd plane geometry",
        descriptorCount: 2,
        planeDescriptorIndices: [0, 1],
        byteCounts: [4096, 4096],
        layout: {
            var layout = splitLayout
            layout.planes[1].bytesPerRow = Int.max
            layout.planes[1].height = Int.max
            return layout
        }(),
        expected: .invalidLayout
    ),
]

@Suite(.timeLimit(.minutes(5))) struct SurfaceHandleTests {
    @Test func descriptorPerPlaneSurfaceHasOneSealedMemfdPerPlane() throws {
        let layout = makeTestLayout(width: 320, height: 240)
        let surface = try Surface.makeMemFD(layout: layout, descriptorPerPlane: true)
        #expect(surface.descriptors.count == 2)
        #expect(surface.layout.planes.map(\.offset) == [0, 0])
        #expect(surface.layout.allocationSize == surface.mappings.reduce(0) { $0 + $1.byteCount })
        for (index, descriptor) in surface.descriptors.enumerated() {
            let seals = cfb_get_seals(descriptor.rawValue)
            let all = CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW | CFB_F_SEAL_FUTURE_WRITE | CFB_F_SEAL_SEAL
            #expect(seals & all == all)
            #expect(surface.mappings[index].byteCount >= layout.planes[index].byteCount)
            #expect(surface.mappings[index].byteCount % 4096 == 0)
        }
        let single = try Surface.makeMemFD(layout: layout, descriptorPerPlane: false)
        #expect(single.descriptors.count == 1 && single.layout == layout)
    }

    @Test func multiDescriptorHandleImportsEveryPlaneBitExact() throws {
        let surface = try Surface.makeMemFD(layout: makeTestLayout(width: 128, height: 64), descriptorPerPlane: true)
        try writeTestPattern(surface)
        let handle = try surface.makeHandle()
        #expect(handle.descriptorCount == 2)
        #expect(handle.planeDescriptorIndices == [0, 1])
        #expect(handle.descriptorByteCounts == surface.mappings.map(\.byteCount))
        for descriptor in handle.borrowedDescriptors {
            #expect(cfb_get_status_flags(descriptor.rawValue) & O_ACCMODE == O_RDONLY)
        }
        let imported = try Surface.importing(handle)
        #expect(imported.isReadOnly && imported.id == surface.id && imported.layout == surface.layout)
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

    @Test func eachMemfdOfAHandleIsCheckedForItsOwnSize() throws {
        let descriptors = [try sealedMemFD(byteCount: 4096), try sealedMemFD(byteCount: 2048)]
        let handle = SurfaceHandle(
            id: .next(),
            layout: splitLayout,
            backing: .memfd,
            descriptors: descriptors,
            planeDescriptorIndices: [0, 1],
            descriptorByteCounts: [4096, 4096]
        )
        #expect(
            importError(handle)
                == SurfaceError(code: .tooSmall, operation: "Surface.importing: file has 2048 bytes, layout needs 4096")
        )
    }

    @Test func eachMemfdOfAHandleMustBeWriteSealed() throws {
        let unsealed = makeMemFD("half", byteCount: 4096, seals: CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW)
        try #require(unsealed >= 0)
        let handle = SurfaceHandle(
            id: .next(),
            layout: splitLayout,
            backing: .memfd,
            descriptors: [try sealedMemFD(byteCount: 4096), FileDescriptor(rawValue: unsealed)],
            planeDescriptorIndices: [0, 1],
            descriptorByteCounts: [4096, 4096]
        )
        #expect(importError(handle)?.code == .notWriteSealed)
    }

    /// Every value in a handle is a peer's: each impossible one is a typed error, never a trap.
    @Test(arguments: forgedHandles)
    func impossibleHandlesAreRefusedWithoutTrapping(_ forged: ForgedHandle) throws {
        var descriptors: [FileDescriptor] = []
        for _ in 0..<forged.descriptorCount { descriptors.append(try sealedMemFD(byteCount: 4096)) }
        let handle = SurfaceHandle(
            id: .next(),
            layout: forged.layout,
            backing: .memfd,
            descriptors: descriptors,
            planeDescriptorIndices: forged.planeDescriptorIndices,
            descriptorByteCounts: forged.byteCounts
        )
        #expect(importError(handle)?.code == forged.expected)
    }

    @Test func aHandleNamingOneDescriptorTwiceIsRefused() throws {
        let descriptor = try sealedMemFD(byteCount: 4096)
        let handle = SurfaceHandle(
            id: .next(),
            layout: splitLayout,
            backing: .memfd,
            descriptors: [descriptor, descriptor],
            planeDescriptorIndices: [0, 1],
            descriptorByteCounts: [4096, 4096]
        )
        #expect(importError(handle)?.code == .invalidHandle)
    }

    /// A memfd sent as a "DMA-BUF" escapes the seal checks: its sender could shrink it under our mapping (SIGBUS).
    @Test func aMemfdPretendingToBeADMABufIsRefused() throws {
        let fd = makeMemFD("fake-dma-buf", byteCount: 8192, seals: 0)
        try #require(fd >= 0)
        let handle = SurfaceHandle(
            id: .next(),
            layout: splitLayout,
            backing: .dmaBuf(modifier: DRMModifier.linear),
            descriptors: [FileDescriptor(rawValue: fd)],
            planeDescriptorIndices: [0, 0],
            descriptorByteCounts: [8192]
        )
        #expect(importError(handle)?.code == .notADMABuf)
    }

    @Test func dmaBufHandleWithATiledModifierIsRefused() throws {
        let surface = try Surface.makeMemFD(layout: makeTestLayout())
        let handle = try surface.makeHandle()
        let layout = handle.layout
        let forged = SurfaceHandle(
            id: .next(),
            layout: layout,
            backing: .dmaBuf(modifier: 0x0100_0000_0000_0001),
            descriptors: handle.takeDescriptors(),
            planeDescriptorIndices: [0, 0],
            descriptorByteCounts: [surface.allocationSize]
        )
        #expect(importError(forged)?.code == .invalidLayout)
    }
}
