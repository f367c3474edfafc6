import CFrameBusABI
import FrameBus

/// The Swift side of `fb_buffer`: a pool buffer locked read-write while C fills it.
///
/// The plane pointers in ``info`` stay valid while this object lives: it keeps the buffer (and so its surface and
/// mapping) alive, and it is freed only by `fb_buffer_publish` or `fb_buffer_discard`, which end C's use.
@safe final class BufferHandle {
    let publisher: Publisher
    let buffer: PixelBuffer
    private(set) var info = fb_buffer_info()
    private var isLocked = false

    init(publisher: Publisher, buffer: PixelBuffer) throws(ABIError) {
        self.publisher = publisher
        self.buffer = buffer
        do { try buffer.lock() } catch { throw ABIError(any: error) }
        isLocked = true
        info = describe()
    }

    deinit {
        unlock()
    }

    /// Ends the writing: unlocks (a read-write unlock changes the surface's seed).
    func unlock() {
        guard isLocked else { return }
        isLocked = false
        try? buffer.unlock()
    }

    private func describe() -> fb_buffer_info {
        var info = fb_buffer_info()
        info.format = buffer.pixelFormat.fourCC
        info.width = UInt32(clamping: buffer.width)
        info.height = UInt32(clamping: buffer.height)
        info.allocation_size = UInt64(clamping: buffer.allocationSize)
        let count = min(buffer.planeCount, Int(FB_MAX_PLANES))
        info.plane_count = UInt32(count)
        var planes: [fb_plane] = unsafe []
        for index in 0..<count {
            let layout = buffer.planeLayout(index)
            // SAFETY: the plane of a buffer locked read-write (init) whose mapping this object keeps alive; C's use
            // of the pointer ends (fb_buffer_publish/discard) before this object goes.
            let base =
                unsafe (try? buffer.withUnsafeMutableBytes(ofPlane: index) { bytes in bytes.baseAddress })
                ?? nil
            unsafe planes.append(
                unsafe fb_plane(
                    data: base.map { unsafe $0.assumingMemoryBound(to: UInt8.self) },
                    offset: UInt64(clamping: layout.offset),
                    bytes_per_row: UInt64(clamping: layout.bytesPerRow),
                    byte_count: UInt64(clamping: layout.byteCount),
                    width: UInt32(clamping: layout.width),
                    height: UInt32(clamping: layout.height),
                    bytes_per_element: UInt32(clamping: layout.bytesPerElement),
                    reserved: 0
                )
            )
        }
        unsafe setPlanes(planes, in: &info.planes)
        return info
    }
}
