import CFrameBusABI
import FrameBus
import Glibc
import SurfaceCompression
import Synchronization

/// The Swift side of `fb_codec`: a ``SurfaceCodecContext`` plus private buffers it works in.
///
/// Decompressing goes straight from the caller's compressed bytes into the caller's planes when those are aligned
/// to the format's elements (the decoder is safe on memory another process rewrites meanwhile: it validates a private copy
/// of the header and table). Otherwise, and for compressing and band decoding, images in a C caller's memory are
/// copied in and out of private buffers: a raw image into a private memfd buffer before compressing, compressed
/// bytes into a private compressed buffer before decoding. The buffers are kept from call to call for one
/// geometry, so a stream of frames of one size allocates once. Calls are serialised by the mutex.
final class CodecHandle: Sendable {
    private struct Buffers {
        var raw: PixelBuffer?
        var compressed: PixelBuffer?
        var band: PixelBuffer?
    }

    let context: SurfaceCodecContext
    private let buffers = Mutex(Buffers())
    /// The thread running a `fb_codec_decode_rows` callback, if any: a call from it back into this codec would wait
    /// on `buffers`, which that thread holds, for ever. Such a call is refused instead.
    private let callbackThread = Mutex<pthread_t?>(nil)

    init(threadCount: Int, tileSize: SurfaceCodec.TileSize = .default, effort: SurfaceCodec.Effort = .fast) {
        context = SurfaceCodecContext(threadCount: threadCount, tileSize: tileSize, effort: effort)
    }

    // MARK: Operations

    /// Compresses `source` into `destination`; returns the bytes used.
    func compress(_ source: CallerImage, into destination: UnsafeMutableRawBufferPointer) throws(ABIError) -> Int {
        let function = "fb_codec_compress"
        guard unsafe !source.format.isCompressed else {
            throw ABIError(.formatMismatch, unsafe "\(function): source is \(source.format), a compressed format")
        }
        try refuseReentry(function)
        return try buffers.withLock { (buffers) throws(ABIError) -> Int in
            let raw = unsafe try reuse(&buffers.raw, width: source.width, height: source.height, format: source.format)
            let maximum = try codecCall { () throws(CompressionError) in
                unsafe try SurfaceCodec.maximumCompressedByteCount(
                    width: source.width,
                    height: source.height,
                    format: source.format,
                    tileSize: context.tileSize
                )
            }
            let compressed = unsafe try reuseCompressed(
                &buffers.compressed,
                width: source.width,
                height: source.height,
                format: source.format,
                byteCount: maximum
            )
            try unsafe source.copy(into: raw)
            let statistics = try codecCall { () throws(CompressionError) in try context.compress(raw, into: compressed)
            }
            let used = statistics.compressedByteCount
            guard used <= destination.count else {
                throw ABIError(
                    .bufferTooSmall,
                    "\(function): \(used) bytes compressed, capacity \(destination.count) (give "
                        + "fb_codec_maximum_compressed_size = \(maximum))"
                )
            }
            try unsafe copyBytes(of: compressed, count: used, into: destination)
            return used
        }
    }

    /// Decompresses `source` into the caller's `destination`: straight from the caller's bytes into the caller's
    /// planes when they are aligned to the format's elements (the decoder copies the header and table it validates and
    /// reads payloads within those private bounds, so a source rewritten meanwhile gives wrong pixels or an error),
    /// else through private buffers.
    func decompress(_ source: UnsafeRawBufferPointer, into destination: CallerImage) throws(ABIError) {
        let function = "fb_codec_decompress"
        try refuseReentry(function)
        guard source.count > 0, source.count <= SurfaceLayout.maximumAllocationSize else {
            throw ABIError(.invalidArgument, "\(function): source_size \(source.count) is not in 1...2^32")
        }
        if let planes = unsafe destination.codecPlanes {
            try codecCall { () throws(CompressionError) in
                try unsafe context.decompress(
                    source,
                    width: destination.width,
                    height: destination.height,
                    format: destination.format.base,
                    plane0: planes.0,
                    plane1: planes.1
                )
            }
            return
        }
        try buffers.withLock { (buffers) throws(ABIError) in
            let compressed = try unsafe load(
                source,
                &buffers,
                destination.width,
                destination.height,
                destination.format
            )
            let raw = unsafe try reuse(
                &buffers.raw,
                width: destination.width,
                height: destination.height,
                format: destination.format.base
            )
            try codecCall { () throws(CompressionError) in try context.decompress(compressed, into: raw) }
            try unsafe destination.copy(from: raw, firstRow: 0, rowCount: destination.height)
        }
    }

