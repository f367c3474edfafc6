/// Where one plane of an image lives inside a surface.
public struct PlaneLayout: Hashable, Sendable {
    /// Byte offset of the plane's first row from the start of the surface.
    public var offset: Int
    /// Bytes from the start of one row to the next (stride); at least `width * bytesPerElement`.
    public var bytesPerRow: Int
    /// Width in elements.
    public var width: Int
    /// Height in rows.
    public var height: Int
    /// Bytes per element (a sample, a CbCr pair, a BGRA pixel).
    public var bytesPerElement: Int

    public init(offset: Int, bytesPerRow: Int, width: Int, height: Int, bytesPerElement: Int) {
        self.offset = offset
        self.bytesPerRow = bytesPerRow
        self.width = width
        self.height = height
        self.bytesPerElement = bytesPerElement
    }

    /// The bytes the plane spans: `bytesPerRow * height`.
    public var byteCount: Int { bytesPerRow * height }
}

/// The fixed memory layout of a surface: what an importer needs besides the descriptor.
///
/// A layout with no planes describes an opaque surface (a compressed format), whose bytes only a codec reads.
public struct SurfaceLayout: Hashable, Sendable {
    /// The pixel format's four-character code, packed big-endian as CoreVideo's `OSType`.
    public var pixelFormat: UInt32
    /// Image width in pixels.
    public var width: Int
    /// Image height in pixels.
    public var height: Int
    /// The planes, in memory order; empty for an opaque surface.
    public var planes: [PlaneLayout]
    /// Total bytes of shared memory.
    public var allocationSize: Int

    public init(pixelFormat: UInt32, width: Int, height: Int, planes: [PlaneLayout], allocationSize: Int) {
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.planes = planes
        self.allocationSize = allocationSize
    }

    /// The largest surface FrameBus maps: 4 GiB (a 16K × 16K 16-bit RGBA frame is 2 GiB).
    public static let maximumAllocationSize = 1 << 32
    /// The most planes a layout may have.
    public static let maximumPlaneCount = 4

    /// Checks that every plane lies inside the allocation and that no size is zero, negative or absurd.
    ///
    /// - Throws: ``SurfaceError/Code-swift.struct/invalidLayout``.
    public func validate() throws(SurfaceError) {
        func fail(_ why: String) -> SurfaceError { SurfaceError(.invalidLayout, "SurfaceLayout.validate: \(why)") }
        guard allocationSize > 0, allocationSize <= Self.maximumAllocationSize else {
            throw fail("allocation size \(allocationSize)")
        }
        guard width > 0, height > 0, width <= 1 << 16, height <= 1 << 16 else { throw fail("size \(width)x\(height)") }
        guard planes.count <= Self.maximumPlaneCount else { throw fail("\(planes.count) planes") }
        for (index, plane) in planes.enumerated() {
            guard plane.width > 0, plane.height > 0, plane.bytesPerElement > 0, plane.bytesPerElement <= 16,
                plane.width <= 1 << 16, plane.height <= 1 << 16, plane.offset >= 0,
                plane.bytesPerRow >= plane.width * plane.bytesPerElement, plane.bytesPerRow <= 1 << 20
            else { throw fail("plane \(index) geometry") }
            let (end, overflow) = plane.offset.addingReportingOverflow(plane.byteCount)
            guard !overflow, end <= allocationSize else { throw fail("plane \(index) ends past the allocation") }
        }
    }
}
