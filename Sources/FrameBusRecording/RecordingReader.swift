import Foundation
import FrameBus
import Surfaces

/// One frame read from a recording.
public struct RecordedFrame: Sendable {
    /// The frame's bytes as recorded: raw rows packed plane after plane, or the compressed surface's bytes used.
    public var bytes: [UInt8]
    /// The Matroska timestamp, in milliseconds from the first frame.
    public var timestampMilliseconds: UInt64
    /// The bus sequence number, when the recorder stored it.
    public var sequence: UInt64?
    /// The exact presentation time the publisher gave (invalid when not stored).
    public var presentationTime: MediaTime = .invalid
    /// The frame's duration as published (invalid when not stored).
    public var duration: MediaTime = .invalid
    /// Whether the frame follows a discontinuity (frames lost or a restart before it).
    public var isDiscontinuity = false
    /// Frames that did not reach the disk between the previous frame and this one.
    public var drops: [RecordingDrop] = []
}

/// Reads a recording (a Matroska file that `framebus record` wrote, or any Matroska file with one
/// `V_UNCOMPRESSED` or `V_FRAMEBUS` video track of a FrameBus format), frame by frame.
///
/// The file is untrusted: every id, size and count is checked against its parent, the file's size and the track's
/// frame size before it bounds anything, so a damaged or hostile file gives a ``RecordingError`` and never a trap or
/// an allocation larger than one frame of the track. A file cut short (a recorder killed before it closed the file)
/// reads up to its last whole frame, then ``nextFrame()`` throws ``RecordingError/Code-swift.struct/truncated``.
public final class RecordingReader {
    /// The video track.
    public let track: RecordingTrack
    /// Whether the recording was closed (its SeekHead, written at close, is there; otherwise it was cut short: a
    /// crash).
    public let isClosed: Bool
    /// The drop log from the file's tags (a closed recording), once ``nextFrame()`` has reached them.
    public private(set) var closingDropLog: [RecordingDrop]?

    private let handle: FileHandle
    private let fileSize: UInt64
    private let segmentEnd: UInt64
    private var position: UInt64
    private var clusterTimestamp: UInt64 = 0
    private var timestampScale: UInt64 = 1_000_000
    private var finished = false
    /// Where a raw plane is read when the destination's rows are padded (see ``nextFrame(into:)``); reused.
    private var scratch: [UInt8] = []

    /// The most bytes a header element (EBML header, Info, Tracks, Tags) may have.
    static let maximumHeaderElement: UInt64 = 1 << 20

