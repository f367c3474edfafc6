import CFrameBusABI
import FrameBus

/// The Swift side of `fb_frame`: a received frame, locked read-only for as long as C holds it.
///
/// The plane pointers in ``info`` point into the surface's mapping, which lives as long as the surface, which this
/// object keeps alive (through ``sample`` and ``buffer``) until `fb_frame_release` drops it. The read-only lock
/// brackets CPU access for DMA-BUF surfaces (`DMA_BUF_IOCTL_SYNC`) for the frame's whole life in C.
@safe final class FrameHandle {
    let sample: SampleBuffer
    let buffer: PixelBuffer
    /// Everything `fb_frame_get_info` returns, computed once.
    private(set) var info = unsafe fb_frame_info()

    /// - Throws: ``ABIStatus/internal`` for a frame without an image, or the lock's error.
    init(sample: SampleBuffer) throws(ABIError) {
        guard let buffer = sample.imageBuffer else {
            throw ABIError(.internal, "fb_subscriber_next_event: a frame event without an image buffer")
        }
        self.sample = sample
        self.buffer = buffer
        do { try buffer.lock(.readOnly) } catch { throw ABIError(any: error) }
        unsafe info = unsafe describe()
    }

    deinit {
        try? buffer.unlock(.readOnly)
    }

    private func describe() -> fb_frame_info {
        var info = unsafe fb_frame_info()
        unsafe info.sequence = sample.busSequenceNumber ?? 0
        unsafe info.format = buffer.pixelFormat.fourCC
        unsafe info.width = UInt32(clamping: buffer.width)
        unsafe info.height = UInt32(clamping: buffer.height)
        unsafe info.allocation_size = UInt64(clamping: buffer.allocationSize)
        var rawBytes: UInt64 = 0
        if buffer.pixelFormat.isCompressed {
            // The opaque region starts the surface; only a single mapping (every memfd) has one start.
            if buffer.surface.backing == .memfd, buffer.surface.descriptorCount == 1 {
                // SAFETY: the surface is locked (init) and stays mapped while `buffer` lives; the pointer goes to C,
                // whose contract (fb_frame_release) ends its use before this object goes.
                unsafe info.compressed_data = unsafe buffer.surface.withUnsafeBytes { bytes in
                    unsafe bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
                }
            }
        } else {
            let count = min(buffer.planeCount, Int(FB_MAX_PLANES))
            unsafe info.plane_count = UInt32(count)
            var planes: [fb_plane] = unsafe []
            for index in 0..<count {
                let layout = buffer.planeLayout(index)
                // SAFETY: as above: the base address of a locked plane of a mapping this object keeps alive.
                let base =
                    unsafe (try? buffer.withUnsafeBytes(ofPlane: index) { bytes in bytes.baseAddress })
                    ?? nil
                unsafe planes.append(
                    unsafe fb_plane(
                        data: base.map {
                            unsafe UnsafeMutablePointer(mutating: $0.assumingMemoryBound(to: UInt8.self))
                        },
                        offset: UInt64(clamping: layout.offset),
                        bytes_per_row: UInt64(clamping: layout.bytesPerRow),
                        byte_count: UInt64(clamping: layout.byteCount),
                        width: UInt32(clamping: layout.width),
                        height: UInt32(clamping: layout.height),
                        bytes_per_element: UInt32(clamping: layout.bytesPerElement),
                        reserved: 0
                    )
                )
                rawBytes &+= UInt64(clamping: layout.byteCount)
            }
            unsafe setPlanes(planes, in: &info.planes)
        }
        unsafe info.bytes_used = sample.busBytesUsed.map { UInt64(clamping: $0) } ?? rawBytes
        unsafe info.presentation_time = fb_time(sample.presentationTimeStamp)
        unsafe info.duration = fb_time(sample.duration)
        unsafe info.presentation_time_ns = sample.presentationTimeStamp.nanoseconds ?? Int64.min
        unsafe info.duration_ns = sample.duration.nanoseconds ?? Int64.min
        unsafe info.publish_time_ns = sample.busPublishTime ?? 0
        unsafe info.flags = sample.isDiscontinuity ? UInt32(FB_FRAME_FLAG_DISCONTINUITY) : 0
        let codes = ColorimetryCodes.codes(of: buffer.attachments)
        unsafe info.colorimetry = fb_colorimetry(
            primaries: codes.0,
            transfer: codes.1,
            matrix: codes.2,
            chroma_location: codes.3
        )
        return unsafe info
    }
}

/// Stores up to four planes into a C `fb_plane[4]` (imported as a tuple); the rest stay zero.
func setPlanes<Tuple>(_ planes: [fb_plane], in tuple: inout Tuple) {
    unsafe withUnsafeMutableBytes(of: &tuple) { bytes in
        let stride = unsafe MemoryLayout<fb_plane>.stride
        for index in unsafe 0..<min(planes.count, bytes.count / stride) {
            unsafe bytes.storeBytes(of: planes[index], toByteOffset: index * stride, as: fb_plane.self)
        }
    }
}
