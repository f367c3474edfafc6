import Foundation
import FrameBus

/// Writes a recording's frames as a raw recording: compressed frames decoded (bit-exact), raw frames as they are,
/// each frame's record (sequence, timing, drops) kept. The result is what `framebus record` writes for raw frames,
/// which ffmpeg and GStreamer open.
public enum RecordingExport {
    /// What an export did.
    public struct Result: Sendable {
        /// Frames written.
        public var frames: Int
        /// Set when the source ended early (a recording that was not closed): everything before was exported.
        public var truncation: RecordingError?
    }

    /// Exports `source` to `destination` (created or truncated).
    ///
    /// - Throws: what ``RecordingReader`` throws for the source (except a truncated tail, which ends the export and
    ///   is reported in the result); ``RecordingError/Code-swift.struct/malformed`` for a compressed frame that does not
    ///   decode; ``RecordingError/Code-swift.struct/ioError`` or ``RecordingError/Code-swift.struct/diskFull`` for
    ///   the destination.
    public static func export(from source: String, to destination: String) throws(RecordingError) -> Result {
        let reader = try RecordingReader(path: source)
        let track = RecordingTrack(
            pixelFormat: reader.track.pixelFormat.base,
            width: reader.track.width,
            height: reader.track.height
        )
        guard FileManager.default.createFile(atPath: destination, contents: nil),
            let output = FileHandle(forWritingAtPath: destination)
        else {
            throw RecordingError(.ioError, "RecordingExport(\(destination))", message: "cannot create")
        }
        defer { try? output.close() }
        func write(_ bytes: [UInt8]) throws(RecordingError) {
            do { try output.write(contentsOf: bytes) } catch {
                throw RecordingError(.ioError, "RecordingExport.write", message: "\(error)")
            }
        }
        let op = "RecordingExport"
        var position = 0
        var cues: [(timestamp: UInt64, position: UInt64)] = []
        var clusterTimestamp: UInt64?
        var frames = 0
        var lastTimestamp: UInt64 = 0
        var drops: [RecordingDrop] = []
        let header = MatroskaLayout.headerBlock(track: track)
        try write(header)
        position += header.count
        let truncation = try forEachRawFrame(of: reader) { frame, bytes throws(RecordingError) in
            let timestamp = max(lastTimestamp, frame.timestampMilliseconds)
            if clusterTimestamp.map({ timestamp - $0 >= 1000 }) ?? true {
                cues.append((timestamp, UInt64(position - MatroskaLayout.segmentDataOffset)))
                let cluster = MatroskaLayout.clusterHeader(timestamp: timestamp)
                try write(cluster)
                position += cluster.count
                clusterTimestamp = timestamp
            }
            for drop in frame.drops { RecorderCore.State.merge(drop, into: &drops, limit: RecorderCore.maximumDropLog) }
            let record = FrameRecord(
                sequence: frame.sequence ?? UInt64(frames),
                presentationTime: frame.presentationTime,
                duration: frame.duration,
                isDiscontinuity: frame.isDiscontinuity,
                drops: frame.drops
            )
            let prefix = MatroskaLayout.framePrefix(
                record: record,
                relativeTimestamp: Int16(clamping: Int64(timestamp) - Int64(clusterTimestamp ?? timestamp)),
                payloadByteCount: bytes.count
            )
            try write(prefix)
            try write(bytes)
            position += prefix.count + bytes.count
            lastTimestamp = timestamp
            frames += 1
        }
        let padding = MatroskaLayout.padding(from: position)
        try write(padding)
        position += padding.count
        let trailer = MatroskaLayout.trailer(
            at: position,
            track: track,
            cues: cues,
            frames: UInt64(frames),
            drops: drops
        )
        try write(trailer.bytes)
        position += trailer.bytes.count
        let closing = MatroskaLayout.Closing(
            durationMilliseconds: Double(lastTimestamp),
            cuesPosition: trailer.cuesPosition,
            tagsPosition: trailer.tagsPosition
        )
        do {
            try output.seek(toOffset: 0)
        } catch {
            throw RecordingError(.ioError, op, message: "\(error)")
        }
        try write(MatroskaLayout.headerBlock(track: track, closing: closing))
        return Result(frames: frames, truncation: truncation)
    }

    /// Calls `body` with each frame of `reader` and its raw bytes (packed rows, plane after plane, in the track's
    /// base format): raw frames as recorded, compressed ones decoded (bit-exact). The bytes are valid during the
    /// call. Returns the error that ended a recording cut short (everything before was given), or nil at its end.
    ///
    /// - Throws: what ``RecordingReader`` throws (except a truncated tail), ``RecordingError/Code-swift.struct/malformed``
    ///   for a compressed frame that does not decode, and what `body` throws.
    public static func forEachRawFrame(
        of reader: RecordingReader,
        _ body: (RecordedFrame, [UInt8]) throws(RecordingError) -> Void
    ) throws(RecordingError) -> RecordingError? {
        let op = "RecordingExport"
        let track = reader.track
        var scratch: PixelBuffer?
        var compressed: PixelBuffer?
        let codec = SurfaceCodecContext(threadCount: 1)
        if track.pixelFormat.isCompressed {
            do {
                scratch = try PixelBuffer(width: track.width, height: track.height, pixelFormat: track.pixelFormat.base)
                compressed = try SurfaceCodec.makeCompressedBuffer(
                    width: track.width,
                    height: track.height,
                    format: track.pixelFormat
                )
            } catch {
                throw RecordingError(.invalidArgument, op, message: "\(error)")
            }
        }
        var frames = 0
        while true {
            let next: RecordedFrame?
            do {
                // A compressed frame is read straight into the surface it is decoded from.
                if let compressed {
                    next = try reader.nextFrame(into: compressed)
                } else {
                    next = try reader.nextFrame()
                }
            } catch  where error.code == .truncated {
                return error
            }
            guard let frame = next else { return nil }
            var bytes = frame.bytes
            if let compressed, let scratch {
                do {
                    try codec.decompress(compressed, into: scratch)
                    try scratch.lock(.readOnly)
                    defer { try? scratch.unlock(.readOnly) }
                    bytes = try scratch.packedBytes()
                } catch {
                    throw RecordingError(.malformed, op, message: "frame \(frames) does not decode: \(error)")
                }
            }
            try body(frame, bytes)
            frames += 1
        }
    }
}
