import Foundation
import TestSupport
import Testing

/// `fb_frame_dup_fd` and `fb_frame_dup_fds` from C (Tests/CABI/dupfds.c) against publishers in other processes: a
/// surface with a memfd per plane (which made `fb_frame_dup_fd` abort the process), one memfd, a compressed frame,
/// and, in the guest kernel of `scripts/guest-run`, DMA-BUF surfaces of one buffer and of a buffer per plane.
@Suite(.serialized, .timeLimit(.minutes(5))) struct FrameDescriptorTests {
    static let requireAll = ProcessInfo.processInfo.environment["FRAMEBUS_REQUIRE_ALL"] == "1"
    static let hasSystemHeap = FileManager.default.fileExists(atPath: "/dev/dma_heap/system")

    /// FrameBusTestPeer, built beside the test bundle and libFrameBusC.so.
    static func peer() throws -> URL {
        try CABILocations.productsDirectory().appendingPathComponent("FrameBusTestPeer")
    }

    /// Starts FrameBusTestPeer with `arguments` (a publisher), then the C consumer on its socket; returns the
    /// consumer's run after it exited, and the publisher's (their output lives in `scratch`).
    func consume(
        _ arguments: [String],
        accept: String
    ) async throws -> (consumer: ChildProcess, publisher: ChildProcess, scratch: ScratchDirectory) {
        let scratch = try ScratchDirectory()
        let path = scratch.path("bus.sock")
        let program = try await CProgram.build("dupfds")
        let publisher = try await ChildProcess(
            try Self.peer(),
            [arguments[0], path] + arguments.dropFirst(),
            outputDirectory: scratch.url
        )
        #expect(await publisher.waitForOutput("listening", timeout: 120), "publisher: \(publisher.output)")
        let consumer = try await program.start([path, accept], in: scratch)
        let status = (try? await consumer.exitStatus(within: 180)) ?? -1
        #expect(status == 0, "the C consumer exited \(status) (132 is the old abort): \(consumer.output)")
        await publisher.waitForExit(timeout: 30)
        return (consumer, publisher, scratch)
    }

    /// The defect: a legal per-plane memfd surface made `fb_frame_dup_fd` trap (exit 132). Now it returns -1 with
    /// FB_ERROR_FORMAT_MISMATCH, and `fb_frame_dup_fds` gives both planes' descriptors, bit-exact and read-only.
    @Test func aSurfaceWithAMemfdPerPlaneGivesEveryPlaneAndNeverAborts() async throws {
        let (consumer, _, scratch) = try await consume(["hostile-publisher", "multi-descriptor"], accept: "420v")
        defer { withExtendedLifetime(scratch) {} }
        let frames = consumer.records("frame")
        #expect(frames.count == 1, "\(consumer.output)")
        for frame in frames {
            #expect(frame["dup_fd"] == "FB_ERROR_FORMAT_MISMATCH", "\(frame)")
            #expect(frame["count"] == "2" && frame["dma"] == "0" && frame["modifier"] == "0", "\(frame)")
            #expect(frame["same"] == "1" && frame["distinct"] == "1" && frame["closed"] == "1", "\(frame)")
            #expect(frame["writable"] == "0" && frame["leaked"] == "0", "\(frame)")
        }
        #expect(consumer.output.contains("nulls=1"))
        #expect(consumer.output.contains("end status=FB_ERROR_END_OF_STREAM"), "\(consumer.output)")
    }

    /// One memfd holding both planes, and the compressed variant (one opaque entry): `fb_frame_dup_fd` works as
    /// before, and `fb_frame_dup_fds` agrees with it.
    @Test(arguments: [("420v", "2"), ("&8v0", "1")])
    func aSingleMemfdSurfaceGivesOneEntryPerPlane(accept: String, count: String) async throws {
        let (consumer, _, scratch) = try await consume(
            ["bus-publisher", "--format", "420v", "--size", "96x64", "--frames", "300", "--fps", "60", "--compressed"],
            accept: accept
        )
        defer { withExtendedLifetime(scratch) {} }
        let frames = consumer.records("frame")
        #expect(!frames.isEmpty, "\(consumer.output)")
        for frame in frames {
            #expect(frame["dup_fd"] == "FB_OK" && frame["count"] == count && frame["dma"] == "0", "\(frame)")
            #expect(frame["same"] == "1" && frame["distinct"] == "1" && frame["closed"] == "1", "\(frame)")
            #expect(frame["writable"] == "0" && frame["leaked"] == "0", "\(frame)")
        }
    }

    /// DMA-BUF surfaces, one buffer and a buffer per plane: a C consumer gets descriptors it can import (is_dma_buf,
    /// linear modifier) and reads every plane bit-exact between its own DMA_BUF_IOCTL_SYNCs. The exporter made the
    /// buffers read-write, and a DMA-BUF keeps its exporter's access mode: the C side can map them writable.
    @Test(
        .enabled(if: hasSystemHeap || requireAll, "needs /dev/dma_heap/system (absent here)"),
        arguments: [("dma-buf", "FB_OK"), ("dma-buf-per-plane", "FB_ERROR_FORMAT_MISMATCH")]
    )
    func aDMABufSurfaceGivesImportableDescriptors(scenario: String, single: String) async throws {
        let (consumer, publisher, scratch) = try await consume(["hostile-publisher", scenario], accept: "420v")
        #expect(!publisher.output.contains("no DMA-BUF device"), "\(publisher.output)")
        defer { withExtendedLifetime(scratch) {} }
        let frames = consumer.records("frame")
        #expect(frames.count == 1, "\(consumer.output)")
        for frame in frames {
            #expect(frame["dup_fd"] == single, "\(frame)")
            #expect(frame["count"] == "2" && frame["dma"] == "1" && frame["modifier"] == "0", "\(frame)")
            #expect(frame["same"] == "1" && frame["distinct"] == "1" && frame["closed"] == "1", "\(frame)")
            #expect(frame["writable"] == "1" && frame["leaked"] == "0", "\(frame)")
        }
    }

    static let gstLaunch = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        .map { "\($0)/gst-launch-1.0" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    static let plugin = CABILocations.packageRoot.appendingPathComponent("gstreamer/build/libgstframebus.so")

    /// framebussrc fd-memory=true with the real gst-launch-1.0: a DMA-BUF surface (one buffer, and a buffer per
    /// plane) leaves as GstDmaBufMemory that downstream could import, and videoconvert, which maps it, writes the
    /// publisher's bytes (Y 0x11, CbCr 0x22) bit-exact. Needs the plugin (`make -C gstreamer`).
    @Test(
        .enabled(
            if: requireAll
                || (hasSystemHeap && gstLaunch != nil && FileManager.default.fileExists(atPath: plugin.path)),
            "needs /dev/dma_heap/system, gst-launch-1.0 and gstreamer/build/libgstframebus.so (absent here)"
        ),
        arguments: ["dma-buf", "dma-buf-per-plane"]
    )
    func framebussrcOffersADMABufSurfaceAsDMABufMemory(scenario: String) async throws {
        let gstLaunch = try #require(Self.gstLaunch, "gst-launch-1.0 is not on the PATH")
        #expect(FileManager.default.fileExists(atPath: Self.plugin.path), "\(Self.plugin.path) is not built")
        let scratch = try ScratchDirectory()
        let path = scratch.path("bus.sock")
        let output = scratch.path("out.i420")
        let publisher = try await ChildProcess(
            try Self.peer(), ["hostile-publisher", path, scenario], outputDirectory: scratch.url
        )
        #expect(await publisher.waitForOutput("listening", timeout: 120), "publisher: \(publisher.output)")
        let pipeline = try await ChildProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "GST_PLUGIN_PATH=\(Self.plugin.deletingLastPathComponent().path)",
                "GST_REGISTRY=\(scratch.path("registry.bin"))", gstLaunch, "-m", "framebussrc",
                "socket-path=\(path)", "accept=420v", "fd-memory=true", "num-buffers=1", "!", "videoconvert", "!",
                "video/x-raw,format=I420", "!", "filesink", "location=\(output)",
            ],
            outputDirectory: scratch.url
        )
        let status = (try? await pipeline.exitStatus(within: 240)) ?? -1
        #expect(status == 0, "gst-launch-1.0: \(pipeline.output)")
        #expect(pipeline.output.contains("dmabuf-memory=(guint64)1"), "\(pipeline.output)")
        let expected = [UInt8](repeating: 0x11, count: 64 * 48) + [UInt8](repeating: 0x22, count: 32 * 24 * 2)
        let written = FileManager.default.contents(atPath: output).map { [UInt8]($0) }
        #expect(written == expected, "\(written?.count ?? -1) bytes")
        await publisher.waitForExit(timeout: 30)
    }
}