    /// Opens a recording and reads its header and track.
    ///
    /// - Throws: ``RecordingError/Code-swift.struct/systemCall`` if the file cannot be opened;
    ///   ``RecordingError/Code-swift.struct/notARecording``, ``RecordingError/Code-swift.struct/malformed``,
    ///   ``RecordingError/Code-swift.struct/truncated`` (no track before the end),
    ///   ``RecordingError/Code-swift.struct/unsupported``.
    public init(path: String) throws(RecordingError) {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw RecordingError(.systemCall, "RecordingReader(\(path))", message: "cannot open")
        }
        self.handle = handle
        do {
            fileSize = try handle.seekToEnd()
        } catch {
            throw RecordingError(.systemCall, "RecordingReader(\(path))", message: "\(error)")
        }
        let cursor = Cursor(handle: handle, fileSize: fileSize)
        let op = "RecordingReader.open"
        // EBML header.
        let header = try cursor.elementHeader(at: 0, parentEnd: fileSize, op)
        guard header.id == EBML.header, let headerSize = header.size, headerSize <= Self.maximumHeaderElement else {
            throw RecordingError(.notARecording, op, message: "no EBML header")
        }
        let headerBody = try cursor.bytes(at: header.dataStart, count: headerSize, op)
        let children = try EBMLParse.children(headerBody, op)
        guard
            let docType = children.first(where: { $0.id == EBML.docType }).map({
                String(decoding: $0.value, as: UTF8.self)
            }),
            docType == "matroska" || docType == "webm"
        else {
            throw RecordingError(.notARecording, op, message: "DocType is not matroska")
        }
        // Segment.
        let segment = try cursor.elementHeader(at: header.dataStart + headerSize, parentEnd: fileSize, op)
        guard segment.id == EBML.segment else {
            throw RecordingError(.malformed, op, message: "no Segment after the EBML header")
        }
        let size = fileSize
        segmentEnd =
            segment.size.map {
                min($0.addingReportingOverflow(segment.dataStart).overflow ? .max : $0 + segment.dataStart, size)
            } ?? size
        var offset = segment.dataStart
        var found: RecordingTrack?
        var hasSeekHead = false
        // Level 1 up to the first Cluster.
        while offset < segmentEnd {
            let element = try cursor.elementHeader(at: offset, parentEnd: segmentEnd, op)
            if element.id == EBML.cluster { break }
            guard let size = element.size else {
                throw RecordingError(
                    .malformed,
                    op,
                    message: "element \(String(element.id, radix: 16)) of unknown size at \(offset)"
                )
            }
            let end = element.dataStart + size
            guard end <= segmentEnd else {
                throw RecordingError(.truncated, op, message: "header element past the end at \(offset)")
            }
            switch element.id {
            case EBML.seekHead:
                hasSeekHead = true
            case EBML.info:
                guard size <= Self.maximumHeaderElement else {
                    throw RecordingError(.malformed, op, message: "Info too large")
                }
                let info = try EBMLParse.children(try cursor.bytes(at: element.dataStart, count: size, op), op)
                if let scale = info.first(where: { $0.id == EBML.timestampScale }) {
                    let value = try EBMLParse.unsigned(scale.value, op)
                    guard (1...1_000_000_000).contains(value) else {
                        throw RecordingError(.malformed, op, message: "TimestampScale \(value)")
                    }
                    timestampScale = value
                }
            case EBML.tracks:
                guard size <= Self.maximumHeaderElement else {
                    throw RecordingError(.malformed, op, message: "Tracks too large")
                }
                guard found == nil else {
                    throw RecordingError(.unsupported, op, message: "more than one Tracks element")
                }
                found = try Self.parseTracks(try cursor.bytes(at: element.dataStart, count: size, op), op)
            default:
                break
            }
            offset = end
        }
        guard let track = found else {
            throw RecordingError(
                offset >= segmentEnd ? .truncated : .malformed,
                op,
                message: "no video track before the frames"
            )
        }
        self.track = track
        isClosed = hasSeekHead
        position = offset
    }

    private static func parseTracks(_ bytes: [UInt8], _ op: String) throws(RecordingError) -> RecordingTrack {
        var result: RecordingTrack?
        for entry in try EBMLParse.children(bytes, op) where entry.id == EBML.trackEntry {
            let fields = try EBMLParse.children(entry.value, op)
            func field(_ id: UInt32) -> [UInt8]? { fields.first(where: { $0.id == id })?.value }
            guard let type = field(EBML.trackType), try EBMLParse.unsigned(type, op) == 1 else { continue }
            guard result == nil else { throw RecordingError(.unsupported, op, message: "more than one video track") }
            if let number = field(EBML.trackNumber), try EBMLParse.unsigned(number, op) != 1 {
                throw RecordingError(.unsupported, op, message: "the video track is not track 1")
            }
            if let lacing = field(EBML.flagLacing), try EBMLParse.unsigned(lacing, op) != 0 {
                throw RecordingError(.unsupported, op, message: "laced frames")
            }
            let codec = field(EBML.codecID).map { String(decoding: $0, as: UTF8.self) } ?? ""
            guard let videoBytes = field(EBML.video) else {
                throw RecordingError(.malformed, op, message: "no Video element")
            }
            let video = try EBMLParse.children(videoBytes, op)
            func videoField(_ id: UInt32) -> [UInt8]? { video.first(where: { $0.id == id })?.value }
            guard let widthBytes = videoField(EBML.pixelWidth), let heightBytes = videoField(EBML.pixelHeight) else {
                throw RecordingError(.malformed, op, message: "no pixel size")
            }
            let width = try EBMLParse.unsigned(widthBytes, op)
            let height = try EBMLParse.unsigned(heightBytes, op)
            guard width <= UInt64(PixelFormat.maximumDimension), height <= UInt64(PixelFormat.maximumDimension) else {
                throw RecordingError(.unsupported, op, message: "size \(width)x\(height)")
            }
            var range: UInt64 = 0
            if let colour = videoField(EBML.colour),
                let rangeBytes = try EBMLParse.children(colour, op).first(where: { $0.id == EBML.range })?.value
            {
                range = try EBMLParse.unsigned(rangeBytes, op)
            }
            let format: PixelFormat
            switch codec {
            case RecordingTrack.rawCodecID:
                let fourCC = videoField(EBML.colourSpace).map { String(decoding: $0, as: UTF8.self) } ?? ""
                switch (fourCC, range) {
                case ("NV12", 2): format = .yuv420BiPlanarFullRange8
                case ("NV12", _): format = .yuv420BiPlanarVideoRange8
                case ("P010", 2): format = .yuv420BiPlanarFullRange10
                case ("P010", _): format = .yuv420BiPlanarVideoRange10
                case ("BGRA", _): format = .bgra8
                default: throw RecordingError(.unsupported, op, message: "raw video of ColourSpace '\(fourCC)'")
                }
            case RecordingTrack.compressedCodecID:
                guard let name = field(EBML.codecPrivate).map({ String(decoding: $0, as: UTF8.self) }),
                    let compressed = try? PixelFormat(name), compressed.isCompressed
                else {
                    throw RecordingError(
                        .malformed,
                        op,
                        message: "V_FRAMEBUS without a compressed format in CodecPrivate"
                    )
                }
                format = compressed
            default:
                throw RecordingError(.unsupported, op, message: "codec '\(codec)'")
            }
            let track = RecordingTrack(pixelFormat: format, width: Int(width), height: Int(height))
            guard track.isValidGeometry else {
                throw RecordingError(.malformed, op, message: "size \(width)x\(height) for \(format)")
            }
            result = track
        }
        guard let result else { throw RecordingError(.unsupported, op, message: "no video track") }
        return result
    }

    /// The next frame, or nil at the end of the recording.
    ///
    /// - Throws: ``RecordingError/Code-swift.struct/truncated`` when the file ends inside an element (the frames
    ///   before were all returned); ``RecordingError/Code-swift.struct/malformed`` for a damaged structure or a
    ///   frame whose size is not the track's.
    public func nextFrame() throws(RecordingError) -> RecordedFrame? {
        try next(into: nil, "RecordingReader.nextFrame")
    }

    /// The next frame, its bytes read from the file straight into `buffer` (raw rows into its planes, compressed
    /// bytes into its surface: no array in between, one copy from the page cache), or nil at the end of the
    /// recording. The returned frame's ``RecordedFrame/bytes`` is empty; everything else is as ``nextFrame()``
    /// gives it. `buffer` must be of the track's format and size (for a compressed track, a buffer from
    /// ``SurfaceCodec/makeCompressedPool(width:height:format:tileSize:minimumBufferCount:allocationThreshold:)``).
    ///
    /// - Throws: as ``nextFrame()``; ``RecordingError/Code-swift.struct/invalidArgument`` if the buffer does not
    ///   fit the track (checked before anything is read).
    public func nextFrame(into buffer: PixelBuffer) throws(RecordingError) -> RecordedFrame? {
        let op = "RecordingReader.nextFrame(into:)"
        guard buffer.pixelFormat == track.pixelFormat, buffer.width == track.width, buffer.height == track.height,
            FrameFill.fits(buffer, track: track)
        else {
            throw RecordingError(
                .invalidArgument,
                op,
                message:
                    "a \(buffer.width)x\(buffer.height) \(buffer.pixelFormat) buffer for a \(track.width)x\(track.height) \(track.pixelFormat) track"
            )
        }
        return try next(into: buffer, op)
    }

    private func next(into destination: PixelBuffer?, _ op: String) throws(RecordingError) -> RecordedFrame? {
        let cursor = Cursor(handle: handle, fileSize: fileSize)
        while !finished, position < segmentEnd {
            let element: Cursor.Header
            do {
                element = try cursor.elementHeader(at: position, parentEnd: segmentEnd, op)
            } catch {
                finished = true
                throw error
            }
            switch element.id {
            case EBML.cluster:
                // Clusters of known size are read as their children too: frames come in order either way.
                position = element.dataStart
                continue
            case EBML.timestamp, EBML.blockGroup, EBML.simpleBlock, EBML.void, EBML.crc32, EBML.cues, EBML.tags,
                EBML.seekHead, EBML.info, EBML.tracks:
                break
            default:
                // Unknown elements are skipped (Matroska's rule), when their size is known.
                break
            }
            guard let size = element.size else {
                finished = true
                throw RecordingError(
                    .malformed,
                    op,
                    message: "element \(String(element.id, radix: 16)) of unknown size at \(position)"
                )
            }
            let (end, overflow) = element.dataStart.addingReportingOverflow(size)
            guard !overflow, end <= segmentEnd else {
                finished = true
                let cut = end > fileSize || overflow
                throw RecordingError(
                    cut ? .truncated : .malformed,
                    op,
                    message: "element at \(position) ends past the \(cut ? "file" : "segment")"
                )
            }
            let start = position
            position = end
            switch element.id {
            case EBML.timestamp:
                guard size <= 8 else { throw RecordingError(.malformed, op, message: "Timestamp at \(start)") }
                clusterTimestamp = try EBMLParse.unsigned(try cursor.bytes(at: element.dataStart, count: size, op), op)
            case EBML.simpleBlock:
                if let frame = try readBlock(
                    cursor,
                    at: element.dataStart,
                    size: size,
                    record: nil,
                    into: destination,
                    op
                ) {
                    return frame
                }
            case EBML.blockGroup:
                if let frame = try readBlockGroup(cursor, at: element.dataStart, size: size, into: destination, op) {
                    return frame
                }
            case EBML.tags:
                if size <= Self.maximumHeaderElement {
                    closingDropLog = try? Self.parseDropLog(
                        try cursor.bytes(at: element.dataStart, count: size, op),
                        op
                    )
                }
            default:
                break
            }
        }
        finished = true
        return nil
    }

    private func readBlockGroup(
        _ cursor: Cursor,
        at start: UInt64,
        size: UInt64,
        into destination: PixelBuffer?,
        _ op: String
    ) throws(RecordingError) -> RecordedFrame? {
        var offset = start
        let end = start + size
        var block: (start: UInt64, size: UInt64)?
        var record: FrameRecord?
        while offset < end {
            let child = try cursor.elementHeader(at: offset, parentEnd: end, op)
            guard let childSize = child.size, child.dataStart + childSize <= end else {
                throw RecordingError(.malformed, op, message: "BlockGroup child at \(offset)")
            }
            if child.id == EBML.block {
                block = (child.dataStart, childSize)
            } else if child.id == EBML.blockAdditions, childSize <= 1 << 16 {
                let additions = try EBMLParse.children(try cursor.bytes(at: child.dataStart, count: childSize, op), op)
                for more in additions where more.id == EBML.blockMore {
                    let fields = try EBMLParse.children(more.value, op)
                    let id =
                        try fields.first(where: { $0.id == EBML.blockAddID }).map { (f) throws(RecordingError) in
                            try EBMLParse.unsigned(f.value, op)
                        } ?? 1
                    if id == FrameRecord.blockAddID, let data = fields.first(where: { $0.id == EBML.blockAdditional }) {
                        guard let decoded = FrameRecord.decode(data.value[...]) else {
                            throw RecordingError(.malformed, op, message: "frame record at \(child.dataStart)")
                        }
                        record = decoded
                    }
                }
            }
            offset = child.dataStart + childSize
        }
        guard let block else { throw RecordingError(.malformed, op, message: "BlockGroup without a Block at \(start)") }
        return try readBlock(cursor, at: block.start, size: block.size, record: record, into: destination, op)
    }

    private func readBlock(
        _ cursor: Cursor,
        at start: UInt64,
        size: UInt64,
        record: FrameRecord?,
        into destination: PixelBuffer?,
        _ op: String
    ) throws(RecordingError) -> RecordedFrame? {
        guard size >= 4 else { throw RecordingError(.malformed, op, message: "block at \(start) of \(size) bytes") }
        let head = try cursor.bytes(at: start, count: 4, op)
        // Track number: a one-byte vint (tracks 1…126); our files have only track 1.
        guard head[0] & 0x80 != 0 else {
            throw RecordingError(.unsupported, op, message: "track number of more than one byte at \(start)")
        }
        guard head[0] & 0x7F == 1 else { return nil }
        guard head[3] & 0x06 == 0 else { throw RecordingError(.unsupported, op, message: "laced block at \(start)") }
        let relative = Int16(bitPattern: UInt16(head[1]) << 8 | UInt16(head[2]))
        let payload = size - 4
        let maximum = UInt64(track.maximumFrameByteCount)
        if track.pixelFormat.isCompressed {
            guard payload > 0, payload <= maximum else {
                throw RecordingError(
                    .malformed,
                    op,
                    message: "compressed frame of \(payload) bytes at \(start) (at most \(maximum))"
                )
            }
        } else {
            guard payload == maximum else {
                throw RecordingError(
                    .malformed,
                    op,
                    message: "raw frame of \(payload) bytes at \(start) (\(maximum) expected)"
                )
            }
        }
        let bytes: [UInt8]
        if let destination {
            try fill(destination, from: cursor, at: start + 4, count: payload, op)
            bytes = []
        } else {
            bytes = try cursor.bytes(at: start + 4, count: payload, op)
        }
        let signed = Int64(clusterTimestamp) + Int64(relative)
        var frame = RecordedFrame(bytes: bytes, timestampMilliseconds: UInt64(max(0, signed)))
        if let record {
            frame.sequence = record.sequence
            frame.presentationTime = record.presentationTime
            frame.duration = record.duration
            frame.isDiscontinuity = record.isDiscontinuity
            frame.drops = record.drops
        }
        return frame
    }

    /// Reads a frame's `count` bytes at `offset` into `buffer` (checked to fit the track by the caller): compressed
    /// bytes to the start of its surface; raw planes with one read each where the buffer's rows are packed, else
    /// through the reader's one scratch buffer, row by row (a frame's worth, allocated once).
    private func fill(
        _ buffer: PixelBuffer,
        from cursor: Cursor,
        at offset: UInt64,
        count: UInt64,
        _ op: String
    ) throws(RecordingError) {
        let (end, overflow) = offset.addingReportingOverflow(count)
        guard !overflow, end <= fileSize else {
            throw RecordingError(.truncated, op, message: "\(count) bytes at \(offset) run past the end (\(fileSize))")
        }
        // `count` is at most the track's frame size (checked by readBlock), and `end <= fileSize`.
        let total = Int(count)
        var failure: RecordingError?
        if track.pixelFormat.isCompressed {
            do {
                try buffer.surface.lock()
                defer { try? buffer.surface.unlock() }
                guard total <= buffer.surface.allocationSize else {
                    throw RecordingError(
                        .invalidArgument,
                        op,
                        message: "a frame of \(total) bytes for a smaller surface"
                    )
                }
                unsafe buffer.surface.withUnsafeMutableBytes { surface in
                    failure = unsafe cursor.read(
                        into: UnsafeMutableRawBufferPointer(rebasing: surface[0..<total]),
                        at: offset,
                        op
                    )
                }
            } catch let error as RecordingError {
                throw error
            } catch {
                throw RecordingError(.systemCall, op, message: "locking the surface: \(error)")
            }
            if let failure { throw failure }
            return
        }
        do {
            try buffer.lock()
            defer { try? buffer.unlock() }
            var position = offset
            for (index, plane) in track.rawPlanes.enumerated() {
                let stride = buffer.bytesPerRow(ofPlane: index)
                try unsafe buffer.withUnsafeMutableBytes(ofPlane: index) { destination in
                    if stride == plane.rowBytes {
                        failure = unsafe cursor.read(
                            into: UnsafeMutableRawBufferPointer(
                                rebasing: destination[0..<(plane.rowBytes * plane.rows)]
                            ),
                            at: position,
                            op
                        )
                        return
                    }
                    let planeBytes = plane.rowBytes * plane.rows
                    if scratch.count < planeBytes { scratch = [UInt8](repeating: 0, count: planeBytes) }
                    unsafe scratch.withUnsafeMutableBytes { scratchBytes in
                        failure = unsafe cursor.read(
                            into: UnsafeMutableRawBufferPointer(rebasing: scratchBytes[0..<planeBytes]),
                            at: position,
                            op
                        )
                        guard failure == nil else { return }
                        for row in 0..<plane.rows {
                            unsafe (destination.baseAddress! + row * stride).copyMemory(
                                from: scratchBytes.baseAddress! + row * plane.rowBytes,
                                byteCount: plane.rowBytes
                            )
                        }
                    }
                }
                if failure != nil { break }
                position += UInt64(plane.rowBytes * plane.rows)
            }
        } catch {
            throw RecordingError(.systemCall, op, message: "locking the buffer: \(error)")
        }
        if let failure { throw failure }
    }

    private static func parseDropLog(_ bytes: [UInt8], _ op: String) throws(RecordingError) -> [RecordingDrop]? {
        for tag in try EBMLParse.children(bytes, op) where tag.id == EBML.tag {
            for simple in try EBMLParse.children(tag.value, op) where simple.id == EBML.simpleTag {
                let fields = try EBMLParse.children(simple.value, op)
                guard
                    fields.first(where: { $0.id == EBML.tagName }).map({ String(decoding: $0.value, as: UTF8.self) })
                        == "FRAMEBUS_DROPS",
                    let text = fields.first(where: { $0.id == EBML.tagString }).map({
                        String(decoding: $0.value, as: UTF8.self)
                    })
                else { continue }
                var drops: [RecordingDrop] = []
                for line in text.split(separator: "\n") {
                    let parts = line.split(separator: " ")
                    guard parts.count == 4,
                        let reason = RecordingDropReason.allCases.first(where: { "\($0)" == parts[0] }),
                        let first = UInt64(parts[1]), let last = UInt64(parts[2]), first <= last,
                        let count = UInt64(parts[3])
                    else { continue }
                    drops.append(RecordingDrop(reason: reason, sequences: first...last, frameCount: count))
                }
                return drops
            }
        }
        return nil
    }
}

