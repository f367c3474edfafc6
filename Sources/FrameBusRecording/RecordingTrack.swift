import FrameBus

/// What a recording holds: one video track of one FrameBus format and size.
public struct RecordingTrack: Hashable, Sendable {
    /// The frames' format: a base format (stored as Matroska `V_UNCOMPRESSED`) or a compressed one (stored as
    /// ``compressedCodecID``, the compressed layout as is).
    public var pixelFormat: PixelFormat
    /// Width in pixels.
    public var width: Int
    /// Height in pixels.
    public var height: Int

    /// The Matroska codec id of compressed recordings: each block is one frame's compressed surface, its bytes used
    /// (docs/COMPRESSED-LAYOUT.md); CodecPrivate holds the compressed format's FourCC.
    public static let compressedCodecID = "V_FRAMEBUS"
    /// The Matroska codec id of raw recordings.
    public static let rawCodecID = "V_UNCOMPRESSED"

    /// Creates a track description.
    public init(pixelFormat: PixelFormat, width: Int, height: Int) {
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
    }

    /// The FourCC that `V_UNCOMPRESSED`'s ColourSpace carries for a base format, as ffmpeg's raw video tags name it:
    /// NV12 for 8-bit 4:2:0, P010 for 10-bit 4:2:0, BGRA for BGRA. Nil for a compressed format.
    public var rawFourCC: String? {
        switch pixelFormat {
        case .yuv420BiPlanarVideoRange8, .yuv420BiPlanarFullRange8: "NV12"
        case .yuv420BiPlanarVideoRange10, .yuv420BiPlanarFullRange10: "P010"
        case .bgra8: "BGRA"
        default: nil
        }
    }

    /// The planes of a raw frame as stored: rows packed tightly (no padding), plane after plane. Each plane's
    /// (row bytes, rows).
    var rawPlanes: [(rowBytes: Int, rows: Int)] {
        switch pixelFormat.base {
        case .bgra8: [(width * 4, height)]
        case .yuv420BiPlanarVideoRange10, .yuv420BiPlanarFullRange10: [(width * 2, height), (width * 2, height / 2)]
        default: [(width, height), (width, height / 2)]
        }
    }

    /// The bytes of one raw frame; for a compressed track, the most a frame may take.
    var maximumFrameByteCount: Int {
        if pixelFormat.isCompressed {
            return (try? SurfaceCodec.maximumCompressedByteCount(width: width, height: height, format: pixelFormat))
                ?? 0
        }
        return rawPlanes.reduce(0) { $0 + $1.rowBytes * $1.rows }
    }

    /// Whether the geometry is one FrameBus can hold (1…16384 per side, even for 4:2:0).
    var isValidGeometry: Bool {
        guard (1...PixelFormat.maximumDimension).contains(width), (1...PixelFormat.maximumDimension).contains(height)
        else { return false }
        return pixelFormat.base == .bgra8 || (width % 2 == 0 && height % 2 == 0)
    }
}

/// What the recorder stores beside each frame (the BlockAdditional with BlockAddID 2 of the frame's BlockGroup):
/// the bus sequence number, the exact timing, the discontinuity flag, and the drops since the previous frame.
///
/// Layout (little-endian), version 1:
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 1 | version (1) |
/// | 1 | 1 | flags: bit 0 discontinuity |
/// | 2 | 2 | drop record count N (0…64) |
/// | 4 | 4 | reserved (0) |
/// | 8 | 8 | bus sequence number |
/// | 16 | 8 | presentation time value (MediaTime) |
/// | 24 | 4 | presentation time timescale |
/// | 28 | 4 | presentation time flags |
/// | 32 | 8 | duration value |
/// | 40 | 4 | duration timescale |
/// | 44 | 4 | duration flags |
/// | 48 | 32 × N | drop records: reason (1 byte, ``RecordingDropReason``), 7 reserved, first sequence, last sequence, frame count (8 bytes each) |
struct FrameRecord: Hashable, Sendable {
    static let version: UInt8 = 1
    static let headerByteCount = 48
    static let dropByteCount = 32
    static let maximumDrops = 64
    /// The BlockAddID the record uses (1 is reserved for codec-defined data).
    static let blockAddID: UInt64 = 2

    var sequence: UInt64
    var presentationTime: MediaTime
    var duration: MediaTime
    var isDiscontinuity: Bool
    var drops: [RecordingDrop]

    var byteCount: Int { Self.headerByteCount + Self.dropByteCount * drops.count }

    func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(byteCount)
        func put<T: FixedWidthInteger>(_ value: T) {
            for index in 0..<MemoryLayout<T>.size { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * index))) }
        }
        put(Self.version)
        put(UInt8(isDiscontinuity ? 1 : 0))
        put(UInt16(drops.count))
        put(UInt32(0))
        put(sequence)
        for time in [presentationTime, duration] {
            put(time.value)
            put(time.timescale)
            put(time.flags.rawValue)
        }
        for drop in drops {
            put(drop.reason.rawValue)
            bytes += [0, 0, 0, 0, 0, 0, 0]
            put(drop.sequences.lowerBound)
            put(drop.sequences.upperBound)
            put(drop.frameCount)
        }
        return bytes
    }

    /// Decodes a record from a file (hostile bytes): every field is checked, nothing traps.
    static func decode(_ bytes: ArraySlice<UInt8>) -> FrameRecord? {
        guard bytes.count >= headerByteCount, bytes[bytes.startIndex] == version else { return nil }
        func read<T: FixedWidthInteger>(_ offset: Int, as: T.Type) -> T {
            var value: T = 0
            for index in 0..<MemoryLayout<T>.size {
                value |= T(truncatingIfNeeded: bytes[bytes.startIndex + offset + index]) << (8 * index)
            }
            return value
        }
        let count = Int(read(2, as: UInt16.self))
        guard count <= maximumDrops, bytes.count == headerByteCount + dropByteCount * count else { return nil }
        func time(_ offset: Int) -> MediaTime {
            let value = read(offset, as: Int64.self)
            let timescale = read(offset + 8, as: Int32.self)
            // MediaTime's initializer checks the flags and the timescale: anything inconsistent is `.invalid`.
            return MediaTime(
                value: value,
                timescale: timescale,
                flags: .init(rawValue: read(offset + 12, as: UInt32.self))
            )
        }
        var drops: [RecordingDrop] = []
        for index in 0..<count {
            let offset = headerByteCount + dropByteCount * index
            guard let reason = RecordingDropReason(rawValue: read(offset, as: UInt8.self)) else { return nil }
            let first = read(offset + 8, as: UInt64.self)
            let last = read(offset + 16, as: UInt64.self)
            guard first <= last else { return nil }
            drops.append(
                RecordingDrop(reason: reason, sequences: first...last, frameCount: read(offset + 24, as: UInt64.self))
            )
        }
        return FrameRecord(
            sequence: read(8, as: UInt64.self),
            presentationTime: time(16),
            duration: time(32),
            isDiscontinuity: read(1, as: UInt8.self) & 1 != 0,
            drops: drops
        )
    }
}
