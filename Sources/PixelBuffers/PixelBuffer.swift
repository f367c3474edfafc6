import Surfaces
import Synchronization

/// An image in a surface, with attachments: FrameBus's CVPixelBuffer.
///
/// A pixel buffer is a view of a ``Surface`` as planes of a ``PixelFormat``. Plane bytes are reachable only inside
/// a lock, and only for base formats: a compressed format's memory is opaque and read by the codec alone.
///
/// ```swift
/// let buffer = try PixelBuffer(width: 1920, height: 1080, pixelFormat: .yuv420BiPlanarVideoRange8)
/// try buffer.lock()
/// try unsafe buffer.withUnsafeMutableBytes(ofPlane: 0) { luma in luma.initializeMemory(as: UInt8.self, repeating: 16) }
/// try buffer.unlock()
/// ```
public final class PixelBuffer: @unchecked Sendable {
    // @unchecked: `surface`, `pixelFormat`, the sizes and `recycler` are immutable; `attachmentStorage` is a Mutex.

    /// The shared memory underneath.
    public let surface: Surface
    /// The pixel format.
    public let pixelFormat: PixelFormat
    /// Width in pixels.
    public let width: Int
    /// Height in pixels.
    public let height: Int

    private let attachmentStorage: Mutex<PixelBufferAttachments>
    /// Called once when the buffer goes away: hands the surface back to its pool, or runs a release handler.
    private let recycler: (@Sendable (Surface) -> Void)?

    /// The default bytes-per-row alignment: 64 bytes, a cache line and what most DRM/V4L2 drivers accept.
    public static let defaultBytesPerRowAlignment = 64

    /// Makes a pixel buffer of a base format in a new memfd surface.
    ///
    /// Each plane's rows are padded to `bytesPerRowAlignment` and each plane starts at a multiple of it.
    ///
    /// - Parameters:
    ///   - width: width in pixels; even for 4:2:0 formats.
    ///   - height: height in pixels; even for 4:2:0 formats.
    ///   - pixelFormat: a base (uncompressed) format.
    ///   - bytesPerRowAlignment: a power of two from 1 to 4096.
    ///   - attachments: initial attachments.
    /// - Throws: ``PixelBufferError/Code-swift.struct/invalidSize``,
    ///   ``PixelBufferError/Code-swift.struct/invalidAlignment``, ``PixelBufferError/Code-swift.struct/opaqueFormat``
    ///   (a compressed format needs ``init(width:height:compressedFormat:opaqueByteCount:attachments:)``),
    ///   ``PixelBufferError/Code-swift.struct/surface``.
    public convenience init(
        width: Int,
        height: Int,
        pixelFormat: PixelFormat,
        bytesPerRowAlignment: Int = PixelBuffer.defaultBytesPerRowAlignment,
        attachments: PixelBufferAttachments = PixelBufferAttachments()
    ) throws(PixelBufferError) {
        let layout = try Self.layout(
            width: width,
            height: height,
            pixelFormat: pixelFormat,
            bytesPerRowAlignment: bytesPerRowAlignment
        )
        let surface: Surface
        do { surface = try Surface.makeMemFD(layout: layout, name: "framebus-\(pixelFormat.name)") } catch {
            throw PixelBufferError(.surface, "PixelBuffer(\(width)x\(height) \(pixelFormat))", underlying: error)
        }
        self.init(surface: surface, pixelFormat: pixelFormat, attachments: attachments, recycler: nil)
    }

    /// Makes a pixel buffer of a compressed format: one opaque region of `opaqueByteCount` bytes.
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/invalidSize``, ``PixelBufferError/Code-swift.struct/formatMismatch``
    ///   if `compressedFormat` is a base format, ``PixelBufferError/Code-swift.struct/surface``.
    public convenience init(
        width: Int,
        height: Int,
        compressedFormat: PixelFormat,
        opaqueByteCount: Int,
        attachments: PixelBufferAttachments = PixelBufferAttachments()
    ) throws(PixelBufferError) {
        let layout = try Self.opaqueLayout(
            width: width,
            height: height,
            compressedFormat: compressedFormat,
            opaqueByteCount: opaqueByteCount
        )
        let surface: Surface
        // Not populated: a compressed surface is sized for the worst case, and only the bytes used get written.
        do {
            surface = try Surface.makeMemFD(
                layout: layout,
                name: "framebus-\(compressedFormat.name)",
                populatesPages: false
            )
        } catch {
            throw PixelBufferError(.surface, "PixelBuffer(\(width)x\(height) \(compressedFormat))", underlying: error)
        }
        self.init(surface: surface, pixelFormat: compressedFormat, attachments: attachments, recycler: nil)
    }

