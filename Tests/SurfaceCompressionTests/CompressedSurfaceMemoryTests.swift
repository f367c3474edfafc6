import Glibc
import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// A compressed surface is sized for the worst case but must occupy only the pages the codec writes.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct CompressedSurfaceMemoryTests {
    /// Bytes of a buffer's mapping that are resident (`mincore(2)`, whole pages).
    static func residentByteCount(_ buffer: PixelBuffer) throws -> Int {
        try buffer.lock([.readOnly])
        defer { try? buffer.unlock([.readOnly]) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        return buffer.surface.withUnsafeBytes { bytes in
            let pages = (bytes.count + page - 1) / page
            var vector = [UInt8](repeating: 0, count: pages)
            let status = mincore(UnsafeMutableRawPointer(mutating: bytes.baseAddress!), bytes.count, &vector)
            precondition(status == 0, "mincore failed")
            return vector.reduce(0) { $0 + Int($1 & 1) } * page
        }
    }

    @Test(arguments: [1, 2, 4])
    func aCompressedSurfaceCommitsOnlyThePagesItUses(threads: Int) throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let width = 1280
        let height = 720
        let source = try makeBuffer(
            syntheticBytes(format, width: width, height: height, seed: 4, noise: 4),
            width: width,
            height: height,
            format: format
        )
        let pool = try SurfaceCodec.makeCompressedPool(width: width, height: height, format: format)
        let compressed = try pool.makePixelBuffer()
        // Not pre-populated: nothing is resident before the first encode (the old pool touched every page).
        #expect(try Self.residentByteCount(compressed) == 0)
        let statistics = try SurfaceCodec.compress(source, into: compressed, options: .split(threads))
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let used = statistics.compressedByteCount
        #expect(used < compressed.surface.allocationSize * 3 / 4)
        // Only the pages up to bytes used, even when several threads encode (they stage privately).
        #expect(try Self.residentByteCount(compressed) <= (used + page - 1) / page * page)
        let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
        try SurfaceCodec.decompress(compressed, into: output)
        #expect(try packed(output) == (try packed(source)))
    }
}
