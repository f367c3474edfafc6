import ArgumentParser
import Foundation
import FrameBus

/// `framebus-compressed-screen` in `framebus bench bus`: a publisher of screen content (a page of text scrolled one
/// text line a frame) offering the compressed variant, and one subscriber (the peer) that accepts only that variant.
/// Every frame is encoded on the publisher's encode thread (`conversionThreadCount` 1) and shared with the
/// subscriber; a frame the encoder cannot start in time is dropped for it (`WorkFellBehind`), so frames delivered
/// below frames sent are the encoder falling behind, and the latency includes the encode. The subscriber does not
/// decode.
extension BenchBusCommand {
    static let compressedScreen = "framebus-compressed-screen"

    /// Pages of screen content as plane bytes, `count` of them each scrolled one text line further: 16-row lines of
    /// 8-pixel "glyphs" (dark ink on a light page, from a fixed pseudo-random text), a coloured title bar.
    static func screenPages(_ format: PixelFormat, width: Int, height: Int, count: Int) throws -> [[[UInt8]]] {
        let probe = try PixelBuffer(width: width, height: height, pixelFormat: format)
        let planes = probe.surface.layout.planes
        var pages: [[[UInt8]]] = []
        for page in 0..<count {
            var planeBytes: [[UInt8]] = []
            for (index, plane) in planes.enumerated() {
                var bytes = [UInt8](repeating: 0, count: plane.byteCount)
                let rows = plane.height
                let sixteen = format == .yuv420BiPlanarVideoRange10 || format == .yuv420BiPlanarFullRange10
                let bgra = format == .bgra8
                let subsampling = index == 0 ? 1 : 2
                for y in 0..<rows {
                    let py = y * subsampling
                    let line = py / 16 + page
                    for x in 0..<plane.width {
                        let px = x * subsampling
                        let glyph = (px / 8 &* 2_654_435_761 ^ line &* 40503) % 37
                        let inGlyph = py % 16 < 11 && px % 8 < 6 && glyph < 30 && px < width - (line % 5) * 160
                        let ink = inGlyph && (glyph &* 7 + (px % 8) * 3 + (py % 16) * 5) % 4 == 0
                        let title = py < 24
                        if bgra {
                            let v: UInt8 = title ? 90 : ink ? 30 : 235
                            let o = y * plane.bytesPerRow + x * 4
                            bytes[o] = title ? 160 : v
                            bytes[o + 1] = v
                            bytes[o + 2] = title ? 40 : v
                            bytes[o + 3] = 255
                        } else if index == 0 {
                            let v = title ? 80 : ink ? 40 : 225
                            if sixteen {
                                let word = UInt16(v) << 8
                                bytes[y * plane.bytesPerRow + x * 2] = UInt8(word & 0xFF)
                                bytes[y * plane.bytesPerRow + x * 2 + 1] = UInt8(word >> 8)
                            } else {
                                bytes[y * plane.bytesPerRow + x] = UInt8(v)
                            }
                        } else {
                            let (cb, cr) = title ? (170, 100) : (128, 128)
                            if sixteen {
                                let o = y * plane.bytesPerRow + x * 4
                                bytes[o + 1] = UInt8(cb)
                                bytes[o + 3] = UInt8(cr)
                            } else {
                                bytes[y * plane.bytesPerRow + x * 2] = UInt8(cb)
                                bytes[y * plane.bytesPerRow + x * 2 + 1] = UInt8(cr)
                            }
                        }
                    }
                }
                planeBytes.append(bytes)
            }
            pages.append(planeBytes)
        }
        return pages
    }

    func measureCompressedScreen(
        _ channel: BenchmarkSocket,
        base: String,
        cases caseList: [(PixelFormat, Int, Int)],
        rates rateList: [Int]
    ) throws -> [BenchResult] {
        var results: [BenchResult] = []
        for (format, width, height) in caseList {
            guard let variant = format.compressedVariant else { continue }
            let pages = try Self.screenPages(format, width: width, height: height, count: 8)
            let path = base + "-screen.sock"
            var configuration = Publisher.Configuration(path: path, formats: [format, variant])
            configuration.maximumSubscribers = 1
            configuration.conversionThreadCount = 1
            let publisher = try Publisher(configuration: configuration)
            let pool = try PixelBufferPool(
                attributes: .init(
                    width: width,
                    height: height,
                    pixelFormat: format,
                    minimumBufferCount: 12,
                    maximumBufferAge: nil,
                    allocationThreshold: 12
                )
            )
            try request(channel, "bus \(path) queue compressed", expect: "ready")
            for (run, rate) in ([60] + rateList).enumerated() {
                // The first run (60 Hz, 48 frames) warms up: every surface announced, the encoder's workspace grown.
                let frames = run == 0 ? 48 : rate == 0 ? self.frames * 2 : self.frames
                try request(channel, "begin", expect: "ok")
                let period: UInt64 = rate > 0 ? 1_000_000_000 / UInt64(rate) : 0
                let cpu = BenchmarkSocket.processCPUNanoseconds()
                let start = BenchmarkSocket.monotonicNanoseconds()
                var next = start
                for frame in 0..<frames {
                    var buffer: PixelBuffer?
                    while buffer == nil {
                        buffer = try? publisher.makePixelBuffer(from: pool)
                        if buffer == nil { sched_yield() }
                    }
                    // The producer writes its frame: one page, copied in.
                    let page = pages[frame % pages.count]
                    try buffer!.lock([])
                    for (index, bytes) in page.enumerated() {
                        try buffer!.withUnsafeMutableBytes(ofPlane: index) { destination in
                            bytes.withUnsafeBytes { destination.copyMemory(from: $0) }
                        }
                    }
                    try buffer!.unlock([])
                    try publisher.publish(buffer!)
                    buffer = nil
                    if period > 0 {
                        next += period
                        sleep(until: next)
                    }
                }
                let peer = try report(channel, "report \(frames)")
                let parentCPU = BenchmarkSocket.processCPUNanoseconds() - cpu
                let span = Double(max(peer.lastNanoseconds, start + 1) - start) / 1e9
                guard run > 0 else { continue }
                let result = BenchResult(
                    transport: Self.compressedScreen,
                    format: variant.name,
                    width: width,
                    height: height,
                    rateHz: rate,
                    sentFrames: frames,
                    seconds: span,
                    peer: peer,
                    publisherCPUNanoseconds: parentCPU
                )
                say(result.line + "  (\(peer.frames) of \(frames) delivered)")
                results.append(result)
            }
            try request(channel, "unsubscribe", expect: "ok")
            publisher.stop()
        }
        return results
    }
}