    /// Wraps an existing surface (for example one imported from another process) as a pixel buffer.
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/unknownPixelFormat``, or
    ///   ``PixelBufferError/Code-swift.struct/formatMismatch`` if the surface's planes do not fit the format.
    public convenience init(
        surface: Surface,
        attachments: PixelBufferAttachments = PixelBufferAttachments()
    ) throws(PixelBufferError) {
        let format = try PixelFormat(fourCC: surface.layout.pixelFormat)
        try Self.check(surface.layout, fits: format)
        self.init(surface: surface, pixelFormat: format, attachments: attachments, recycler: nil)
    }

    /// Wraps an imported surface as a pixel buffer that calls `releaseHandler` when it goes away.
    ///
    /// The handler is called exactly once, when the last reference to the pixel buffer goes away (in its `deinit`),
    /// so whoever keeps the pixel buffer keeps the frame: a consumer that keeps `sampleBuffer.imageBuffer` and drops
    /// the sample buffer still holds the frame, as with CoreVideo. A subscriber uses it to tell the publisher the
    /// frame is released. If the initializer throws, the handler is never called (the caller still owns the
    /// release).
    ///
    /// - Parameters:
    ///   - surface: the surface, for example one from ``Surface/importing(_:)``.
    ///   - attachments: the buffer's attachments.
    ///   - releaseHandler: called once, on the thread that drops the last reference.
    /// - Throws: ``PixelBufferError/Code-swift.struct/unknownPixelFormat``, or
    ///   ``PixelBufferError/Code-swift.struct/formatMismatch`` if the surface's planes do not fit the format.
    public convenience init(
        surface: Surface,
        attachments: PixelBufferAttachments = PixelBufferAttachments(),
        releaseHandler: @escaping @Sendable () -> Void
    ) throws(PixelBufferError) {
        let format = try PixelFormat(fourCC: surface.layout.pixelFormat)
        try Self.check(surface.layout, fits: format)
        self.init(surface: surface, pixelFormat: format, attachments: attachments, recycler: { _ in releaseHandler() })
    }

    /// ``init(surface:attachments:releaseHandler:)`` for a surface already known to fit `pixelFormat`: a subscriber
    /// checks each imported surface once (by making a pixel buffer of it) and wraps it again for every frame, which
    /// then repeats no check. A surface's layout never changes, so the first check holds for its life.
    package convenience init(
        checkedSurface surface: Surface,
        pixelFormat: PixelFormat,
        attachments: PixelBufferAttachments,
        releaseHandler: @escaping @Sendable () -> Void
    ) {
        self.init(surface: surface, pixelFormat: pixelFormat, attachments: attachments, recycler: { _ in releaseHandler() })
    }

    init(
        surface: Surface,
        pixelFormat: PixelFormat,
        attachments: PixelBufferAttachments,
        recycler: (@Sendable (Surface) -> Void)?
    ) {
        self.surface = surface
        self.pixelFormat = pixelFormat
        self.width = surface.layout.width
        self.height = surface.layout.height
        self.attachmentStorage = Mutex(attachments)
        self.recycler = recycler
    }

    deinit {
        recycler?(surface)
    }

    // MARK: Geometry

    /// The number of CPU-accessible planes: 0 for a compressed format.
    public var planeCount: Int { surface.layout.planes.count }

    /// The layout of plane `index`.
    ///
    /// - Precondition: `index < planeCount`.
    public func planeLayout(_ index: Int) -> PlaneLayout { surface.layout.planes[index] }

    /// Bytes per row of plane `index`.
    public func bytesPerRow(ofPlane index: Int) -> Int { planeLayout(index).bytesPerRow }

    /// Width of plane `index` in elements.
    public func width(ofPlane index: Int) -> Int { planeLayout(index).width }

    /// Height of plane `index` in rows.
    public func height(ofPlane index: Int) -> Int { planeLayout(index).height }

    /// Total bytes of the surface.
    public var allocationSize: Int { surface.allocationSize }

    // MARK: Attachments

    /// The attachments; reading and writing are thread-safe.
    public var attachments: PixelBufferAttachments {
        get { attachmentStorage.withLock { $0 } }
        set { attachmentStorage.withLock { $0 = newValue } }
    }

    /// Sets one attachment (`CVBufferSetAttachment`).
    public func setAttachment(_ key: AttachmentKey, _ value: AttachmentValue?, mode: AttachmentMode = .shouldPropagate)
    {
        attachmentStorage.withLock { $0.set(key, value, mode: mode) }
    }

    /// Copies this buffer's propagatable attachments to `destination` (`CVBufferPropagateAttachments`).
    public func propagateAttachments(to destination: PixelBuffer) {
        let propagatable = attachments.propagatable
        destination.attachmentStorage.withLock { $0.merge(propagatable) }
    }

