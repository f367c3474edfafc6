import CFrameBusShims
import Foundation
import Glibc
import SystemPackage
import Testing

@testable import Surfaces

/// The device nodes (and tools) the DMA-BUF tests need. Without them a test is skipped, naming what is missing;
/// with `FRAMEBUS_REQUIRE_ALL=1` (CI's guest run, `scripts/device-tests`) it runs anyway and fails.
enum DeviceRequirement {
    static let requireAll = ProcessInfo.processInfo.environment["FRAMEBUS_REQUIRE_ALL"] == "1"
    static let systemHeap = DMABufAllocator.systemHeap.devicePath
    static let udmabuf = DMABufAllocator.udmabuf.devicePath

    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// Whether a test needing every one of `paths` runs here.
    static func runs(_ paths: String...) -> Bool { requireAll || paths.allSatisfy(exists) }

    /// An executable on the PATH, or nil.
    static func tool(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }
}

/// How many of this process's descriptors are open on the file `descriptor` is open on (same file system and inode),
/// to show that a refused import keeps none. Other tests' descriptors, opened and closed concurrently, never count.
func descriptorsOpen(onFileOf descriptor: FileDescriptor) -> Int {
    guard let file = try? Syscall.fileSize(descriptor).get(), let system = try? Syscall.fileSystemType(descriptor).get()
    else { return -1 }
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return entries.compactMap { Int32($0) }.filter { number in
        let other = FileDescriptor(rawValue: number)
        return (try? Syscall.fileSize(other).get().inode) == file.inode
            && (try? Syscall.fileSystemType(other).get()) == system
    }.count
}

/// `DMA_HEAP_IOCTL_ALLOC` of `byteCount` bytes with the descriptor access mode the exporter chooses.
func allocateFromSystemHeap(byteCount: Int, accessMode: FileDescriptor.AccessMode) throws -> FileDescriptor {
    let heap = try Syscall.open(DeviceRequirement.systemHeap, flags: O_RDWR).get()
    defer { Syscall.close(heap) }
    return try Syscall.dmaHeapAllocate(heap, byteCount: byteCount, accessMode: accessMode).get()
}