    /// The tile row height of `source`.
    func tileRowHeight(
        _ source: UnsafeRawBufferPointer,
        width: Int,
        height: Int,
        format: PixelFormat
    ) throws(ABIError) -> Int {
        try refuseReentry("fb_codec_tile_row_height")
        return try buffers.withLock { (buffers) throws(ABIError) -> Int in
            let compressed = try unsafe load(source, &buffers, width, height, format)
            return try codecCall { () throws(CompressionError) in try SurfaceCodec.tileRowHeight(of: compressed) }
        }
    }

    /// Decodes `source` band by band into the caller's `band`, calling `delivered(first, count)` after each.
    func decodeRows(
        _ source: UnsafeRawBufferPointer,
        imageHeight: Int,
        into band: CallerImage,
        _ delivered: (_ firstRow: Int, _ rowCount: Int) -> Bool
    ) throws(ABIError) {
        let function = "fb_codec_decode_rows"
        try refuseReentry(function)
        try buffers.withLock { (buffers) throws(ABIError) in
            let compressed = try unsafe load(source, &buffers, band.width, imageHeight, band.format)
            let tileRows = try codecCall { () throws(CompressionError) in try SurfaceCodec.tileRowHeight(of: compressed)
            }
            guard unsafe band.height >= tileRows else {
                throw ABIError(
                    .invalidArgument,
                    unsafe "\(function): a band of \(band.height) rows; one tile row is \(tileRows)"
                )
            }
            let scratch = unsafe try reuse(
                &buffers.band,
                width: band.width,
                height: band.height,
                format: band.format.base
            )
            do {
                try context.decodeTileRows(of: compressed, into: scratch) { rows in
                    try unsafe band.copy(from: scratch, firstRow: 0, rowCount: rows.count)
                    callbackThread.withLock { $0 = pthread_self() }
                    let goesOn = delivered(rows.lowerBound, rows.count)
                    callbackThread.withLock { $0 = nil }
                    guard goesOn else {
                        throw ABIError(.cancelled, "\(function): the callback stopped at row \(rows.lowerBound)")
                    }
                }
            } catch {
                throw ABIError(any: error)
            }
        }
    }

    private func refuseReentry(_ function: String) throws(ABIError) {
        let inCallback = callbackThread.withLock { thread in thread.map { pthread_equal($0, pthread_self()) != 0 } }
        if inCallback == true {
            throw ABIError(
                .invalidArgument,
                "\(function): called from inside this codec's fb_codec_decode_rows callback"
            )
        }
    }

    // MARK: Buffers

    /// A private base-format buffer of this geometry, reused when the cached one fits.
    private func reuse(
        _ slot: inout PixelBuffer?,
        width: Int,
        height: Int,
        format: PixelFormat
    ) throws(ABIError) -> PixelBuffer {
        if let buffer = slot, buffer.width == width, buffer.height == height, buffer.pixelFormat == format {
            return buffer
        }
        slot = nil
        do {
            let buffer = try PixelBuffer(width: width, height: height, pixelFormat: format)
            slot = buffer
            return buffer
        } catch {
            throw ABIError(any: error)
        }
    }

    /// A private compressed buffer of this geometry holding at least `byteCount` bytes.
    private func reuseCompressed(
        _ slot: inout PixelBuffer?,
        width: Int,
        height: Int,
        format: PixelFormat,
        byteCount: Int
    ) throws(ABIError) -> PixelBuffer {
        guard let compressedFormat = format.base.compressedVariant else {
            throw ABIError(.formatMismatch, "fb_codec: \(format) has no compressed variant")
        }
        if let buffer = slot, buffer.width == width, buffer.height == height, buffer.pixelFormat == compressedFormat,
            buffer.allocationSize >= byteCount
        {
            return buffer
        }
        slot = nil
        do {
            let buffer = try PixelBuffer(
                width: width,
                height: height,
                compressedFormat: compressedFormat,
                opaqueByteCount: byteCount
            )
            slot = buffer
            return buffer
        } catch {
            throw ABIError(any: error)
        }
    }