/// Reads element headers and bytes of an untrusted file, bounded by the file's size.
struct Cursor {
    struct Header {
        var id: UInt32
        /// Nil for "unknown size".
        var size: UInt64?
        var dataStart: UInt64
    }

    let handle: FileHandle
    let fileSize: UInt64

    func bytes(at offset: UInt64, count: UInt64, _ op: String) throws(RecordingError) -> [UInt8] {
        let (end, overflow) = offset.addingReportingOverflow(count)
        guard !overflow, end <= fileSize else {
            throw RecordingError(.truncated, op, message: "\(count) bytes at \(offset) run past the end (\(fileSize))")
        }
        guard count > 0 else { return [] }
        // `end <= fileSize`, and a file's size fits an off_t: both conversions are exact. One pread into the array
        // (a frame of a 4K recording is megabytes: FileHandle's Data and a copy out of it cost a third of `play`).
        switch Syscall.readAll(handle.fileDescriptor, count: Int(count), at: Int64(offset)) {
        case .success(let bytes?): return bytes
        case .success(nil): throw RecordingError(.truncated, op, message: "short read at \(offset)")
        case .failure(let error): throw RecordingError(.systemCall, op, message: "read at \(offset): \(error)")
        }
    }

    /// Reads exactly `destination.count` bytes at `offset` (checked against the file's size by the caller) into
    /// `destination`; nil, or the error (a short read is ``RecordingError/Code-swift.struct/truncated``).
    func read(into destination: UnsafeMutableRawBufferPointer, at offset: UInt64, _ op: String) -> RecordingError? {
        switch unsafe Syscall.readAll(handle.fileDescriptor, into: destination, at: Int64(offset)) {
        case .success(true): nil
        case .success(false): RecordingError(.truncated, op, message: "short read at \(offset)")
        case .failure(let error): RecordingError(.systemCall, op, message: "read at \(offset): \(error)")
        }
    }

