import FrameBus

/// Copies a frame's bytes from the publisher's memory into the ring, once (that copy is also the only read of the
/// frame: nothing else looks at memory another process can write).
enum FrameCopy {
    /// The packed rows of a raw frame: `track.maximumFrameByteCount` bytes, plane after plane, no row padding.
    /// Returns false if the buffer's planes do not match the track (then nothing was copied).
    static func copyRaw(_ image: PixelBuffer, track: RecordingTrack, into ring: AlignedRing, at position: Int) -> Bool {
        let planes = track.rawPlanes
        guard image.planeCount == planes.count else { return false }
        for (index, plane) in planes.enumerated() {
            let layout = image.planeLayout(index)
            guard layout.width * layout.bytesPerElement == plane.rowBytes, layout.height == plane.rows,
                layout.bytesPerRow >= plane.rowBytes
            else { return false }
        }
        do {
            try image.lock(.readOnly)
            defer { try? image.unlock(.readOnly) }
            var offset = position
            for (index, plane) in planes.enumerated() {
                let stride = image.planeLayout(index).bytesPerRow
                try unsafe image.withUnsafeBytes(ofPlane: index) { bytes in
                    for row in 0..<plane.rows {
                        let start = row * stride
                        unsafe ring.write(
                            UnsafeRawBufferPointer(rebasing: bytes[start..<(start + plane.rowBytes)]),
                            at: offset
                        )
                        offset += plane.rowBytes
                    }
                }
            }
            return true
        } catch {
            return false
        }
    }

    /// The first `byteCount` bytes of a compressed frame's surface (its bytes used, already clamped to the surface).
    static func copyCompressed(_ image: PixelBuffer, byteCount: Int, into ring: AlignedRing, at position: Int) -> Bool {
        do {
            try image.surface.lock(.readOnly)
            defer { try? image.surface.unlock(.readOnly) }
            guard byteCount <= image.surface.allocationSize else { return false }
            unsafe image.surface.withUnsafeBytes { bytes in
                unsafe ring.write(UnsafeRawBufferPointer(rebasing: bytes[0..<byteCount]), at: position)
            }
            return true
        } catch {
            return false
        }
    }
}