/// Every DMA-BUF path of the Surfaces module against the real kernel: the system DMA heap and udmabuf, CPU access
/// bracketed with `DMA_BUF_IOCTL_SYNC`, read-only import, and the hostile cases an importer must refuse with a
/// typed error. Runs in the guest kernel of `scripts/guest-run` (Linux 6.12 has both devices); skipped elsewhere.
@Suite(.timeLimit(.minutes(3))) struct DMABufDeviceTests {
    /// Allocates from `allocator` and checks what the kernel handed back: a linear DMA-BUF of whole pages, named by
    /// its exporter, every byte of every plane written and read back between synced locks.
    func checkAllocation(_ allocator: DMABufAllocator, exporter: String) throws {
        let layout = makeTestLayout(width: 200, height: 100)
        let surface = try allocator.makeSurface(layout: layout)
        #expect(surface.backing == .dmaBuf(modifier: DRMModifier.linear))
        #expect(surface.descriptorCount == 1)
        #expect(surface.allocationSize % Syscall.pageSize == 0 && surface.allocationSize >= layout.allocationSize)
        let descriptor = surface.descriptors[0]
        #expect(try Syscall.fileSystemType(descriptor).get() == DMABufSync.fileSystemMagic)
        #expect(try Syscall.fileSize(descriptor).get().byteCount == surface.allocationSize)
        let fdinfo = try String(contentsOfFile: "/proc/self/fdinfo/\(descriptor.rawValue)", encoding: .utf8)
        #expect(fdinfo.contains("exp_name:\t\(exporter)"), "\(fdinfo)")

        try surface.lock()
        for (index, plane) in surface.layout.planes.enumerated() {
            unsafe surface.withUnsafeMutableBytes(ofPlane: index) { bytes in
                for row in 0..<plane.height {
                    for column in 0..<plane.bytesPerRow {
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
        let seed = surface.seed
        try surface.lock(.readOnly)
        for (index, plane) in surface.layout.planes.enumerated() {
            let mismatches = unsafe surface.withUnsafeBytes(ofPlane: index) { bytes in
                (0..<plane.height).reduce(0) { count, row in
                    count
                        + (0..<plane.bytesPerRow).filter { column in
                            unsafe bytes[row * plane.bytesPerRow + column]
                                != testPatternByte(plane: index, row: row, column: column)
                        }.count
                }
            }
            #expect(mismatches == 0, "plane \(index)")
        }
        try surface.unlock(.readOnly)
        #expect(surface.seed == seed, "a read-only unlock must not change the seed")
    }

    @Test(
        .enabled(if: DeviceRequirement.runs(DeviceRequirement.systemHeap), "needs /dev/dma_heap/system (absent here)")
    )
    func theSystemHeapAllocatesLinearPageRoundedDMABufsReadAndWrittenBetweenSyncs() throws {
        try checkAllocation(.systemHeap, exporter: "system")
    }

    @Test(.enabled(if: DeviceRequirement.runs(DeviceRequirement.udmabuf), "needs /dev/udmabuf (absent here)"))
    func udmabufAllocatesLinearPageRoundedDMABufsReadAndWrittenBetweenSyncs() throws {
        try checkAllocation(.udmabuf, exporter: "udmabuf")
    }

    /// A memfd surface with udmabufs over its memfds (what a V4L2 capture imports): the DMA-BUF and the memfd are the
    /// same memory, and the memfd ends up sealed as every memfd surface is (no peer can map it writable).
    @Test(
        .enabled(if: DeviceRequirement.runs(DeviceRequirement.udmabuf), "needs /dev/udmabuf (absent here)"),
        arguments: [false, true]
    )
    func aMemFDSurfaceWithUDMABufsSharesItsMemoryWithTheDMABufsAndStaysSealed(descriptorPerPlane: Bool) throws {
        let layout = makeTestLayout(width: 200, height: 100)
        // A larger first buffer than its planes need, as a V4L2 driver's sizeimage may ask.
        let minimum = descriptorPerPlane ? [3 * 4096 + 1, 0] : [layout.allocationSize + 5000]
        let (surface, udmabufs) = try Surface.makeMemFDWithUDMABufs(
            layout: layout,
            descriptorPerPlane: descriptorPerPlane,
            minimumByteCounts: minimum
        )
        #expect(surface.backing == .memfd)
        #expect(surface.descriptorCount == (descriptorPerPlane ? 2 : 1))
        #expect(udmabufs.descriptors.count == surface.descriptorCount)
        #expect(udmabufs.byteCounts.count == surface.descriptorCount)
        #expect(udmabufs.byteCounts.allSatisfy { $0 % Syscall.pageSize == 0 })
        #expect(udmabufs.byteCounts[0] >= minimum[0])
        #expect(udmabufs.byteCounts.reduce(0, +) == surface.allocationSize)
        for (index, descriptor) in udmabufs.descriptors.enumerated() {
            #expect(try Syscall.fileSystemType(descriptor).get() == DMABufSync.fileSystemMagic)
            #expect(try Syscall.fileSize(descriptor).get().byteCount == udmabufs.byteCounts[index])
            let seals = try Syscall.seals(surface.descriptors[index]).get()
            let wanted = MemFD.sealShrink | MemFD.sealGrow | MemFD.sealFutureWrite | MemFD.sealSeal
            #expect(seals & wanted == wanted, "seals 0x\(String(seals, radix: 16))")
        }
        // Write every plane through the DMA-BUFs (as a device would), read it through the surface.
        var expected: [[UInt8]] = []
        for (index, plane) in surface.layout.planes.enumerated() {
            let buffer = descriptorPerPlane ? index : 0
            let byteCount = udmabufs.byteCounts[buffer]
            let base = try #require(
                unsafe mmap(
                    nil,
                    byteCount,
                    PROT_READ | PROT_WRITE,
                    MAP_SHARED,
                    udmabufs.descriptors[buffer].rawValue,
                    0
                )
            )
            try #require(unsafe base != MAP_FAILED)
            defer { _ = unsafe munmap(base, byteCount) }
            var bytes: [UInt8] = []
            for row in 0..<plane.height {
                for column in 0..<plane.bytesPerRow {
                    let value = testPatternByte(plane: index, row: row, column: column)
                    unsafe base.storeBytes(
                        of: value,
                        toByteOffset: plane.offset + row * plane.bytesPerRow + column,
                        as: UInt8.self
                    )
                    bytes.append(value)
                }
            }
            expected.append(bytes)
        }
        try surface.lock(.readOnly)
        for index in surface.layout.planes.indices {
            let read = unsafe surface.withUnsafeBytes(ofPlane: index) { unsafe Array($0) }
            #expect(Array(read.prefix(expected[index].count)) == expected[index], "plane \(index)")
        }
        try surface.unlock(.readOnly)
        // What a subscriber gets: a read-only memfd, which cannot be made writable by reopening it either.
        let handle = try surface.makeHandle()
        for descriptor in handle.borrowedDescriptors {
            let reopened = open("/proc/self/fd/\(descriptor.rawValue)", O_RDWR)
            try #require(reopened >= 0)
            defer { close(reopened) }
            let writable = unsafe mmap(nil, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, reopened, 0)
            #expect(unsafe writable == MAP_FAILED && errno == EPERM, "a peer mapped the frame writable")
        }
    }

    /// The importer's side: read-only, synced, and sharing (not copying) the exporter's memory.
    @Test(
        .enabled(if: DeviceRequirement.runs(DeviceRequirement.systemHeap), "needs /dev/dma_heap/system (absent here)")
    )
    func anImportedDMABufIsReadOnlySyncedAndSharesTheExportersMemory() throws {
        let exporter = try DMABufAllocator.systemHeap.makeSurface(layout: makeTestLayout())
        try writeTestPattern(exporter)
        let imported = try Surface.importing(try exporter.makeHandle())
        #expect(imported.id == exporter.id)
        #expect(imported.backing == .dmaBuf(modifier: DRMModifier.linear))
        #expect(imported.isReadOnly)
        #expect(throws: SurfaceError(code: .readOnly, operation: "Surface.lock(readWrite) on \(imported.id)")) {
            try imported.lock()
        }
        try imported.lock(.readOnly)
        #expect(
            unsafe imported.withUnsafeBytes(ofPlane: 1) { unsafe $0[7] } == testPatternByte(plane: 1, row: 0, column: 7)
        )
        try imported.unlock(.readOnly)
        #expect(throws: SurfaceError.self) { try imported.unlock(.readOnly) }

        // The exporter rewrites a byte; the importer sees it at its next lock: one buffer, two mappings.
        try exporter.lock()
        unsafe exporter.withUnsafeMutableBytes(ofPlane: 1) { unsafe $0[7] = 0xE7 }
        try exporter.unlock()
        try imported.lock(.readOnly)
        #expect(unsafe imported.withUnsafeBytes(ofPlane: 1) { unsafe $0[7] } == 0xE7)
        try imported.unlock(.readOnly)
    }

    /// Proves the bracketing with the kernel's own record: `strace` attached to this thread sees exactly one
    /// `DMA_BUF_IOCTL_SYNC` per buffer inside each `lock` and each `unlock`, none while the bytes are touched, for a
    /// one-buffer and a two-buffer surface. (Markers are `write(-1, ...)` calls, which fail with EBADF but appear in
    /// the trace.)
    @Test(
        .enabled(
            if: DeviceRequirement.runs(DeviceRequirement.systemHeap)
                && (DeviceRequirement.requireAll
                    || DeviceRequirement.tool("strace") != nil),
            "needs /dev/dma_heap/system and strace (absent here)"
        )
    )
    func lockAndUnlockIssueOneDMABufSyncPerBufferAndNoneInBetween() throws {
        let strace = try #require(DeviceRequirement.tool("strace"), "strace is not on the PATH")
        let layout = makeTestLayout()
        let single = try DMABufAllocator.systemHeap.makeSurface(layout: layout)
        let luma = try allocateFromSystemHeap(byteCount: 16384, accessMode: .readWrite)
        let chroma = try allocateFromSystemHeap(byteCount: 16384, accessMode: .readWrite)
        defer {
            Syscall.close(luma)
            Syscall.close(chroma)
        }
        let double = try Surface.importDMABuf(
            planes: [
                DMABufPlane(descriptor: luma, offset: 0, bytesPerRow: layout.planes[0].bytesPerRow),
                DMABufPlane(descriptor: chroma, offset: 0, bytesPerRow: layout.planes[1].bytesPerRow),
            ],
            layout: layout,
            modifier: DRMModifier.linear
        )
        #expect(double.descriptorCount == 2)

        let trace = try SyscallTrace(strace: strace)
        for (name, surface) in [("single", single), ("double", double)] {
            trace.mark("\(name)-lock")
            try surface.lock()
            trace.mark("\(name)-locked")
            unsafe surface.withUnsafeMutableBytes(ofPlane: 0) { unsafe $0[0] = 1 }
            trace.mark("\(name)-unlock")
            try surface.unlock()
            trace.mark("\(name)-unlocked")
            try surface.lock(.readOnly)
            trace.mark("\(name)-read")
            _ = unsafe surface.withUnsafeBytes(ofPlane: 0) { unsafe $0[0] }
            trace.mark("\(name)-unlock-read")
            try surface.unlock(.readOnly)
            trace.mark("\(name)-done")
        }
        let lines = try trace.finish()
        func syncs(between start: String, and end: String) -> [Int32] {
            guard let from = lines.firstIndex(where: { $0.contains("\"\(start)\"") }),
                let to = lines.firstIndex(where: { $0.contains("\"\(end)\"") }), from < to
            else { return [-1] }
            return lines[from..<to].compactMap { line -> Int32? in
                guard line.contains("DMA_BUF_IOCTL_SYNC") || line.contains("0x40086200"),
                    let open = line.firstIndex(of: "("), let comma = line.firstIndex(of: ",")
                else { return nil }
                return Int32(line[line.index(after: open)..<comma])
            }.sorted()
        }
        for (name, surface) in [("single", single), ("double", double)] {
            let descriptors = surface.descriptors.map(\.rawValue).sorted()
            #expect(syncs(between: "\(name)-lock", and: "\(name)-locked") == descriptors, "\(lines)")
            #expect(syncs(between: "\(name)-locked", and: "\(name)-unlock").isEmpty, "\(lines)")
            #expect(syncs(between: "\(name)-unlock", and: "\(name)-unlocked") == descriptors, "\(lines)")
            #expect(syncs(between: "\(name)-unlocked", and: "\(name)-read") == descriptors, "\(lines)")
            #expect(syncs(between: "\(name)-read", and: "\(name)-unlock-read").isEmpty, "\(lines)")
            #expect(syncs(between: "\(name)-unlock-read", and: "\(name)-done") == descriptors, "\(lines)")
        }
    }

    // MARK: Hostile DMA-BUFs

    /// A DMA-BUF smaller than the layout its sender claims: refused before anything is mapped, nothing leaked.
    @Test(
        .enabled(if: DeviceRequirement.runs(DeviceRequirement.systemHeap), "needs /dev/dma_heap/system (absent here)")
    )
    func aDMABufSmallerThanItsClaimedLayoutIsRefused() throws {
        let small = try allocateFromSystemHeap(byteCount: 4096, accessMode: .readWrite)
        defer { Syscall.close(small) }
        let layout = makeTestLayout(width: 128, height: 64)  // 12288 bytes
        let before = descriptorsOpen(onFileOf: small)
        let handle = SurfaceHandle(
            id: SurfaceID(rawValue: 7),
            layout: layout,
            backing: .dmaBuf(modifier: DRMModifier.linear),
            descriptors: [try Syscall.duplicate(small).get()],
            planeDescriptorIndices: [0, 0],
            descriptorByteCounts: [layout.allocationSize]
        )
        let failure = importError(handle)
        let error = try #require(failure)
        #expect(error.code == .tooSmall, "\(error)")
        #expect(descriptorsOpen(onFileOf: small) == before)

        // The public import of a buffer's planes: a plane that ends past the buffer is refused.
        let planes = layout.planes.map {
            DMABufPlane(descriptor: small, offset: $0.offset, bytesPerRow: $0.bytesPerRow)
        }
        do {
            _ = try Surface.importDMABuf(planes: planes, layout: layout, modifier: DRMModifier.linear)
            Issue.record("a 12288-byte layout imported from a 4096-byte DMA-BUF")
        } catch {
            #expect(error.code == .invalidLayout, "\(error)")
        }
        #expect(descriptorsOpen(onFileOf: small) == before)
    }

    /// A sealed memfd announced as a DMA-BUF: its sender could otherwise skip the memfd checks. The file system
    /// tells them apart (`fstatfs`), so this runs everywhere, without a device.
    @Test func aMemfdPosingAsADMABufIsRefused() throws {
        let memfd = try Surface.makeMemFD(layout: makeTestLayout())
        let exported = try memfd.makeHandle()
        let before = descriptorsOpen(onFileOf: exported.borrowedDescriptors[0])
        let posing = SurfaceHandle(
            id: exported.id,
            layout: exported.layout,
            backing: .dmaBuf(modifier: DRMModifier.linear),
            descriptors: [try Syscall.duplicate(exported.borrowedDescriptors[0]).get()],
            planeDescriptorIndices: exported.planeDescriptorIndices,
            descriptorByteCounts: exported.descriptorByteCounts
        )
        let failure = importError(posing)
        let error = try #require(failure)
        #expect(error.code == .notADMABuf, "\(error)")
        #expect(descriptorsOpen(onFileOf: exported.borrowedDescriptors[0]) == before)
        let planes = memfd.layout.planes.map {
            DMABufPlane(descriptor: exported.borrowedDescriptors[0], offset: $0.offset, bytesPerRow: $0.bytesPerRow)
        }
        #expect(throws: SurfaceError.self) {
            try Surface.importDMABuf(planes: planes, layout: memfd.layout, modifier: DRMModifier.linear)
        }
    }

    /// An exporter decides what its DMA-BUF allows: one made write-only refuses every read mapping (EACCES), one made
    /// read-only refuses a writable one. The importer reports a typed error and keeps nothing; what the exporter
    /// allows still imports.
    @Test(
        .enabled(if: DeviceRequirement.runs(DeviceRequirement.systemHeap), "needs /dev/dma_heap/system (absent here)")
    )
    func aDMABufWhoseExporterRefusesTheMappingIsATypedError() throws {
        let layout = makeTestLayout()
        let writeOnly = try allocateFromSystemHeap(byteCount: 8192, accessMode: .writeOnly)
        let readOnly = try allocateFromSystemHeap(byteCount: 8192, accessMode: .readOnly)
        defer {
            Syscall.close(writeOnly)
            Syscall.close(readOnly)
        }
        let before = descriptorsOpen(onFileOf: writeOnly)
        let handle = SurfaceHandle(
            id: SurfaceID(rawValue: 9),
            layout: SurfaceLayout(
                pixelFormat: layout.pixelFormat,
                width: layout.width,
                height: layout.height,
                planes: layout.planes,
                allocationSize: 8192
            ),
            backing: .dmaBuf(modifier: DRMModifier.linear),
            descriptors: [try Syscall.duplicate(writeOnly).get()],
            planeDescriptorIndices: [0, 0],
            descriptorByteCounts: [8192]
        )
        let failure = importError(handle)
        #expect(failure == SurfaceError(code: .systemCall, operation: "mmap(dma-buf)", errno: .permissionDenied))
        #expect(descriptorsOpen(onFileOf: writeOnly) == before)

        let planes = layout.planes.map {
            DMABufPlane(descriptor: readOnly, offset: $0.offset, bytesPerRow: $0.bytesPerRow)
        }
        #expect(throws: SurfaceError(code: .systemCall, operation: "mmap(dma-buf)", errno: .permissionDenied)) {
            try Surface.importDMABuf(planes: planes, layout: layout, modifier: DRMModifier.linear, readOnly: false)
        }
        #expect(descriptorsOpen(onFileOf: readOnly) == 1)
        let reader = try Surface.importDMABuf(
            planes: planes,
            layout: layout,
            modifier: DRMModifier.linear,
            readOnly: true
        )
        try reader.lock(.readOnly)
        #expect(unsafe reader.withUnsafeBytes(ofPlane: 0) { bytes in unsafe bytes.allSatisfy { $0 == 0 } })
        try reader.unlock(.readOnly)
    }
}

