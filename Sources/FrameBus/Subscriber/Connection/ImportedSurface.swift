import Surfaces

/// An imported surface and what checking a frame on it needs, worked out once when it is imported.
struct ImportedSurface {
    let surface: Surface
    /// Its pixel format, checked against its layout at the import.
    let format: PixelFormat
    /// A compressed surface is read up to each frame's `bytesUsed`; a raw one over all its planes.
    var isCompressed: Bool { format.isCompressed }
    /// The bytes a raw frame reads: the sum of its planes (saturating; the import bounded them).
    let rawByteCount: Int
    /// The most committed memory seen so far (docs/PROTOCOL.md §5.7): it never shrinks. Nil until looked at.
    var committedBytes: Int?

    init(_ surface: Surface, format: PixelFormat) {
        self.surface = surface
        self.format = format
        rawByteCount = surface.layout.planes.reduce(0 as Int) { Saturating.add($0, UInt64($1.byteCount)) }
    }

    /// Why `frame` must be refused because it would make us read memory the publisher never committed
    /// (docs/PROTOCOL.md §5.7), or nil: a memfd's holes cost the publisher nothing, and faulting them in would commit
    /// memory on our behalf. A compressed frame is read up to its `bytesUsed`, a raw one over its planes. Sealed
    /// memfds never give committed memory back, so one `fstat` per surface suffices while frames stay within what it
    /// showed.
    mutating func committedMemoryRefusal(for frame: WireFrame) -> String? {
        let needed = isCompressed ? Int(clamping: frame.bytesUsed) : rawByteCount
        if let known = committedBytes, needed <= known { return nil }
        let committed: Int?
        do { committed = try surface.committedByteCount() } catch {
            return "surface \(frame.surfaceID): \(error)"
        }
        guard let committed else { return nil }  // a DMA-BUF: its exporter allocated it whole
        committedBytes = committed
        guard needed <= committed else {
            return "FRAME \(frame.sequence) needs \(needed) bytes of surface \(frame.surfaceID), "
                + "of which the publisher committed \(committed)"
        }
        return nil
    }
}
