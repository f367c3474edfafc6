import PixelBuffers
import Surfaces
import Testing

@Suite(.timeLimit(.minutes(5))) struct PixelBufferTests {
    @Test(arguments: PixelFormat.baseFormats)
    func planesAreAlignedAndInsideTheSurface(format: PixelFormat) throws {
        let buffer = try PixelBuffer(width: 102, height: 50, pixelFormat: format)
        #expect(buffer.planeCount == format.planes.count)
        for index in 0..<buffer.planeCount {
            let plane = buffer.planeLayout(index)
            #expect(plane.bytesPerRow % 64 == 0)
            #expect(plane.offset % 64 == 0)
            #expect(plane.bytesPerRow >= plane.width * plane.bytesPerElement)
            #expect(plane.offset + plane.byteCount <= buffer.allocationSize)
            #expect(plane.width == 102 / format.planes[index].horizontalSubsampling)
        }
    }

    @Test func customAlignmentIsHonouredAndBadOnesRefused() throws {
        let buffer = try PixelBuffer(width: 100, height: 2, pixelFormat: .bgra8, bytesPerRowAlignment: 256)
        #expect(buffer.bytesPerRow(ofPlane: 0) == 512)
        let tight = try PixelBuffer(
            width: 6,
            height: 2,
            pixelFormat: .yuv420BiPlanarVideoRange8,
            bytesPerRowAlignment: 1
        )
        #expect(tight.bytesPerRow(ofPlane: 0) == 6)
        for alignment in [0, 3, 48, 8192] {
            #expect(throws: PixelBufferError.self) {
                try PixelBuffer(width: 64, height: 64, pixelFormat: .bgra8, bytesPerRowAlignment: alignment)
            }
        }
    }

    @Test(arguments: [(0, 16), (16, 0), (-2, 16), (17, 16), (16, 15), (40000, 16)])
    func badSizesAreTypedErrors(width: Int, height: Int) {
        #expect(throws: PixelBufferError(code: .invalidSize, operation: "PixelBuffer.layout(\(width)x\(height) 420v)"))
        {
            try PixelBuffer(width: width, height: height, pixelFormat: .yuv420BiPlanarVideoRange8)
        }
    }

    @Test func compressedFormatsHaveNoPlanes() throws {
        #expect(throws: PixelBufferError(code: .opaqueFormat, operation: "PixelBuffer.layout(64x64 &8v0)")) {
            try PixelBuffer(width: 64, height: 64, pixelFormat: .compressedYUV420BiPlanarVideoRange8)
        }
        let opaque = try PixelBuffer(
            width: 64,
            height: 64,
            compressedFormat: .compressedYUV420BiPlanarVideoRange8,
            opaqueByteCount: 10_000
        )
        #expect(opaque.planeCount == 0)
        #expect(opaque.allocationSize == 10_000)
        try opaque.lock()
        #expect(throws: PixelBufferError(code: .opaqueFormat, operation: "PixelBuffer.withUnsafeBytes on &8v0")) {
            try unsafe opaque.withUnsafeBytes(ofPlane: 0) { _ in }
        }
        try opaque.unlock()
        #expect(throws: PixelBufferError.self) {
            try PixelBuffer(width: 64, height: 64, compressedFormat: .bgra8, opaqueByteCount: 100)
        }
    }

    @Test func planeAccessNeedsALockAndAValidIndex() throws {
        let buffer = try PixelBuffer(width: 16, height: 16, pixelFormat: .yuv420BiPlanarFullRange8)
        #expect(throws: PixelBufferError.self) { try unsafe buffer.withUnsafeBytes(ofPlane: 0) { _ in } }
        try buffer.lock(.readOnly)
        #expect(
            throws: PixelBufferError(code: .planeOutOfRange, operation: "PixelBuffer.withUnsafeBytes(ofPlane: 2) of 2")
        ) {
            try unsafe buffer.withUnsafeBytes(ofPlane: 2) { _ in }
        }
        #expect(try unsafe buffer.withUnsafeBytes(ofPlane: 1) { $0.count } == 64 * 8)
        try buffer.unlock(.readOnly)
    }

    @Test func packedBytesDropRowPadding() throws {
        let buffer = try PixelBuffer(width: 4, height: 2, pixelFormat: .yuv420BiPlanarVideoRange8)
        try buffer.lock()
        try unsafe buffer.withUnsafeMutableBytes(ofPlane: 0) { bytes in
            for index in 0..<bytes.count { unsafe bytes[index] = UInt8(index % 64) }
        }
        try unsafe buffer.withUnsafeMutableBytes(ofPlane: 1) { bytes in
            for index in 0..<bytes.count { unsafe bytes[index] = UInt8(200 + index % 50) }
        }
        try buffer.unlock()
        try buffer.lock(.readOnly)
        #expect(try buffer.packedBytes() == [0, 1, 2, 3, 0, 1, 2, 3, 200, 201, 202, 203])
        try buffer.unlock(.readOnly)
    }

    @Test func importedSurfaceBecomesAReadOnlyPixelBuffer() throws {
        let buffer = try PixelBuffer(width: 32, height: 16, pixelFormat: .yuv420BiPlanarVideoRange10)
        let imported = try PixelBuffer(surface: try Surface.importing(try buffer.surface.makeHandle()))
        #expect(imported.pixelFormat == .yuv420BiPlanarVideoRange10)
        #expect(imported.width == 32 && imported.height == 16)
        #expect(throws: PixelBufferError.self) { try imported.lock() }
        try imported.lock(.readOnly)
        #expect(throws: PixelBufferError.self) { try unsafe imported.withUnsafeMutableBytes(ofPlane: 0) { _ in } }
        try imported.unlock(.readOnly)
    }

    @Test func attachmentsPropagateOnlyWhenAsked() throws {
        let source = try PixelBuffer(width: 16, height: 16, pixelFormat: .bgra8, attachments: .bt709)
        source.setAttachment("com.example.exposure", .double(0.01), mode: .shouldNotPropagate)
        source.setAttachment("com.example.scene", .string("kitchen"))
        source.attachments.cleanAperture = CleanAperture(width: 14, height: 14, horizontalOffset: 1)
        let destination = try PixelBuffer(width: 16, height: 16, pixelFormat: .bgra8)
        source.propagateAttachments(to: destination)
        let copied = destination.attachments
        #expect(copied.colorPrimaries == .itu709 && copied.yCbCrMatrix == .itu709 && copied.transferFunction == .itu709)
        #expect(copied.chromaLocationTopField == .center)
        #expect(copied["com.example.scene"] == .string("kitchen"))
        #expect(copied["com.example.exposure"] == nil)
        #expect(copied.cleanAperture == CleanAperture(width: 14, height: 14, horizontalOffset: 1))
        #expect(source.attachments.mode(of: "com.example.exposure") == .shouldNotPropagate)
    }
}