/// `strace -p` attached to the calling thread, recording `ioctl` and `write` calls; ``mark(_:)`` writes a marker
/// into the record. Used from one synchronous test body, so every call it records is that test's.
final class SyscallTrace {
    private let process = Process()
    private let output: URL
    private var markers = 0

    init(strace: String) throws {
        output = FileManager.default.temporaryDirectory.appendingPathComponent("fbtrace-\(UUID().uuidString).txt")
        process.executableURL = URL(fileURLWithPath: strace)
        // /proc/thread-self is "PID/task/TID": trace this thread only.
        let thread = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")
        guard let tid = thread.split(separator: "/").last.flatMap({ Int32($0) }) else {
            throw SyscallTraceError(description: "no thread id in /proc/thread-self (\(thread))")
        }
        process.arguments = ["-q", "-e", "trace=ioctl,write", "-o", output.path, "-p", "\(tid)"]
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Attached once a marker shows up in the record (bounded: strace starts slowly in a TCG guest).
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            mark("attach-\(markers)")
            if lines().contains(where: { $0.contains("\"attach-") }) { return }
            usleep(50_000)
        }
        process.terminate()
        throw SyscallTraceError(description: "strace did not attach within 60 s: \(lines())")
    }

    /// A `write(-1, name)`: fails with EBADF, recorded by strace.
    func mark(_ name: String) {
        markers += 1
        _ = name.withCString { write(-1, $0, strlen($0)) }
    }

    private func lines() -> [String] {
        ((try? String(contentsOf: output, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Detaches strace and returns the recorded lines.
    func finish() throws -> [String] {
        mark("finish")
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, !lines().contains(where: { $0.contains("\"finish\"") }) { usleep(20_000) }
        kill(process.processIdentifier, SIGINT)
        while Date() < deadline, process.isRunning { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        defer { try? FileManager.default.removeItem(at: output) }
        return lines()
    }
}

struct SyscallTraceError: Error, CustomStringConvertible {
    var description: String
}
