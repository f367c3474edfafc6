import Foundation
import Glibc
import TestSupport
import Testing

@testable import FrameBus

/// `fb_subscriber_options.accepts_dma_buf` (the C face of `Subscriber.Configuration.acceptsDMABuf`): C subscribers
/// in other processes (Tests/CABI/nodmabuf.c): on any host their HELLO; in the guest kernel of `scripts/device-tests`
/// (it needs /dev/dma_heap/system) against a real publisher whose frames live in DMA-BUFs. What the
/// publisher does for a subscriber that did not set `acceptsDMABuf` in its HELLO (docs/PROTOCOL.md §4.3): a raw frame
/// in a DMA-BUF is not sent to it (DROP `outOfBuffers`), while the compressed variant, which the publisher encodes
/// into a sealed memfd, is.
@Suite(.serialized, .timeLimit(.minutes(8))) struct DeclinedDMABufTests {
    static let requireAll = ProcessInfo.processInfo.environment["FRAMEBUS_REQUIRE_ALL"] == "1"
    static let hasSystemHeap = FileManager.default.fileExists(atPath: "/dev/dma_heap/system")
    /// A process that is slow to start (a TCG guest starts one ~25× slower than the host) gets minutes.
    static let patience: Double = 240

    /// On any host: the option reaches the wire. A C subscriber's HELLO, read by a listener standing in for the
    /// publisher, offers DMA-BUF (`acceptsDMABuf`, bit 0 of its flags) by default and not with `accepts_dma_buf = 0`.
    @Test(arguments: [("1", true), ("0", false)])
    func theOptionSetsTheHelloFlag(option: String, offered: Bool) async throws {
        let scratch = try ScratchDirectory()
        let path = scratch.path("bus.sock")
        let program = try await CProgram.build("nodmabuf")
        let listener = try Socket.listen(path: path, mode: 0o600).get()
        let consumer = try await program.start([path, "420v", option], in: scratch)
        let flags = try await onDedicatedThread { () throws -> UInt16? in
            // Minutes, not seconds: the C program starts slowly under load; its lifeline ends it with the test.
            let deadline = Date().addingTimeInterval(Self.patience)
            var connection: Socket?
            while connection == nil, Date() < deadline {
                _ = listener.waitReadable(timeoutMilliseconds: 100)
                if case .success(.some(let accepted)) = listener.accept() { connection = accepted }
            }
            guard let connection else { return nil }
            while Date() < deadline {
                _ = connection.waitReadable(timeoutMilliseconds: 100)
                switch connection.receive(maximumSize: 1024) {
                case .success(.datagram(let datagram)):
                    let message = try WireMessage.decode(datagram.bytes, descriptorCount: datagram.descriptors.count)
                    guard case .hello(let hello) = message else { return nil }
                    return hello.flags
                case .success(.wouldBlock): continue
                default: return nil
                }
            }
            return nil
        }
        withExtendedLifetime(listener) {}
        let received = try #require(flags, "no HELLO: \(consumer.output)")
        #expect((received & WireHello.acceptsDMABufFlag != 0) == offered, "flags 0x\(String(received, radix: 16))")
        // Bit 3: it understands DROP reason 5 (docs/PROTOCOL.md §5.8); nothing else is set.
        #expect(received & ~WireHello.acceptsDMABufFlag == WireHello.knowsUnsupportedSurfaceFlag)
        unlink(path)
    }

    @Test(.enabled(if: hasSystemHeap || requireAll, "needs /dev/dma_heap/system (absent here)"))
    func aSubscriberDecliningDMABufGetsDropsForDMABufFramesAndTheirCompressedVariant() async throws {
        let scratch = try ScratchDirectory()
        let path = scratch.path("bus.sock")
        let program = try await CProgram.build("nodmabuf")
        let publisher = try Publisher(
            configuration: .init(
                path: path,
                formats: [.yuv420BiPlanarVideoRange8, .compressedYUV420BiPlanarVideoRange8]
            )
        )
        defer { publisher.stop() }
        let declining = try await program.start([path, "420v", "0"], in: scratch)
        let compressed = try await program.start([path, "&8v0", "0"], in: scratch)
        let accepting = try await program.start([path, "420v", "1"], in: scratch)
        // The command line's switch: `framebus subscribe --no-dmabuf`.
        let command = try await startFramebus([
            "subscribe", "--path", path, "--accept", "420v", "--queue", "16", "--json", "--no-dmabuf",
            "--connect-timeout", "\(Int(Self.patience))",
        ])
        try #require(
            await eventually(timeout: Self.patience) { publisher.subscriberCount == 4 },
            "subscribers did not connect: \(declining.output) \(compressed.output) \(accepting.output) \(command.output)"
        )
        let pool = try PixelBufferPool(
            attributes: .init(
                width: 64,
                height: 48,
                pixelFormat: .yuv420BiPlanarVideoRange8,
                maximumBufferAge: nil,
                dmaBufAllocator: .systemHeap
            )
        )
        let count = 4
        var hashes: [String: String] = [:]
        for index in 0..<count {
            let buffer = try publisher.makePixelBuffer(from: pool)
            #expect(buffer.surface.backing == .dmaBuf(modifier: DRMModifier.linear))
            let hash = try Self.fill(buffer, index: index)
            let sequence = try publisher.publish(buffer, timing: SampleTimingInfo(presentationTimeStamp: HostClock.now))
            hashes[String(sequence)] = String(hash, radix: 16)
            // The next frame once this one's compressed variant arrived: the publisher encodes off its publishing
            // thread, latest-only, so frames published faster than it encodes (a guest under TCG) would be shed for
            // the compressed subscriber, which is not what this test is about (ConversionWorkerProcessTests is).
            try #require(
                await eventually(timeout: Self.patience) { compressed.records("frame").count > index },
                "compressed: \(compressed.output)"
            )
        }
        func dropped(_ peer: ChildProcess) -> Int {
            peer.records("drop").filter { $0["reason"] == "2" }.compactMap { Int($0["count"] ?? "") }.reduce(0, +)
        }
        let settled = await eventually(timeout: Self.patience) {
            dropped(declining) >= count && compressed.records("frame").count >= count
                && accepting.records("frame").count >= count
        }
        #expect(
            settled,
            "declining: \(declining.output)\ncompressed: \(compressed.output)\naccepting: \(accepting.output)"
        )
        // Declined: no raw frame reached it, every one is covered by an out-of-buffers drop.
        #expect(declining.records("frame").isEmpty, "\(declining.output)")
        #expect(dropped(declining) == count, "\(declining.output)")
        // The compressed variant lives in a sealed memfd: it arrives, bit-exact.
        let compressedFrames = compressed.records("frame")
        #expect(compressedFrames.count == count, "\(compressed.output)")
        for frame in compressedFrames {
            #expect(frame["dma"] == "0", "\(frame)")
            #expect(frame["hash"] == hashes[frame["seq"] ?? ""], "\(frame)")
        }
        #expect(dropped(compressed) == 0, "\(compressed.output)")
        // The control in the same run: a subscriber that accepts DMA-BUFs gets the very frames as DMA-BUFs.
        let acceptedFrames = accepting.records("frame")
        #expect(acceptedFrames.count == count, "\(accepting.output)")
        for frame in acceptedFrames {
            #expect(frame["dma"] == "1", "\(frame)")
            #expect(frame["hash"] == hashes[frame["seq"] ?? ""], "\(frame)")
        }
        publisher.stop()
        for peer in [declining, compressed, accepting] {
            let status = (try? await peer.exitStatus(within: Self.patience)) ?? -1
            #expect(status == 0, "\(peer.output)")
            #expect(peer.output.contains("end status=FB_ERROR_END_OF_STREAM"), "\(peer.output)")
        }
        // The command line prints a JSON summary when the stream ends: no frame, every one an out-of-buffers drop.
        #expect(await command.waitForExit(timeout: Self.patience), "\(command.output)")
        let summary = command.output.split(separator: "\n").last { $0.contains("\"summary\":true") }
        let totals = summary.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(totals?["frames"] as? Int == 0, "\(command.output)")
        #expect(totals?["outOfBuffers"] as? Int == count, "\(command.output)")
    }

    /// Fills a 4:2:0 buffer with a pattern of `index` and returns FNV-1a 64 of its payload rows, plane after plane
    /// (what nodmabuf.c hashes).
    static func fill(_ buffer: PixelBuffer, index: Int) throws -> UInt64 {
        try buffer.lock()
        defer { try? buffer.unlock() }
        var hash: UInt64 = 14_695_981_039_346_656_037
        for plane in 0..<buffer.planeCount {
            let layout = buffer.planeLayout(plane)
            let rowBytes = layout.width * layout.bytesPerElement
            try buffer.withUnsafeMutableBytes(ofPlane: plane) { bytes in
                for row in 0..<layout.height {
                    for x in 0..<rowBytes {
                        let value = UInt8(truncatingIfNeeded: index &* 31 &+ plane &* 101 &+ row &* 7 &+ (x ^ row) / 3)
                        bytes[row * layout.bytesPerRow + x] = value
                        hash = (hash ^ UInt64(value)) &* 1_099_511_628_211
                    }
                }
            }
        }
        return hash
    }
}