    /// The id and size of the element at `offset`, which must lie before `parentEnd`.
    func elementHeader(at offset: UInt64, parentEnd: UInt64, _ op: String) throws(RecordingError) -> Header {
        let available = min(12, min(parentEnd, fileSize) &- offset)
        guard offset < parentEnd, available > 0 else {
            throw RecordingError(.truncated, op, message: "no element header at \(offset)")
        }
        let head = try bytes(at: offset, count: available, op)
        guard let (id, idLength) = EBMLParse.id(head[...]) else {
            throw RecordingError(head.count < 4 ? .truncated : .malformed, op, message: "bad element id at \(offset)")
        }
        guard let (size, sizeLength) = EBMLParse.size(head[idLength...]) else {
            throw RecordingError(
                head.count < 12 ? .truncated : .malformed,
                op,
                message: "bad element size at \(offset)"
            )
        }
        return Header(id: id, size: size, dataStart: offset + UInt64(idLength + sizeLength))
    }
}

/// EBML decoding of bytes already in memory (bounded by their count).
enum EBMLParse {
    struct Element {
        var id: UInt32
        var value: [UInt8]
    }

    /// An element id (1…4 bytes, marker kept) and its length; nil if malformed or cut.
    static func id(_ bytes: ArraySlice<UInt8>) -> (UInt32, Int)? {
        guard let first = bytes.first, first != 0 else { return nil }
        let length = first.leadingZeroBitCount + 1
        guard length <= 4, bytes.count >= length else { return nil }
        var value: UInt32 = 0
        for byte in bytes.prefix(length) { value = value << 8 | UInt32(byte) }
        return (value, length)
    }

