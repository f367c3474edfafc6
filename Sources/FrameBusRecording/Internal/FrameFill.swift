import FrameBus

/// Copies a recorded frame's bytes into a pixel buffer for publishing (the reverse of ``FrameCopy``).
enum FrameFill {
    /// Whether `buffer` (of the track's format and size) can take the track's frames:
    /// each plane has the track's rows, at least as wide as its packed rows (a compressed frame is checked as read).
    static func fits(_ buffer: PixelBuffer, track: RecordingTrack) -> Bool {
        // A compressed frame is checked against the surface as it is read (its size is known only then).
        if track.pixelFormat.isCompressed { return true }
        let planes = track.rawPlanes
        guard buffer.planeCount == planes.count else { return false }
        for (index, plane) in planes.enumerated()
        where buffer.bytesPerRow(ofPlane: index) < plane.rowBytes || buffer.height(ofPlane: index) != plane.rows {
            return false
        }
        return true
    }

    /// Raw: packed rows into the buffer's planes (row padding left as is). Compressed: the bytes at the start of
    /// the surface. The buffer must be of the track's format and size (checked).
    static func fill(_ buffer: PixelBuffer, with bytes: [UInt8], track: RecordingTrack) -> Bool {
        guard buffer.pixelFormat == track.pixelFormat, buffer.width == track.width, buffer.height == track.height else {
            return false
        }
        if track.pixelFormat.isCompressed {
            do {
                try buffer.surface.lock()
                defer { try? buffer.surface.unlock() }
                guard bytes.count <= buffer.surface.allocationSize else { return false }
                unsafe buffer.surface.withUnsafeMutableBytes { destination in
                    unsafe bytes.withUnsafeBytes { source in
                        unsafe destination.baseAddress!.copyMemory(from: source.baseAddress!, byteCount: source.count)
                    }
                }
                return true
            } catch {
                return false
            }
        }
        let planes = track.rawPlanes
        guard bytes.count == track.maximumFrameByteCount, buffer.planeCount == planes.count else { return false }
        do {
            try buffer.lock()
            defer { try? buffer.unlock() }
            var offset = 0
            for (index, plane) in planes.enumerated() {
                let stride = buffer.bytesPerRow(ofPlane: index)
                guard stride >= plane.rowBytes, buffer.height(ofPlane: index) == plane.rows else { return false }
                try unsafe buffer.withUnsafeMutableBytes(ofPlane: index) { destination in
                    unsafe bytes.withUnsafeBytes { source in
                        for row in 0..<plane.rows {
                            unsafe (destination.baseAddress! + row * stride).copyMemory(
                                from: source.baseAddress! + offset,
                                byteCount: plane.rowBytes
                            )
                            offset += plane.rowBytes
                        }
                    }
                }
            }
            return true
        } catch {
            return false
        }
    }
}
