import CPNG
import PixelBuffers

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Decodes PNG files to 8-bit R'G'B' with libpng's simplified read API.
///
/// The simplified API (`png_image_begin_read_from_memory`, `png_image_finish_read`) catches libpng's errors with its
/// own `setjmp` inside libpng and reports them as return codes, so no `longjmp` ever crosses a Swift frame.
///
/// The simplified API also applies colour management: it honours `gAMA`/`sRGB`/`iCCP`/`cHRM`, composites `tRNS`
/// transparency onto a background, and treats 16-bit samples as linear light. `make_frames.py` does none of that
/// (it takes the stored samples as gamma-encoded R'G'B' and drops alpha), so before decoding we remove those
/// ancillary chunks from the byte stream (each chunk carries its own CRC, so whole chunks can be dropped), set
/// `PNG_IMAGE_FLAG_16BIT_sRGB`, and ask for an output format with the file's own channels (alpha kept, so nothing
/// is composited). libpng then only unpacks: palette → RGB, 1/2/4-bit grey → 8-bit (×255, ×85, ×17), and
/// 16 → 8 bits with `png_set_scale_16`, which rounds exactly like `(v + 128) / 257` (a test checks all 65536 values).
enum PNGDecoder {
    /// A decoded image before conversion to RGB: `channels` interleaved 8-bit samples per pixel.
    struct Decoded {
        var width: Int
        var height: Int
        /// 1 (grey), 2 (grey, alpha), 3 (R, G, B) or 4 (R, G, B, A).
        var channels: Int
        var samples: [UInt8]
    }

