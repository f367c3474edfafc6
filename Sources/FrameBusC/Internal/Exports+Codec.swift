import CFrameBusABI
import FrameBus

// The codec part of the C ABI; include/framebus.h documents each function.

/// `fb_codec_create`.
@_cdecl("fb_codec_create")
public func fbCodecCreate(
    _ threadCount: UInt32,
    _ outCodec: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        guard let outCodec = unsafe outCodec else { throw .null("out_codec", in: "fb_codec_create") }
        var options = fb_codec_options()
        options.thread_count = threadCount
        let settings = try CodecSettings(options, "fb_codec_create")
        unsafe outCodec.pointee = Handle.make(settings.makeHandle())
    }
}

/// `fb_codec_options_init`.
@_cdecl("fb_codec_options_init")
public func fbCodecOptionsInit(_ options: UnsafeMutablePointer<fb_codec_options>?) {
    guard let options = unsafe options else { return }
    // Every default is 0: every online processor, full-width tiles, 64 rows, effort fast, reserved fields clear.
    unsafe options.pointee = fb_codec_options()
}

/// `fb_codec_create_with_options`.
@_cdecl("fb_codec_create_with_options")
public func fbCodecCreateWithOptions(
    _ options: UnsafePointer<fb_codec_options>?,
    _ outCodec: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_codec_create_with_options"
        guard let outCodec = unsafe outCodec else { throw .null("out_codec", in: function) }
        // One copy of the caller's struct, validated before it bounds anything.
        let copy = unsafe options?.pointee ?? fb_codec_options()
        let settings = try CodecSettings(copy, function)
        unsafe outCodec.pointee = Handle.make(settings.makeHandle())
    }
}

/// `fb_codec_destroy`.
@_cdecl("fb_codec_destroy")
public func fbCodecDestroy(_ codec: OpaquePointer?) {
    guard let codec = unsafe codec else { return }
    unsafe Handle.free(codec, as: CodecHandle.self)
}

/// `fb_codec_maximum_compressed_size`.
@_cdecl("fb_codec_maximum_compressed_size")
public func fbCodecMaximumCompressedSize(
    _ code: UInt32,
    _ width: UInt32,
    _ height: UInt32,
    _ outSize: UnsafeMutablePointer<UInt64>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_codec_maximum_compressed_size"
        guard let outSize = unsafe outSize else { throw .null("out_size", in: function) }
        unsafe outSize.pointee = try maximumCompressedSize(code, width, height, tileSize: .default, function)
    }
}

/// `fb_codec_compressed_capacity`.
@_cdecl("fb_codec_compressed_capacity")
public func fbCodecCompressedCapacity(
    _ codec: OpaquePointer?,
    _ code: UInt32,
    _ width: UInt32,
    _ height: UInt32,
    _ outSize: UnsafeMutablePointer<UInt64>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_codec_compressed_capacity"
        guard let codec = unsafe codec else { throw .null("codec", in: function) }
        guard let outSize = unsafe outSize else { throw .null("out_size", in: function) }
        let tileSize = unsafe Handle.borrow(codec, as: CodecHandle.self).context.tileSize
        unsafe outSize.pointee = try maximumCompressedSize(code, width, height, tileSize: tileSize, function)
    }
}

/// The most bytes compressing a caller's `width` x `height` image of format `code` with `tileSize` can produce
/// (both capacity functions).
private func maximumCompressedSize(
    _ code: UInt32,
    _ width: UInt32,
    _ height: UInt32,
    tileSize: SurfaceCodec.TileSize,
    _ function: String
) throws(ABIError) -> UInt64 {
    let format = try callerFormat(code, function)
    try checkCallerSize(Int(width), Int(height), fit: format, function)
    do {
        return UInt64(
            try SurfaceCodec.maximumCompressedByteCount(
                width: Int(width),
                height: Int(height),
                format: format,
                tileSize: tileSize
            )
        )
    } catch {
        throw ABIError(any: error)
    }
}

