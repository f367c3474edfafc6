import CZstd

#if canImport(Glibc)
import Glibc
#endif

/// libzstd's one-shot API, the one place this module calls it: the payload of mode `zstd` (layout version 8,
/// docs/COMPRESSED-LAYOUT.md §6.9) is one zstd frame (RFC 8878) of the component's raw samples.
///
/// Both directions run in a static context (`ZSTD_initStaticCCtx` / `ZSTD_initStaticDCtx`) placed in the worker's
/// scratch, so a warm workspace allocates nothing per frame and each worker has its own.
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

    /// The largest window a payload's frame may declare: 2^23 bytes, the largest component (a 2^22-pixel tile of
    /// 16-bit samples). FrameBus writes single-segment frames, whose window is their content size.
    static let maximumWindowLog = 23

    /// Bytes of the static compression context for components of at most `rawBytes` bytes, rounded up to 64.
    static func compressionStateByteCount(rawBytes: Int) -> Int {
        let parameters = ZSTD_getCParams(Int32(level), UInt64(max(rawBytes, 1)), 0)
        return (ZSTD_estimateCCtxSize_usingCParams(parameters) + 63) & ~63
    }

    /// Bytes of the static decompression context, rounded up to 64.
    static let decompressionStateByteCount = (ZSTD_estimateDCtxSize() + 63) & ~63

    /// Compresses `count` bytes into one zstd frame of at most `capacity` bytes, with the content size in its
    /// header, no checksum and no dictionary, in `state` (``compressionStateByteCount(rawBytes:)`` bytes for a
    /// `rawBytes` ≥ `count`, 8-byte aligned). Returns the frame's size, or 0 when it does not fit.
    static func compress(
        _ source: UnsafeRawPointer,
        count: Int,
        into destination: UnsafeMutableRawPointer,
        capacity: Int,
        state: UnsafeMutableRawPointer,
        stateByteCount: Int
    ) -> Int {
        guard count > 0, capacity > 0 else { return 0 }
        guard let context = unsafe ZSTD_initStaticCCtx(state, stateByteCount) else { return 0 }
        let written = unsafe ZSTD_compressCCtx(context, destination, capacity, source, count, Int32(level))
        return ZSTD_isError(written) != 0 ? 0 : written
    }

    /// Decodes the frame of `count` bytes at `payload` (private memory: libzstd is safe on hostile input, not on
    /// input that changes while it reads) into exactly `rawBytes` bytes at `output` (its capacity). Returns false
    /// unless the payload is one zstd frame (no skippable frame, nothing after it) whose header states a content
    /// size of `rawBytes`, no dictionary and a window of at most 2^``maximumWindowLog`` bytes, and which decodes
    /// to exactly that many bytes (its checksum, if it has one, matching). `state` holds
    /// ``decompressionStateByteCount`` bytes, 8-byte aligned.
    static func decompress(
        _ payload: UnsafeRawPointer,
        count: Int,
        into output: UnsafeMutableRawPointer,
        rawBytes: Int,
        state: UnsafeMutableRawPointer
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
        guard let context = unsafe ZSTD_initStaticDCtx(state, decompressionStateByteCount) else { return false }
        guard unsafe ZSTD_isError(ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, Int32(maximumWindowLog))) == 0
        else { return false }
        let read = unsafe ZSTD_decompressDCtx(context, output, rawBytes, payload, count)
        return ZSTD_isError(read) == 0 && read == rawBytes
    }
}