    /// Copies compressed bytes from the caller into the private compressed buffer and checks that the bytes the
    /// header claims lie within what the caller gave.
    private func load(
        _ source: UnsafeRawBufferPointer,
        _ buffers: inout Buffers,
        _ width: Int,
        _ height: Int,
        _ format: PixelFormat
    ) throws(ABIError) -> PixelBuffer {
        let function = "fb_codec"
        guard source.count > 0, source.count <= SurfaceLayout.maximumAllocationSize else {
            throw ABIError(.invalidArgument, "\(function): source_size \(source.count) is not in 1...2^32")
        }
        let maximum = try codecCall { () throws(CompressionError) in
            try SurfaceCodec.maximumCompressedByteCount(width: width, height: height, format: format)
        }
        let compressed = try reuseCompressed(
            &buffers.compressed,
            width: width,
            height: height,
            format: format,
            byteCount: max(maximum, source.count)
        )
        do {
            try compressed.lock()
            defer { try? compressed.unlock() }
            unsafe compressed.surface.withUnsafeMutableBytes { bytes in
                // SAFETY: the surface holds at least source.count bytes (reuseCompressed); the caller promises
                // source.count readable bytes.
                unsafe bytes.copyMemory(from: source)
            }
        } catch {
            throw ABIError(any: error)
        }
        let used = try codecCall { () throws(CompressionError) in try SurfaceCodec.bytesUsed(of: compressed) }
        guard used <= source.count else {
            throw ABIError(.corruptData, "\(function): the header claims \(used) bytes, source_size is \(source.count)")
        }
        return compressed
    }

    /// Copies the first `count` bytes of a compressed buffer out.
    private func copyBytes(
        of compressed: PixelBuffer,
        count: Int,
        into destination: UnsafeMutableRawBufferPointer
    ) throws(ABIError) {
        do {
            try compressed.lock(.readOnly)
            defer { try? compressed.unlock(.readOnly) }
            unsafe compressed.surface.withUnsafeBytes { bytes in
                unsafe destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes.prefix(count)))
            }
        } catch {
            throw ABIError(any: error)
        }
    }

    private func codecCall<Result>(_ body: () throws(CompressionError) -> Result) throws(ABIError) -> Result {
        do { return try body() } catch { throw ABIError(any: error) }
    }
}

/// An image in a C caller's memory (`fb_image`), validated: its format, size and plane strides fit, and the byte
/// ranges it spans are computed without overflow.
@unsafe struct CallerImage {
    let format: PixelFormat
    let width: Int
    let height: Int
    let planes: [(data: UnsafeMutableRawPointer, bytesPerRow: Int)]

    /// - Throws: ``ABIStatus/invalidArgument`` or ``ABIStatus/formatMismatch``.
    init(_ image: fb_image, _ what: String, allowsCompressedFormat: Bool) throws(ABIError) {
        let format = try callerFormat(image.format, what)
        if format.isCompressed, !allowsCompressedFormat {
            throw ABIError(.formatMismatch, "\(what): \(format) is compressed; a base format is needed")
        }
        let width = Int(image.width)
        let height = Int(image.height)
        try checkCallerSize(width, height, fit: format, what)
        let geometry = format.base.planes
        var planes: [(data: UnsafeMutableRawPointer, bytesPerRow: Int)] = unsafe []
        var entries = unsafe image.planes
        for (index, plane) in geometry.enumerated() {
            let entry = unsafe withUnsafeBytes(of: &entries) { bytes in
                unsafe bytes.load(
                    fromByteOffset: index * MemoryLayout<fb_image_plane>.stride,
                    as: fb_image_plane.self
                )
            }
            guard let data = unsafe entry.data else {
                throw ABIError(.invalidArgument, "\(what): planes[\(index)].data is NULL")
            }
            let rowBytes = (width / plane.horizontalSubsampling) * plane.bytesPerElement
            let rows = height / plane.verticalSubsampling
            guard let bytesPerRow = unsafe Int(exactly: entry.bytes_per_row), bytesPerRow >= rowBytes else {
                throw ABIError(
                    .invalidArgument,
                    unsafe "\(what): planes[\(index)].bytes_per_row \(entry.bytes_per_row) is less than \(rowBytes)"
                )
            }
            let (span, overflow) = bytesPerRow.multipliedReportingOverflow(by: max(rows - 1, 0))
            guard !overflow, span <= Int.max - rowBytes else {
                throw ABIError(.invalidArgument, "\(what): planes[\(index)] spans more bytes than can be addressed")
            }
            unsafe planes.append((data, bytesPerRow))
        }
        unsafe self.format = format
        unsafe self.width = width
        unsafe self.height = height
        unsafe self.planes = planes
    }