    /// An element size (1…8 bytes) and its length; the size is nil when it is "unknown" (all value bits set).
    static func size(_ bytes: ArraySlice<UInt8>) -> (UInt64?, Int)? {
        guard let first = bytes.first, first != 0 else { return nil }
        let length = first.leadingZeroBitCount + 1
        guard bytes.count >= length else { return nil }
        var value = UInt64(first & (0xFF >> UInt8(length)))
        for byte in bytes.dropFirst().prefix(length - 1) { value = value << 8 | UInt64(byte) }
        let allOnes = (UInt64(1) << (7 * UInt64(length))) - 1
        return (value == allOnes ? nil : value, length)
    }

    /// The children of a master element's data; each must have a known size inside it.
    static func children(_ bytes: [UInt8], _ op: String) throws(RecordingError) -> [Element] {
        var result: [Element] = []
        var offset = 0
        while offset < bytes.count {
            guard let (id, idLength) = Self.id(bytes[offset...]),
                let (size, sizeLength) = Self.size(bytes[(offset + idLength)...]),
                let size, size <= UInt64(bytes.count - offset - idLength - sizeLength)
            else {
                throw RecordingError(.malformed, op, message: "bad child element at \(offset) of \(bytes.count)")
            }
            let start = offset + idLength + sizeLength
            result.append(Element(id: id, value: Array(bytes[start..<(start + Int(size))])))
            offset = start + Int(size)
        }
        return result
    }

    static func unsigned(_ bytes: [UInt8], _ op: String) throws(RecordingError) -> UInt64 {
        guard bytes.count <= 8 else {
            throw RecordingError(.malformed, op, message: "an unsigned integer of \(bytes.count) bytes")
        }
        return bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }
}

extension RecordedFrame {
    /// Copies the frame into `buffer`, which must be of `track`'s format and size: raw rows into its planes, or
    /// compressed bytes into its surface (made with ``SurfaceCodec/makeCompressedPool(width:height:format:tileSize:minimumBufferCount:allocationThreshold:)``).
    ///
    /// - Throws: ``RecordingError/Code-swift.struct/invalidArgument`` if the buffer does not fit the frame.
    public func copy(into buffer: PixelBuffer, track: RecordingTrack) throws(RecordingError) {
        guard FrameFill.fill(buffer, with: bytes, track: track) else {
            throw RecordingError(
                .invalidArgument,
                "RecordedFrame.copy(into:)",
                message:
                    "a \(buffer.width)x\(buffer.height) \(buffer.pixelFormat) buffer for a \(track.width)x\(track.height) \(track.pixelFormat) frame"
            )
        }
    }
}
