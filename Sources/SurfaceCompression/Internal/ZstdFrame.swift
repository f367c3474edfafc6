import CZstd

#if canImport(Glibc)
import Glibc
#endif

/// libzstd's one-shot API, the one place this module calls it: the payload of mode `zstd` (layout version 8,
/// docs/COMPRESSED-LAYOUT.md §6.9) is one zstd frame (RFC 8878) of the component's raw samples.
///
/// Both directions run in a worker's own contexts (``ZstdContexts``), kept by the workspace from frame to frame.
enum ZstdFrame {
    /// The compression level: 1 (zstd's fastest regular level) by default, or the level `FRAMEBUS_CODEC_ZSTD_LEVEL`
    /// gives (−7…3; 0 turns the zstd mode off, so the encoder writes what layout version 7 did: the bench's
    /// before/after in one binary), read once per process. The decoder does not know the level.
    static let level: Int = {
        if let value = unsafe getenv("FRAMEBUS_CODEC_ZSTD_LEVEL"), let level = Int(unsafe String(cString: value)) {
            return max(-7, min(level, 3))
        }
        return 1
    }()

    /// Whether the encoder writes zstd entries at all (``level`` is not 0).
    static var isEnabled: Bool { level != 0 }

    /// The level at effort best (``SurfaceCodec/Effort/best``): 7. Measured with `zstd -b1 -e9` on a 1080p
    /// screenshot (its PPM): level 1 gave 25.1:1 at about 1.5 GB/s, level 5 35.6:1 at 335 MB/s, level 7 39.3:1 at
    /// 311 MB/s, levels 8 and 9 no more at less speed; decoding is as fast or faster at 7. Frames whose content
    /// size is known declare a window of at most that size, within ``maximumWindowLog`` at any level.
    static let bestLevel = 7

    /// The largest window a payload's frame may declare: 2^23 bytes, the largest component (a 2^22-pixel tile of
    /// 16-bit samples). FrameBus's frames declare at most the level's window (512 KiB at level 1), or their content
    /// size when that is smaller (single-segment frames).
    static let maximumWindowLog = 23

    /// Compresses `count` bytes at `level` into one zstd frame of at most `capacity` bytes, with the content size in its
    /// header, no checksum and no dictionary, in `contexts`' compression context. Returns the frame's size, or 0 when
    /// it does not fit.
    static func compress(
        _ source: UnsafeRawPointer,
        count: Int,
        into destination: UnsafeMutableRawPointer,
        capacity: Int,
        level: Int,
        contexts: ZstdContexts
    ) -> Int {
        guard count > 0, capacity > 0, let context = unsafe contexts.compression() else { return 0 }
        let written = unsafe ZSTD_compressCCtx(context, destination, capacity, source, count, Int32(level))
        return ZSTD_isError(written) != 0 ? 0 : written
    }

    /// Decodes the frame of `count` bytes at `payload` (private memory: libzstd is safe on hostile input, not on
    /// input that changes while it reads) into exactly `rawBytes` bytes at `output` (its capacity). Returns false
    /// unless the payload is one zstd frame (no skippable frame, nothing after it) whose header states a content
    /// size of `rawBytes`, no dictionary and a window of at most 2^``maximumWindowLog`` bytes, and which decodes
    /// to exactly that many bytes (its checksum, if it has one, matching), in `contexts`' decompression context.
    static func decompress(
        _ payload: UnsafeRawPointer,
        count: Int,
        into output: UnsafeMutableRawPointer,
        rawBytes: Int,
        contexts: ZstdContexts
    ) -> Bool {
        guard count > 0, rawBytes > 0 else { return false }
        var header = ZSTD_frameHeader()
        guard unsafe ZSTD_getFrameHeader(&header, payload, count) == 0,
            header.frameType == ZSTD_frame,
            header.frameContentSize == UInt64(rawBytes),
            header.dictID == 0,
            header.windowSize <= UInt64(1) << maximumWindowLog
        else { return false }
        let frameBytes = unsafe ZSTD_findFrameCompressedSize(payload, count)
        guard ZSTD_isError(frameBytes) == 0, frameBytes == count else { return false }
        guard let context = unsafe contexts.decompression() else { return false }
        let read = unsafe ZSTD_decompressDCtx(context, output, rawBytes, payload, count)
        return ZSTD_isError(read) == 0 && read == rawBytes
    }
}

/// One worker's libzstd contexts, made on first use and freed with the workspace that keeps them, so that a warm
/// workspace neither allocates nor sets up a context per entry: setting one up costs 13–18 µs on this machine's
/// virtual processors (libzstd asks the processor for its features each time), a third of a 64-row band's decode.
///
/// @unchecked Sendable: each worker of a call uses only its own (``ScratchAreas/zstd(_:)``), and a workspace serves
/// one call at a time.
@safe final class ZstdContexts: @unchecked Sendable {
    private var compressionContext: OpaquePointer? = nil
    private var decompressionContext: OpaquePointer? = nil

    /// The compression context (nil if libzstd cannot allocate one: the entry then takes the other modes).
    func compression() -> OpaquePointer? {
        if unsafe compressionContext == nil { unsafe compressionContext = ZSTD_createCCtx() }
        return unsafe compressionContext
    }

    /// The decompression context, its window limited to 2^``ZstdFrame/maximumWindowLog`` (nil if libzstd cannot
    /// allocate one: the entry then fails to decode).
    func decompression() -> OpaquePointer? {
        if unsafe decompressionContext == nil, let context = unsafe ZSTD_createDCtx() {
            let limit = Int32(ZstdFrame.maximumWindowLog)
            guard unsafe ZSTD_isError(ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, limit)) == 0 else {
                unsafe ZSTD_freeDCtx(context)
                return nil
            }
            unsafe decompressionContext = context
        }
        return unsafe decompressionContext
    }

    deinit {
        unsafe ZSTD_freeCCtx(compressionContext)
        unsafe ZSTD_freeDCtx(decompressionContext)
    }
}
