import CFrameBusShims
import Glibc
import SystemPackage
import Testing

@testable import Surfaces

/// A two-plane 4:2:0-like layout of `width` × `height` with 64-byte rows.
func makeTestLayout(width: Int = 64, height: Int = 32) -> SurfaceLayout {
    let lumaRow = (width + 63) / 64 * 64
    let planes = [
        PlaneLayout(offset: 0, bytesPerRow: lumaRow, width: width, height: height, bytesPerElement: 1),
        PlaneLayout(
            offset: lumaRow * height,
            bytesPerRow: lumaRow,
            width: width / 2,
            height: height / 2,
            bytesPerElement: 2
        ),
    ]
    return SurfaceLayout(
        pixelFormat: 0x3432_3076,
        width: width,
        height: height,
        planes: planes,
        allocationSize: lumaRow * height * 3 / 2
    )
}

/// The error importing `handle` gives, or `nil` if it imports.
func importError(_ handle: consuming SurfaceHandle) -> SurfaceError? {
    do {
        _ = try Surface.importing(handle)
        return nil
    } catch {
        return error
    }
}

@Suite(.timeLimit(.minutes(5))) struct SurfaceTests {
    @Test func memfdSurfaceIsSealedAgainstShrinkingGrowingAndLaterWrites() throws {
        let surface = try Surface.makeMemFD(layout: makeTestLayout())
        let seals = cfb_get_seals(surface.descriptors[0].rawValue)
        #expect(seals & CFB_F_SEAL_SHRINK != 0)
        #expect(seals & CFB_F_SEAL_GROW != 0)
        #expect(seals & CFB_F_SEAL_FUTURE_WRITE != 0)
        #expect(seals & CFB_F_SEAL_SEAL != 0)
        // Not even the producer's own descriptor can make a new writable mapping or write(2); its mapping can.
        let size = surface.allocationSize
        #expect(mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, surface.descriptors[0].rawValue, 0) == MAP_FAILED)
        #expect(errno == EPERM)
        var byte: UInt8 = 7
        #expect(pwrite(surface.descriptors[0].rawValue, &byte, 1, 0) == -1)
        try surface.lock()
        unsafe surface.withUnsafeMutableBytes { unsafe $0[0] = 7 }
        try surface.unlock()
        #expect(ftruncate(surface.descriptors[0].rawValue, 0) == -1)
        #expect(ftruncate(surface.descriptors[0].rawValue, off_t(surface.allocationSize * 2)) == -1)
    }

    @Test func seedChangesOnlyOnReadWriteUnlock() throws {
        let surface = try Surface.makeMemFD(layout: makeTestLayout())
        let initial = surface.seed
        try surface.lock(.readOnly)
        try surface.unlock(.readOnly)
        #expect(surface.seed == initial)
        try surface.lock()
        try surface.unlock()
        #expect(surface.seed == initial &+ 1)
    }

    @Test func unbalancedUnlockIsATypedError() throws {
        let surface = try Surface.makeMemFD(layout: makeTestLayout())
        #expect(throws: SurfaceError(code: .unbalancedUnlock, operation: "Surface.unlock on \(surface.id)")) {
            try surface.unlock()
        }
        try surface.lock(.readOnly)
        #expect(throws: SurfaceError.self) { try surface.unlock() }
        try surface.unlock(.readOnly)
        #expect(!surface.isLocked)
    }

    @Test func useCountTracksLocalClients() throws {
        let surface = try Surface.makeMemFD(layout: makeTestLayout())
        #expect(!surface.isInUse)
        surface.incrementUseCount()
        surface.incrementUseCount()
        #expect(surface.useCount == 2)
        surface.decrementUseCount()
        #expect(surface.isInUse)
        surface.decrementUseCount()
        #expect(!surface.isInUse)
    }

    @Test func idsAreUniqueAndCarriedByHandles() throws {
        let first = try Surface.makeMemFD(layout: makeTestLayout())
        let second = try Surface.makeMemFD(layout: makeTestLayout())
        #expect(first.id != second.id)
        let imported = try Surface.importing(try first.makeHandle())
        #expect(imported.id == first.id)
    }

    @Test func importedSurfaceSeesWritesAndIsReadOnly() throws {
        let surface = try Surface.makeMemFD(layout: makeTestLayout())
        let imported = try Surface.importing(try surface.makeHandle())
        #expect(imported.isReadOnly)
        try surface.lock()
        unsafe surface.withUnsafeMutableBytes { bytes in
            for index in 0..<bytes.count { unsafe bytes[index] = UInt8(truncatingIfNeeded: index * 13) }
        }
        try surface.unlock()
        try imported.lock(.readOnly)
        let matches = unsafe imported.withUnsafeBytes { bytes in
            (0..<bytes.count).allSatisfy { unsafe bytes[$0] == UInt8(truncatingIfNeeded: $0 * 13) }
        }
        try imported.unlock(.readOnly)
        #expect(matches)
        #expect(throws: SurfaceError(code: .readOnly, operation: "Surface.lock(readWrite) on \(imported.id)")) {
            try imported.lock()
        }
    }

    @Test func memfdWithoutAWriteSealIsRefused() throws {
        let layout = makeTestLayout()
        let fd = cfb_memfd_create("writable", CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING)
        #expect(ftruncate(fd, off_t(layout.allocationSize)) == 0)
        #expect(cfb_add_seals(fd, CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW | CFB_F_SEAL_SEAL) == 0)
        let handle = SurfaceHandle(id: .next(), layout: layout, descriptor: FileDescriptor(rawValue: fd))
        #expect(importError(handle) == SurfaceError(code: .notWriteSealed, operation: "Surface.importing: seals 0x7"))
    }

    @Test func memfdSealedWithFWriteSealIsAccepted() throws {
        let layout = makeTestLayout()
        let fd = cfb_memfd_create("write-sealed", CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING)
        #expect(ftruncate(fd, off_t(layout.allocationSize)) == 0)
        #expect(cfb_add_seals(fd, CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW | CFB_F_SEAL_WRITE) == 0)
        let handle = SurfaceHandle(id: .next(), layout: layout, descriptor: FileDescriptor(rawValue: fd))
        #expect(importError(handle) == nil)
    }

    @Test func unsealedMemfdIsRefused() throws {
        let layout = makeTestLayout()
        let fd = cfb_memfd_create("unsealed", CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING)
        #expect(fd >= 0)
        #expect(ftruncate(fd, off_t(layout.allocationSize)) == 0)
        let handle = SurfaceHandle(id: .next(), layout: layout, descriptor: FileDescriptor(rawValue: fd))
        #expect(importError(handle) == SurfaceError(code: .notSealed, operation: "Surface.importing: seals 0x0"))
    }

    @Test func memfdSealedOnlyAgainstShrinkingIsRefused() throws {
        let layout = makeTestLayout()
        let fd = cfb_memfd_create("half-sealed", CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING)
        #expect(ftruncate(fd, off_t(layout.allocationSize)) == 0)
        #expect(cfb_add_seals(fd, CFB_F_SEAL_SHRINK) == 0)
        let handle = SurfaceHandle(id: .next(), layout: layout, descriptor: FileDescriptor(rawValue: fd))
        #expect(importError(handle) != nil)
    }

    @Test func tooSmallMemfdIsRefused() throws {
        let layout = makeTestLayout()
        let fd = cfb_memfd_create("small", CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING)
        #expect(ftruncate(fd, off_t(layout.allocationSize / 2)) == 0)
        #expect(cfb_add_seals(fd, CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW | CFB_F_SEAL_FUTURE_WRITE) == 0)
        let handle = SurfaceHandle(id: .next(), layout: layout, descriptor: FileDescriptor(rawValue: fd))
        let expected = SurfaceError(
            code: .tooSmall,
            operation:
                "Surface.importing: file has \(layout.allocationSize / 2) bytes, layout needs \(layout.allocationSize)"
        )
        #expect(importError(handle) == expected)
    }

    @Test func regularFileIsNotAMemfd() throws {
        let layout = makeTestLayout()
        let path = "/tmp/framebus-not-memfd-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        defer { unlink(path) }
        #expect(ftruncate(fd, off_t(layout.allocationSize)) == 0)
        let handle = SurfaceHandle(id: .next(), layout: layout, descriptor: FileDescriptor(rawValue: fd))
        // tmpfs files answer F_GET_SEALS with F_SEAL_SEAL only; other file systems answer EINVAL.
        #expect(importError(handle) != nil)
    }

    @Test(arguments: [
        SurfaceLayout(pixelFormat: 0, width: 0, height: 8, planes: [], allocationSize: 64),
        SurfaceLayout(pixelFormat: 0, width: 8, height: 8, planes: [], allocationSize: 0),
        SurfaceLayout(
            pixelFormat: 0,
            width: 8,
            height: 8,
            planes: [PlaneLayout(offset: 0, bytesPerRow: 8, width: 8, height: 8, bytesPerElement: 1)],
            allocationSize: 63
        ),
        SurfaceLayout(
            pixelFormat: 0,
            width: 8,
            height: 8,
            planes: [PlaneLayout(offset: 0, bytesPerRow: 4, width: 8, height: 8, bytesPerElement: 1)],
            allocationSize: 64
        ),
        SurfaceLayout(
            pixelFormat: 0,
            width: 8,
            height: 8,
            planes: [PlaneLayout(offset: Int.max - 8, bytesPerRow: 8, width: 8, height: 8, bytesPerElement: 1)],
            allocationSize: 64
        ),
    ])
    func impossibleLayoutsAreRefused(layout: SurfaceLayout) {
        #expect(throws: SurfaceError.self) { try Surface.makeMemFD(layout: layout) }
    }

    @Test func importRefusesALayoutThatOverrunsTheFile() throws {
        let surface = try Surface.makeMemFD(layout: makeTestLayout())
        var bigger = surface.layout
        bigger.allocationSize *= 4
        bigger.planes[1].offset = bigger.allocationSize - bigger.planes[1].byteCount
        let handle = try surface.makeHandle()
        let forged = SurfaceHandle(id: handle.id, layout: bigger, descriptor: handle.takeDescriptor())
        #expect(importError(forged)?.code == .tooSmall)
    }
}