    // MARK: Locking and bytes

    /// Locks the buffer for CPU access (`CVPixelBufferLockBaseAddress`).
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/surface`` wrapping the surface's error (for example a
    ///   read-write lock on a read-only imported buffer).
    public func lock(_ options: Surface.LockOptions = []) throws(PixelBufferError) {
        do { try surface.lock(options) } catch {
            throw PixelBufferError(.surface, "PixelBuffer.lock", underlying: error)
        }
    }

    /// Unlocks the buffer (`CVPixelBufferUnlockBaseAddress`).
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/surface`` for an unbalanced unlock.
    public func unlock(_ options: Surface.LockOptions = []) throws(PixelBufferError) {
        do { try surface.unlock(options) } catch {
            throw PixelBufferError(.surface, "PixelBuffer.unlock", underlying: error)
        }
    }

    /// Locks, calls `body`, and unlocks, even if `body` throws.
    public func withLock<R>(_ options: Surface.LockOptions = [], _ body: () throws -> R) throws -> R {
        try lock(options)
        defer { try? unlock(options) }
        return try body()
    }

    private func checkPlane(_ index: Int, _ operation: String) throws(PixelBufferError) {
        if pixelFormat.isCompressed { throw PixelBufferError(.opaqueFormat, "\(operation) on \(pixelFormat)") }
        guard index >= 0, index < planeCount else {
            throw PixelBufferError(.planeOutOfRange, "\(operation)(ofPlane: \(index)) of \(planeCount)")
        }
        guard surface.isLocked else {
            throw PixelBufferError(
                .surface,
                operation,
                underlying: SurfaceError(code: .notLocked, operation: operation)
            )
        }
    }

    /// Calls `body` with the bytes of plane `index` (`bytesPerRow * height`, row padding included), inside a lock.
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/opaqueFormat`` for a compressed format,
    ///   ``PixelBufferError/Code-swift.struct/planeOutOfRange``, ``PixelBufferError/Code-swift.struct/surface`` if
    ///   not locked; or what `body` throws.
    public func withUnsafeBytes<R>(ofPlane index: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try checkPlane(index, "PixelBuffer.withUnsafeBytes")
        // SAFETY: checkPlane verified the format, the index and the lock; the bytes live as long as self.
        return try unsafe surface.withUnsafeBytes(ofPlane: index, body)
    }

    /// Calls `body` with the writable bytes of plane `index`, inside a read-write lock.
    ///
    /// - Throws: as ``withUnsafeBytes(ofPlane:_:)``, and ``PixelBufferError/Code-swift.struct/surface`` wrapping
    ///   ``SurfaceError/Code-swift.struct/readOnly`` for a read-only buffer.
    public func withUnsafeMutableBytes<R>(
        ofPlane index: Int,
        _ body: (UnsafeMutableRawBufferPointer) throws -> R
    ) throws -> R {
        try checkPlane(index, "PixelBuffer.withUnsafeMutableBytes")
        if surface.isReadOnly {
            throw PixelBufferError(
                .surface,
                "PixelBuffer.withUnsafeMutableBytes",
                underlying: SurfaceError(code: .readOnly, operation: "PixelBuffer.withUnsafeMutableBytes")
            )
        }
        // SAFETY: as above, and the surface is writable.
        return try unsafe surface.withUnsafeMutableBytes(ofPlane: index, body)
    }

    /// Calls `body` with a plane's bytes as a safe span (inside a lock).
    public func withBytes<R>(ofPlane index: Int, _ body: (RawSpan) throws -> R) throws -> R {
        // SAFETY: the span lives only inside the closure, during which the surface stays mapped (self is alive).
        try unsafe withUnsafeBytes(ofPlane: index) { bytes in try body(unsafe RawSpan(_unsafeBytes: bytes)) }
    }

    /// The image bytes packed tightly (no row padding), plane after plane: the layout make_frames.py writes.
    ///
    /// - Throws: as ``withUnsafeBytes(ofPlane:_:)``.
    public func packedBytes() throws -> [UInt8] {
        var result: [UInt8] = []
        for index in 0..<planeCount {
            let plane = planeLayout(index)
            let rowBytes = plane.width * plane.bytesPerElement
            result.reserveCapacity(result.count + rowBytes * plane.height)
            // SAFETY: the rows read lie inside the plane's bytes (bytesPerRow >= rowBytes, checked by the layout).
            try unsafe withUnsafeBytes(ofPlane: index) { bytes in
                for row in 0..<plane.height {
                    unsafe result.append(
                        contentsOf: bytes[(row * plane.bytesPerRow)..<(row * plane.bytesPerRow + rowBytes)]
                    )
                }
            }
        }
        return result
    }
}
