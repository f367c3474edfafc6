import Foundation
import Synchronization
import Testing
import TestSupport

@testable import FrameBus

/// `Publisher.Configuration.compressionEffort` (and `framebus publish --effort`): the compressed variant a subscriber
/// receives is exactly what a codec at that effort writes, and decodes to the published frame.
@Suite(.timeLimit(.minutes(5))) struct PublisherCompressionEffortTests {
    static let (width, height) = (256, 64 * 3)

    /// A screen-like BGRA frame (glyph-like marks on a gradient), where the two efforts write different bytes.
    static func screen() throws -> PixelBuffer {
        let buffer = try PixelBuffer(width: width, height: height, pixelFormat: .bgra8)
        try buffer.lock()
        let layout = buffer.planeLayout(0)
        try buffer.withUnsafeMutableBytes(ofPlane: 0) { bytes in
            for y in 0..<height {
                for offset in 0..<(width * 4) {
                    let x = offset / 4
                    let ink = (x / 6 + y / 11) % 3 == 0 && x % 6 < 4 && y % 11 < 8 && (x * 5 + y * 3) % 7 < 3
                    bytes[y * layout.bytesPerRow + offset] =
                        ink ? UInt8(truncatingIfNeeded: 30 + offset % 4) : UInt8(truncatingIfNeeded: 230 - y / 40)
                }
            }
        }
        try buffer.unlock()
        return buffer
    }

    /// The bytes a codec at `effort` writes for `frame`.
    static func encoded(_ frame: PixelBuffer, effort: SurfaceCodec.Effort) throws -> [UInt8] {
        let compressed = try SurfaceCodec.makeCompressedBuffer(width: width, height: height, format: .bgra8)
        let used = try SurfaceCodecContext(threadCount: 1, effort: effort).compress(frame, into: compressed)
            .compressedByteCount
        try compressed.lock(.readOnly)
        defer { try? compressed.unlock(.readOnly) }
        return compressed.surface.withUnsafeBytes { Array($0.prefix(used)) }
    }

    /// Keeps the first compressed frame's bytes.
    final class FirstCompressedFrame: SubscriberDelegate, Sendable {
        let bytes = Mutex<[UInt8]?>(nil)

        func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {
            guard let image = sampleBuffer.imageBuffer, image.pixelFormat.isCompressed,
                let used = try? SurfaceCodec.bytesUsed(of: image)
            else { return }
            let received = try? image.withLock(.readOnly) { image.surface.withUnsafeBytes { Array($0.prefix(used)) } }
            bytes.withLock { if $0 == nil { $0 = received } }
        }
    }

    @Test(arguments: SurfaceCodec.Effort.allCases)
    func theCompressedVariantIsWhatACodecAtTheConfiguredEffortWrites(effort: SurfaceCodec.Effort) async throws {
        let frame = try Self.screen()
        let expected = try Self.encoded(frame, effort: effort)
        let other = try Self.encoded(frame, effort: effort == .fast ? .best : .fast)
        try #require(expected != other, "this frame does not tell the efforts apart")

        let path = temporaryBusPath("effort-\(effort.rawValue)")
        var configuration = Publisher.Configuration(path: path, formats: [.bgra8, .bgra8.compressedVariant!])
        configuration.compressionEffort = effort
        configuration.systemPressurePolicy = nil
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        let subscriber = try Subscriber(
            configuration: .init(path: path, acceptedFormats: [.bgra8.compressedVariant!], delivery: .queue(depth: 4))
        )
        defer { subscriber.cancel() }
        let received = FirstCompressedFrame()
        subscriber.setDelegate(received)
        #expect(await eventually { publisher.subscriberCount == 1 })
        // Published until the first compressed frame arrives (the encoder sheds a frame it cannot start in time).
        let arrived = await eventually {
            if received.bytes.withLock({ $0 }) == nil { _ = try? publisher.publish(frame) }
            return received.bytes.withLock { $0 } != nil
        }
        try #require(arrived, "no compressed frame arrived")
        let bytes = try #require(received.bytes.withLock { $0 })
        #expect(bytes.count == expected.count)
        #expect(bytes == expected, "the compressed variant is not what a \(effort) codec writes")
    }
}