/// `fb_codec_compress`.
@_cdecl("fb_codec_compress")
public func fbCodecCompress(
    _ codec: OpaquePointer?,
    _ source: UnsafePointer<fb_image>?,
    _ destination: UnsafeMutableRawPointer?,
    _ capacity: UInt64,
    _ outBytesUsed: UnsafeMutablePointer<UInt64>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_codec_compress"
        guard let codec = unsafe codec else { throw .null("codec", in: function) }
        guard let source = unsafe source?.pointee else { throw .null("source", in: function) }
        guard let destination = unsafe destination else { throw .null("destination", in: function) }
        guard let outBytesUsed = unsafe outBytesUsed else { throw .null("out_bytes_used", in: function) }
        guard let count = Int(exactly: capacity) else {
            throw ABIError(.invalidArgument, "\(function): capacity \(capacity) is too large")
        }
        let image = try unsafe CallerImage(source, "\(function): source", allowsCompressedFormat: false)
        let used = try unsafe Handle.borrow(codec, as: CodecHandle.self).compress(
            image,
            into: UnsafeMutableRawBufferPointer(start: destination, count: count)
        )
        unsafe outBytesUsed.pointee = UInt64(used)
    }
}

/// `fb_codec_decompress`.
@_cdecl("fb_codec_decompress")
public func fbCodecDecompress(
    _ codec: OpaquePointer?,
    _ source: UnsafeRawPointer?,
    _ sourceSize: UInt64,
    _ destination: UnsafePointer<fb_image>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_codec_decompress"
        guard let codec = unsafe codec else { throw .null("codec", in: function) }
        let bytes = try unsafe sourceBytes(source, sourceSize, function)
        guard let destination = unsafe destination?.pointee else { throw .null("destination", in: function) }
        let image = try unsafe CallerImage(destination, "\(function): destination", allowsCompressedFormat: true)
        try unsafe Handle.borrow(codec, as: CodecHandle.self).decompress(bytes, into: image)
    }
}

/// `fb_codec_tile_row_height`.
@_cdecl("fb_codec_tile_row_height")
public func fbCodecTileRowHeight(
    _ codec: OpaquePointer?,
    _ source: UnsafeRawPointer?,
    _ sourceSize: UInt64,
    _ code: UInt32,
    _ width: UInt32,
    _ height: UInt32,
    _ outRows: UnsafeMutablePointer<UInt32>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_codec_tile_row_height"
        guard let codec = unsafe codec else { throw .null("codec", in: function) }
        let bytes = try unsafe sourceBytes(source, sourceSize, function)
        guard let outRows = unsafe outRows else { throw .null("out_rows", in: function) }
        let format = try callerFormat(code, function)
        try checkCallerSize(Int(width), Int(height), fit: format, function)
        let rows = try unsafe Handle.borrow(codec, as: CodecHandle.self).tileRowHeight(
            bytes,
            width: Int(width),
            height: Int(height),
            format: format
        )
        unsafe outRows.pointee = UInt32(clamping: rows)
    }
}

/// `fb_codec_decode_rows`.
@_cdecl("fb_codec_decode_rows")
public func fbCodecDecodeRows(
    _ codec: OpaquePointer?,
    _ source: UnsafeRawPointer?,
    _ sourceSize: UInt64,
    _ imageHeight: UInt32,
    _ band: UnsafePointer<fb_image>?,
    _ callback: fb_rows_callback?,
    _ context: UnsafeMutableRawPointer?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_codec_decode_rows"
        guard let codec = unsafe codec else { throw .null("codec", in: function) }
        let bytes = try unsafe sourceBytes(source, sourceSize, function)
        guard let band = unsafe band?.pointee else { throw .null("band", in: function) }
        guard let callback = unsafe callback else { throw .null("callback", in: function) }
        let image = try unsafe CallerImage(band, "\(function): band", allowsCompressedFormat: true)
        guard imageHeight <= PixelFormat.maximumDimension,
            unsafe image.format.base.isValidSize(width: image.width, height: Int(imageHeight))
        else {
            throw ABIError(
                .invalidArgument,
                unsafe "\(function): image height \(imageHeight) does not fit \(image.format)"
            )
        }
        try unsafe Handle.borrow(codec, as: CodecHandle.self).decodeRows(
            bytes,
            imageHeight: Int(imageHeight),
            into: image
        ) { first, count in
            unsafe callback(context, UInt32(first), UInt32(count)) == 0
        }
    }
}

/// The caller's compressed bytes, checked for NULL and size.
private func sourceBytes(
    _ source: UnsafeRawPointer?,
    _ size: UInt64,
    _ function: String
) throws(ABIError) -> UnsafeRawBufferPointer {
    guard let source = unsafe source else { throw .null("source", in: function) }
    guard size > 0, size <= UInt64(SurfaceLayout.maximumAllocationSize) else {
        throw ABIError(.invalidArgument, "\(function): source_size \(size) is not in 1...2^32")
    }
    return unsafe UnsafeRawBufferPointer(start: source, count: Int(size))
}
