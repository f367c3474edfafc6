import SurfaceCompression
import TestSupport
import Testing

@Suite(.heavyWork, .timeLimit(.minutes(5))) struct PlainLZ4Tests {
    @Test func plainLZ4RoundTripsAndRejectsDamagedInput() throws {
        let source = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 / 7) }
        var compressed = [UInt8](repeating: 0, count: PlainLZ4.bound(source.count))
        let count = try PlainLZ4.compress(source, into: &compressed)
        #expect(count > 0 && count < source.count / 4)
        var output = [UInt8](repeating: 0, count: source.count)
        try PlainLZ4.decompress(compressed, count: count, into: &output)
        #expect(output == source)
        var short = [UInt8](repeating: 0, count: source.count - 1)
        #expect(throws: CompressionError(code: .corruptPayload, operation: "PlainLZ4.decompress")) {
            try PlainLZ4.decompress(compressed, count: count, into: &short)
        }
        #expect(throws: CompressionError(code: .invalidArgument, operation: "PlainLZ4.decompress")) {
            try PlainLZ4.decompress(compressed, count: compressed.count + 1, into: &output)
        }
        var tiny = [UInt8](repeating: 0, count: 4)
        #expect(throws: CompressionError(code: .destinationTooSmall, operation: "PlainLZ4.compress")) {
            try PlainLZ4.compress(source, into: &tiny)
        }
    }
}