@Suite(.timeLimit(.minutes(5))) struct PixelBufferPoolTests {
    private func attributes(minimum: Int = 0, threshold: Int? = nil, age: Duration? = nil) -> PixelBufferPool.Attributes
    {
        PixelBufferPool.Attributes(
            width: 64,
            height: 32,
            pixelFormat: .yuv420BiPlanarVideoRange8,
            minimumBufferCount: minimum,
            maximumBufferAge: age,
            allocationThreshold: threshold
        )
    }

    @Test func minimumBuffersArePreallocated() throws {
        let pool = try PixelBufferPool(attributes: attributes(minimum: 3))
        #expect(pool.allocatedBufferCount == 3 && pool.idleBufferCount == 3)
    }

    @Test func surfacesAreRecycledWhenTheLastReferenceGoes() throws {
        let pool = try PixelBufferPool(attributes: attributes(minimum: 1))
        var buffer: PixelBuffer? = try pool.makePixelBuffer()
        let id = buffer!.surface.id
        #expect(pool.inUseBufferCount == 1)
        buffer = nil
        #expect(pool.inUseBufferCount == 0)
        let again = try pool.makePixelBuffer()
        #expect(again.surface.id == id)
        #expect(pool.allocatedBufferCount == 1)
    }

    @Test func thresholdRefusesWithWouldExceedAllocationThreshold() throws {
        let pool = try PixelBufferPool(attributes: attributes(minimum: 1, threshold: 2))
        let first = try pool.makePixelBuffer()
        var second: PixelBuffer? = try pool.makePixelBuffer()
        #expect(throws: PixelBufferError.self) { try pool.makePixelBuffer() }
        do {
            _ = try pool.makePixelBuffer()
        } catch {
            #expect(error.code == .wouldExceedAllocationThreshold)
        }
        second = nil
        let third = try pool.makePixelBuffer()
        #expect(third.surface.id != first.surface.id)
        _ = second
    }

    @Test func idleBuffersOlderThanTheMaximumAgeAreFreed() async throws {
        let pool = try PixelBufferPool(attributes: attributes(minimum: 1, age: .milliseconds(20)))
        var buffers: [PixelBuffer] = try (0..<4).map { _ in try pool.makePixelBuffer() }
        #expect(pool.allocatedBufferCount == 4)
        buffers.removeAll()
        #expect(pool.idleBufferCount == 4)
        try await Task.sleep(for: .milliseconds(60))
        _ = try pool.makePixelBuffer()
        // The old idle buffers beyond the minimum were freed; one is in use again.
        #expect(pool.allocatedBufferCount <= 2)
        pool.flush(all: true)
        #expect(pool.idleBufferCount == 0)
    }

    @Test func recycledBuffersStartWithThePoolsAttachments() throws {
        var attributes = attributes(minimum: 1)
        attributes.attachments = .bt709
        let pool = try PixelBufferPool(attributes: attributes)
        var buffer: PixelBuffer? = try pool.makePixelBuffer()
        buffer!.setAttachment("custom", .integer(1))
        buffer = nil
        let reused = try pool.makePixelBuffer()
        #expect(reused.attachments["custom"] == nil)
        #expect(reused.attachments.colorPrimaries == .itu709)
    }

    @Test func badCountsAreRefused() {
        #expect(throws: PixelBufferError.self) { try PixelBufferPool(attributes: attributes(minimum: 3, threshold: 2)) }
        #expect(throws: PixelBufferError.self) { try PixelBufferPool(attributes: attributes(minimum: -1)) }
    }
}
