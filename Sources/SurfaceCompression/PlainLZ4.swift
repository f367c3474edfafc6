/// Plain LZ4 (liblz4's block format, default level) over whole byte arrays: the baseline the codec's
/// benchmarks compare against, measured on the same planes in the same run.
public enum PlainLZ4 {
    /// The worst-case compressed size of `count` bytes (LZ4_compressBound).
    public static func bound(_ count: Int) -> Int { LZ4Block.bound(count) }

    /// Compresses `source` into `destination` (at least ``bound(_:)`` bytes); returns the compressed size.
    ///
    /// - Throws: ``CompressionError/Code-swift.struct/destinationTooSmall`` if it does not fit.
    public static func compress(_ source: [UInt8], into destination: inout [UInt8]) throws(CompressionError) -> Int {
        let written = LZ4Block.compress(source, into: &destination)
        guard written > 0 || source.isEmpty else { throw CompressionError(.destinationTooSmall, "PlainLZ4.compress") }
        return written
    }

    /// Decompresses the first `count` bytes of `source` into `destination`, which must be exactly the
    /// original size.
    ///
    /// - Throws: ``CompressionError/Code-swift.struct/corruptPayload`` unless the input decodes to exactly
    ///   `destination.count` bytes.
    public static func decompress(
        _ source: [UInt8],
        count: Int,
        into destination: inout [UInt8]
    ) throws(CompressionError) {
        guard count >= 0, count <= source.count else { throw CompressionError(.invalidArgument, "PlainLZ4.decompress") }
        let read = LZ4Block.decompress(source, count: count, into: &destination)
        guard read == destination.count else { throw CompressionError(.corruptPayload, "PlainLZ4.decompress") }
    }
}