    /// The planes as the codec writes them in place, or nil when one is not aligned to the format's elements
    /// (``SurfaceCodec/destinationAlignment(of:plane:)``). The strides and spans were checked by `init`.
    var codecPlanes: (CodecDestinationPlane, CodecDestinationPlane?)? {
        let base = unsafe format.base
        for index in unsafe 0..<planes.count {
            let plane = unsafe planes[index]
            guard let alignment = SurfaceCodec.destinationAlignment(of: base, plane: index),
                unsafe plane.bytesPerRow % alignment == 0, unsafe Int(bitPattern: plane.data) % alignment == 0
            else { return nil }
        }
        guard let first = unsafe planes.first else { return nil }
        let second = unsafe planes.count > 1 ? planes[1] : nil
        return unsafe (
            CodecDestinationPlane(base: first.data, bytesPerRow: first.bytesPerRow),
            second.map { unsafe CodecDestinationPlane(base: $0.data, bytesPerRow: $0.bytesPerRow) }
        )
    }

    /// Copies every row of every plane into `buffer` (same geometry, base format).
    func copy(into buffer: PixelBuffer) throws(ABIError) {
        do {
            try buffer.lock()
            defer { try? buffer.unlock() }
            for index in unsafe 0..<min(planes.count, buffer.planeCount) {
                let layout = buffer.planeLayout(index)
                let rowBytes = layout.width * layout.bytesPerElement
                let source = unsafe planes[index]
                try unsafe buffer.withUnsafeMutableBytes(ofPlane: index) { bytes in
                    for row in 0..<layout.height {
                        unsafe (bytes.baseAddress! + row * layout.bytesPerRow).copyMemory(
                            from: source.data + row * source.bytesPerRow,
                            byteCount: rowBytes
                        )
                    }
                }
            }
        } catch {
            throw ABIError(any: error)
        }
    }

    /// Copies image rows `0..<rowCount` of `buffer` (base format, as wide as this image) into this image's rows
    /// `firstRow...`; for subsampled planes the matching plane rows. The buffer must be locked or lockable.
    func copy(from buffer: PixelBuffer, firstRow: Int, rowCount: Int) throws(ABIError) {
        do {
            let wasLocked = buffer.surface.isLocked
            if !wasLocked { try buffer.lock(.readOnly) }
            defer { if !wasLocked { try? buffer.unlock(.readOnly) } }
            for index in unsafe 0..<min(planes.count, buffer.planeCount) {
                let layout = buffer.planeLayout(index)
                let subsampling = unsafe format.base.planes[index].verticalSubsampling
                let rowBytes = layout.width * layout.bytesPerElement
                let planeFirst = firstRow / subsampling
                let planeRows = min((rowCount + subsampling - 1) / subsampling, layout.height)
                let destination = unsafe planes[index]
                try unsafe buffer.withUnsafeBytes(ofPlane: index) { bytes in
                    for row in 0..<planeRows {
                        unsafe (destination.data + (planeFirst + row) * destination.bytesPerRow).copyMemory(
                            from: bytes.baseAddress! + row * layout.bytesPerRow,
                            byteCount: rowBytes
                        )
                    }
                }
            }
        } catch {
            throw ABIError(any: error)
        }
    }
}
