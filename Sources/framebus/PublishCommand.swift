import ArgumentParser
import Foundation
import FrameBus
import ImageSources

#if canImport(Glibc)
import Glibc
#endif

/// `framebus publish`: publish a moving test pattern (or PNG images) at a frame rate.
struct PublishCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish",
        abstract: "Publish frames (a moving test pattern or PNG images) on a socket path.",
        discussion: """
            Subscribers connect with `framebus subscribe --path P`. With --compressed the lossless compressed \
            variant of the format is offered too; it is encoded once per frame and shared by every subscriber \
            that asks for it. Prints a status line per second.
            """
    )

    @Option(help: "The socket path to listen on.")
    var path: String

    @Option(help: "Pixel format (420v, 420f, x420, xf20, BGRA).")
    var format: String = "420v"

    @Option(help: "Frame size, WIDTHxHEIGHT (ignored for --images, which keep their own size).")
    var size: String = "1920x1080"

    @Option(help: "Frames per second.")
    var fps: Double = 60

    @Option(help: "Frame source: pattern or images.")
    var source: String = "pattern"

    @Option(help: "A folder of PNG images to publish in a loop (implies --source images).")
    var images: String?

    @Flag(help: "Also offer the lossless compressed variant of the format.")
    var compressed = false

    @Option(help: "Stop after this many seconds.")
    var duration: Double?

    @Option(help: "Most buffers in the pool (frames held by subscribers beyond this drop with outOfBuffers).")
    var buffers: Int = 12

    @Flag(help: "Print no per-second status.")
    var quiet = false

    func run() async throws {
        let pixelFormat = try PixelFormat(format)
        guard !pixelFormat.isCompressed else { throw ValidationError("publish a base format; use --compressed") }
        var formats = [pixelFormat]
        if compressed, let variant = pixelFormat.compressedVariant { formats.append(variant) }
        let producer = try FrameProducer(
            format: pixelFormat,
            size: size,
            imagesFolder: images ?? (source == "images" ? "Corpus/kodak" : nil),
            buffers: buffers
        )
        let publisher = try Publisher(configuration: .init(path: path, formats: formats))
        if !quiet { say("publishing \(producer.summary) at \(fps) fps on \(path), offering \(formats)") }

        let interval = 1.0 / max(fps, 0.1)
        let start = Date()
        var next = start
        var index = 0
        var lastReport = 0
        while duration.map({ Date().timeIntervalSince(start) < $0 }) ?? true {
            producer.publishFrame(index: index, on: publisher)
            index += 1
            next = next.addingTimeInterval(interval)
            let wait = next.timeIntervalSinceNow
            if wait > 0 { try await Task.sleep(for: .seconds(wait)) } else { next = Date() }
            let elapsed = Int(Date().timeIntervalSince(start))
            if elapsed > lastReport, !quiet {
                lastReport = elapsed
                let statistics = publisher.statistics
                say(
                    "\(elapsed)s published \(statistics.published)  subscribers \(statistics.subscribers.count)  "
                        + "delivered \(statistics.total.delivered)  held \(statistics.total.heldNow)  "
                        + "dropped \(Self.dropSummary(statistics))"
                )
            }
        }
        publisher.stop()
    }

    static func dropSummary(_ statistics: PublisherStatistics) -> String {
        var drops = statistics.total.dropped
        for (reason, count) in statistics.droppedAtSource where reason != .outOfBuffers || drops[reason] == nil {
            drops[reason, default: 0] = max(drops[reason, default: 0], count)
        }
        return DroppedFrameReason.allCases.map { "\($0)=\(drops[$0, default: 0])" }.joined(separator: " ")
    }
}

/// Makes frames for `publish` and `demo`: the moving test pattern in pool buffers, or PNG images.
final class FrameProducer {
    let format: PixelFormat
    let width: Int
    let height: Int
    private let pool: PixelBufferPool?
    private let pattern: TestPattern?
    private let images: [PixelBuffer]

    init(format: PixelFormat, size: String, imagesFolder: String?, buffers: Int) throws {
        self.format = format
        if let imagesFolder {
            let folder = URL(fileURLWithPath: imagesFolder)
            let files = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
                .filter { $0.pathExtension.lowercased() == "png" }.sorted { $0.path < $1.path }
            guard !files.isEmpty else { throw ValidationError("no PNG images in \(imagesFolder)") }
            images = try files.map { url in
                try RGBImage(contentsOfPNGFile: url.path).croppedToEven().makePixelBuffer(pixelFormat: format)
            }
            width = images[0].width
            height = images[0].height
            pool = nil
            pattern = nil
        } else {
            let dimensions = size.lowercased().split(separator: "x").compactMap { Int($0) }
            guard dimensions.count == 2 else { throw ValidationError("size must be WIDTHxHEIGHT") }
            (width, height) = (dimensions[0], dimensions[1])
            pool = try PixelBufferPool(
                attributes: .init(width: width, height: height, pixelFormat: format, allocationThreshold: buffers)
            )
            pattern = try TestPattern(width: width, height: height, pixelFormat: format)
            images = []
        }
    }

    var summary: String {
        images.isEmpty ? "the test pattern, \(width)x\(height) \(format)" : "\(images.count) images, \(format)"
    }

    /// Publishes frame `index`; a frame the pool cannot supply is dropped (outOfBuffers) and reported by the
    /// publisher.
    func publishFrame(index: Int, on publisher: Publisher) {
        let timing = SampleTimingInfo(presentationTimeStamp: HostClock.now)
        if !images.isEmpty {
            _ = try? publisher.publish(images[index % images.count], timing: timing)
            return
        }
        guard let pool, let pattern, let buffer = try? publisher.makePixelBuffer(from: pool) else { return }
        do {
            try buffer.lock()
            try pattern.fill(buffer, frameIndex: index)
            try buffer.unlock()
            try publisher.publish(buffer, timing: timing)
        } catch {
            FileHandle.standardError.write("frame \(index): \(error)\n".data(using: .utf8)!)
        }
    }
}