    /// The largest file we read (a 16384 × 16384 16-bit RGBA image stored uncompressed is ~2 GiB; real ones are
    /// far smaller, and this bounds what a hostile path can make us allocate).
    static let maximumFileByteCount = 1 << 30

    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// Reads a whole file into memory.
    static func readFile(atPath path: String, operation: String) throws(PixelBufferError) -> [UInt8] {
        // O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused as not a regular file).
        let descriptor = unsafe open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            throw PixelBufferError(.invalidImage, "\(operation): open failed (errno \(errno))")
        }
        defer { _ = close(descriptor) }
        var status = stat()
        guard unsafe fstat(descriptor, &status) == 0 else {
            throw PixelBufferError(.invalidImage, "\(operation): fstat failed (errno \(errno))")
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw PixelBufferError(.invalidImage, "\(operation): not a regular file")
        }
        let size = Int(status.st_size)
        guard size <= maximumFileByteCount else {
            throw PixelBufferError(.invalidImage, "\(operation): file too large (\(size) bytes)")
        }
        var bytes = [UInt8](repeating: 0, count: size)
        var filled = 0
        while filled < size {
            let count = unsafe bytes.withUnsafeMutableBytes { buffer in
                unsafe read(descriptor, buffer.baseAddress! + filled, size - filled)
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw PixelBufferError(.invalidImage, "\(operation): read failed (errno \(errno))")
            }
            if count == 0 { break }  // the file shrank under us; decode what we have (libpng will complain)
            filled += count
        }
        if filled < size { bytes.removeSubrange(filled...) }
        return bytes
    }

    /// Decodes PNG bytes.
    static func decode(_ data: [UInt8], operation: String) throws(PixelBufferError) -> Decoded {
        let header = try parseHeader(data, operation: operation)
        let channels: Int
        var format: UInt32
        switch header.colorType {
        case 0: (channels, format) = (1, 0)
        case 4: (channels, format) = (2, UInt32(PNG_FORMAT_FLAG_ALPHA))
        case 2, 3: (channels, format) = (3, UInt32(PNG_FORMAT_FLAG_COLOR))
        case 6: (channels, format) = (4, UInt32(PNG_FORMAT_FLAG_COLOR | PNG_FORMAT_FLAG_ALPHA))
        default: throw PixelBufferError(.invalidImage, "\(operation): unknown PNG colour type \(header.colorType)")
        }
        guard header.width > 0, header.height > 0, header.width <= PixelFormat.maximumDimension,
            header.height <= PixelFormat.maximumDimension
        else {
            throw PixelBufferError(.invalidImage, "\(operation): unsupported size \(header.width)x\(header.height)")
        }
        // The header's size is only a claim: a few hundred bytes can claim 16384 × 16384 RGBA, for which the output
        // below would be 1 GiB. Deflate expands at most 1032:1, so image data that cannot hold the claimed pixels
        // is refused before anything is allocated for them.
        let pixelBytes = (header.width * header.height * header.bitsPerPixel + 7) / 8  // ≤ 2³⁴: cannot overflow
        let imageDataBytes = imageDataByteCount(data)
        guard imageDataBytes * maximumDeflateRatio + 1024 >= pixelBytes else {
            throw PixelBufferError(
                .invalidImage,
                "\(operation): too little image data (\(imageDataBytes) bytes) for \(header.width)x\(header.height)"
            )
        }
        let stripped = strippingColourChunks(data)

        var image = unsafe png_image()
        unsafe image.version = UInt32(PNG_IMAGE_VERSION)
        let began = unsafe stripped.withUnsafeBytes { buffer in
            unsafe png_image_begin_read_from_memory(&image, buffer.baseAddress, buffer.count)
        }
        guard began != 0 else {
            throw PixelBufferError(.invalidImage, "\(operation): \(unsafe message(of: image))")
        }
        // From here on libpng holds `stripped`'s address in `image.opaque`; `stripped` stays alive (and unmoved,
        // since it is never mutated) until png_image_finish_read or png_image_free below.
        let width = Int(unsafe image.width)
        let height = Int(unsafe image.height)
        guard width == header.width, height == header.height else {
            unsafe png_image_free(&image)
            throw PixelBufferError(.invalidImage, "\(operation): inconsistent header")
        }
        unsafe image.format = format
        unsafe image.flags |= UInt32(PNG_IMAGE_FLAG_16BIT_sRGB)
        var samples = [UInt8](repeating: 0, count: width * height * channels)
        let finished = withExtendedLifetime(stripped) {
            unsafe samples.withUnsafeMutableBytes { buffer in
                unsafe png_image_finish_read(&image, nil, buffer.baseAddress, Int32(width * channels), nil)
            }
        }
        guard finished != 0 else {
            // finish_read has already freed the control structure.
            throw PixelBufferError(.invalidImage, "\(operation): \(unsafe message(of: image))")
        }
        return Decoded(width: width, height: height, channels: channels, samples: samples)
    }

    private static func message(of image: png_image) -> String {
        var copy = unsafe image.message
        let text = unsafe withUnsafeBytes(of: &copy) { raw in
            let bytes = unsafe raw.prefix(while: { $0 != 0 })
            return unsafe String(decoding: bytes, as: UTF8.self)
        }
        return text.isEmpty ? "libpng error" : "libpng: \(text)"
    }

    struct Header {
        var width: Int
        var height: Int
        var bitDepth: Int
        var colorType: Int

        /// Bits per pixel of the stored samples (before any expansion), or 0 for an unknown colour type.
        var bitsPerPixel: Int {
            let samples =
                switch colorType {
                case 0, 3: 1
                case 4: 2
                case 2: 3
                case 6: 4
                default: 0
                }
            return samples * min(max(bitDepth, 0), 16)
        }
    }

    /// The largest expansion of a deflate stream: a 2-bit code can stand for a 258-byte match.
    static let maximumDeflateRatio = 1032

    /// The total length of the IDAT chunks (the compressed image data), walking the chunk list as far as it is
    /// well-formed.
    static func imageDataByteCount(_ data: [UInt8]) -> Int {
        var total = 0
        var offset = 8
        while offset + 12 <= data.count {
            let length = Int(readUInt32(data, at: offset))
            let end = offset + 12 + length
            guard length <= Int(Int32.max), end <= data.count else {
                // A chunk cut short: count what is there (libpng then reports the damage).
                if Array(data[(offset + 4)..<(offset + 8)]) == Array("IDAT".utf8) { total += data.count - offset - 8 }
                break
            }
            if Array(data[(offset + 4)..<(offset + 8)]) == Array("IDAT".utf8) { total += length }
            offset = end
        }
        return total
    }

    /// Checks the signature and reads IHDR, which the PNG specification requires to be the first chunk.
    static func parseHeader(_ data: [UInt8], operation: String) throws(PixelBufferError) -> Header {
        guard data.count >= 8 + 8 + 13, Array(data[0..<8]) == signature else {
            throw PixelBufferError(.invalidImage, "\(operation): not a PNG file")
        }
        guard readUInt32(data, at: 8) == 13, Array(data[12..<16]) == Array("IHDR".utf8) else {
            throw PixelBufferError(.invalidImage, "\(operation): PNG without IHDR")
        }
        return Header(
            width: Int(readUInt32(data, at: 16)),
            height: Int(readUInt32(data, at: 20)),
            bitDepth: Int(data[24]),
            colorType: Int(data[25])
        )
    }

    /// The chunks that would make libpng change sample values: gamma and colour space (`gAMA`, `sRGB`, `iCCP`,
    /// `cHRM`) and transparency (`tRNS`, which would add an alpha channel that is then composited).
    static let droppedChunkTypes: Set<[UInt8]> = Set(["gAMA", "sRGB", "iCCP", "cHRM", "tRNS"].map { Array($0.utf8) })

    /// Returns `data` without the chunks in ``droppedChunkTypes``. A malformed chunk list is copied through
    /// unchanged from the first bad chunk on, so libpng reports the damage.
    static func strippingColourChunks(_ data: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(data.count)
        output.append(contentsOf: data[0..<min(8, data.count)])
        var offset = 8
        while offset + 12 <= data.count {
            let length = Int(readUInt32(data, at: offset))
            let end = offset + 12 + length
            guard length <= Int(Int32.max), end <= data.count else { break }
            let type = Array(data[(offset + 4)..<(offset + 8)])
            if !droppedChunkTypes.contains(type) {
                output.append(contentsOf: data[offset..<end])
            }
            offset = end
        }
        if offset < data.count { output.append(contentsOf: data[offset...]) }
        return output
    }

    static func readUInt32(_ data: [UInt8], at offset: Int) -> UInt32 {
        UInt32(data[offset]) << 24 | UInt32(data[offset + 1]) << 16 | UInt32(data[offset + 2]) << 8
            | UInt32(data[offset + 3])
    }
}
