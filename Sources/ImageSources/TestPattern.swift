import PixelBuffers

/// A synthetic, moving test picture for demos, the bus and benchmarks: no files needed.
///
/// The picture, top to bottom:
/// - two thirds: eight 75 % colour bars (white, yellow, cyan, green, magenta, red, blue, black), with an orange
///   square that moves 8 pixels right and 2 pixels down every frame (wrapping);
/// - one sixth: eight grey steps from black to white;
/// - one sixth: a frame counter, the low 32 bits of the frame index in binary, most significant bit first
///   (white cell = 1, black cell = 0).
///
/// Every edge lies on an even pixel coordinate, so each 2×2 block is one colour: the Y'CbCr codes are those of
/// the exact converter (``RGBImage/convertedBytes(to:)``) for a few colours, computed once. ``fill(_:frameIndex:)``
/// therefore writes exactly what converting ``RGBImage/testPattern(width:height:frameIndex:)`` would give, but with
/// row copies instead of per-pixel float maths (a 1080p frame is a few thousand `memcpy`s).
///
/// ```swift
/// let pattern = try TestPattern(width: 1920, height: 1080, pixelFormat: .yuv420BiPlanarVideoRange8)
/// let buffer = try pool.makePixelBuffer()
/// try buffer.lock()
/// try pattern.fill(buffer, frameIndex: n)
/// try buffer.unlock()
/// ```
public struct TestPattern: Sendable {
    /// The width in pixels.
    public let width: Int
    /// The height in pixels.
    public let height: Int
    /// The base format the pattern is written in.
    public let pixelFormat: PixelFormat

    private let geometry: TestPatternGeometry
    /// `elements[colour][plane]`: the bytes of one element of that plane for a block of that colour.
    private let elements: [[[UInt8]]]
    /// `templates[plane]`: the bars row and the grey-steps row of each plane.
    private let barsRows: [[UInt8]]
    private let stepsRows: [[UInt8]]

    /// Prepares the pattern for one size and format.
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/opaqueFormat`` for a compressed format,
    ///   ``PixelBufferError/Code-swift.struct/invalidSize`` if the format does not allow the size.
    public init(width: Int, height: Int, pixelFormat: PixelFormat) throws(PixelBufferError) {
        let operation = "TestPattern(\(width)x\(height) \(pixelFormat))"
        if pixelFormat.isCompressed { throw PixelBufferError(.opaqueFormat, operation) }
        guard pixelFormat.isValidSize(width: width, height: height) else {
            throw PixelBufferError(.invalidSize, operation)
        }
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        geometry = TestPatternGeometry(width: width, height: height)
        let planes = pixelFormat.planes
        elements = TestPatternGeometry.colours.map { colour in
            let block = RGBImage(
                uncheckedWidth: 2,
                height: 2,
                pixels: Array([[UInt8]](repeating: colour, count: 4).joined())
            )
            let bytes = block.convertedBytes(to: pixelFormat)
            let lumaBytes = 4 * planes[0].bytesPerElement
            return planes.indices.map { index in
                index == 0
                    ? Array(bytes[0..<planes[0].bytesPerElement])
                    : Array(bytes[lumaBytes..<(lumaBytes + planes[index].bytesPerElement)])
            }
        }
        let geometry = geometry
        let elements = elements
        barsRows = planes.indices.map {
            Self.row(geometry.barRuns, plane: planes[$0], planeIndex: $0, width: width, elements: elements)
        }
        stepsRows = planes.indices.map {
            Self.row(geometry.stepRuns, plane: planes[$0], planeIndex: $0, width: width, elements: elements)
        }
    }

    private static func row(
        _ runs: [TestPatternGeometry.Run],
        plane: PixelFormat.Plane,
        planeIndex: Int,
        width: Int,
        elements: [[[UInt8]]]
    ) -> [UInt8] {
        let elementCount = width / plane.horizontalSubsampling
        var bytes: [UInt8] = []
        bytes.reserveCapacity(elementCount * plane.bytesPerElement)
        for run in runs {
            let first = min(elementCount, (run.start + plane.horizontalSubsampling - 1) / plane.horizontalSubsampling)
            let end = min(elementCount, (run.end + plane.horizontalSubsampling - 1) / plane.horizontalSubsampling)
            let element = elements[run.colour][planeIndex]
            for _ in first..<max(first, end) { bytes += element }
        }
        return bytes
    }

    /// Writes frame `frameIndex` of the pattern into `buffer`, which the caller has locked read-write.
    ///
    /// - Parameters:
    ///   - buffer: A buffer of this pattern's size and format.
    ///   - frameIndex: Any integer; the counter shows its low 32 bits, the square's position wraps.
    /// - Throws: ``PixelBufferError/Code-swift.struct/formatMismatch`` for another size or format,
    ///   ``PixelBufferError/Code-swift.struct/opaqueFormat`` for a compressed buffer,
    ///   ``PixelBufferError/Code-swift.struct/surface`` if the buffer is not locked or is read-only.
    public func fill(_ buffer: PixelBuffer, frameIndex: Int) throws(PixelBufferError) {
        let operation = "TestPattern.fill"
        if buffer.pixelFormat.isCompressed {
            throw PixelBufferError(.opaqueFormat, "\(operation) on \(buffer.pixelFormat)")
        }
        guard buffer.width == width, buffer.height == height, buffer.pixelFormat == pixelFormat else {
            throw PixelBufferError(
                .formatMismatch,
                "\(operation): buffer \(buffer.width)x\(buffer.height) \(buffer.pixelFormat), pattern \(width)x\(height) \(pixelFormat)"
            )
        }
        let planes = pixelFormat.planes
        let geometry = geometry
        let counterRuns = geometry.counterRuns(frameIndex: frameIndex)
        let square = geometry.square(frameIndex: frameIndex)
        var work: [(templates: [[UInt8]], overlay: [UInt8], overlayOffset: Int, overlayRows: Range<Int>)] = []
        for (index, plane) in planes.enumerated() {
            let counterRow = Self.row(counterRuns, plane: plane, planeIndex: index, width: width, elements: elements)
            var overlay: [UInt8] = []
            var overlayOffset = 0
            var overlayRows = 0..<0
            if let square {
                let element = elements[TestPatternGeometry.squareColour][index]
                for _ in 0..<(square.side / plane.horizontalSubsampling) { overlay += element }
                overlayOffset = square.x / plane.horizontalSubsampling * plane.bytesPerElement
                overlayRows =
                    (square.y / plane.verticalSubsampling)..<((square.y + square.side) / plane.verticalSubsampling)
            }
            work.append(([barsRows[index], stepsRows[index], counterRow], overlay, overlayOffset, overlayRows))
        }
        let bytesPerRow = (0..<planes.count).map { buffer.bytesPerRow(ofPlane: $0) }
        // SAFETY: `fillPlane` checks that each template and the overlay fit in a row, and writes `rowCount` rows of
        // the plane that `withMutablePlanes` hands over (bytesPerRow × plane height bytes).
        try unsafe ImageConversion.withMutablePlanes(of: buffer, operation: operation) { pointers in
            for (index, plane) in planes.enumerated() {
                let subsampling = plane.verticalSubsampling
                unsafe ImageConversion.fillPlane(
                    pointers[index],
                    bytesPerRow: bytesPerRow[index],
                    rowCount: height / subsampling,
                    templates: work[index].templates,
                    templateIndex: { geometry.band(ofRow: $0 * subsampling) },
                    overlay: work[index].overlay,
                    overlayOffset: work[index].overlayOffset,
                    overlayRows: work[index].overlayRows
                )
            }
        }
    }

    /// Writes frame `frameIndex` into `buffer` (locked read-write), preparing a pattern for its size and format.
    ///
    /// Convenient for one-off frames; a producer filling many frames keeps a ``TestPattern`` instead.
    ///
    /// - Throws: as ``init(width:height:pixelFormat:)`` and ``fill(_:frameIndex:)``.
    public static func fill(_ buffer: PixelBuffer, frameIndex: Int) throws(PixelBufferError) {
        try TestPattern(width: buffer.width, height: buffer.height, pixelFormat: buffer.pixelFormat)
            .fill(buffer, frameIndex: frameIndex)
    }
}

extension RGBImage {
    /// Frame `frameIndex` of the moving test pattern (``TestPattern`` describes it) as an RGB image.
    ///
    /// Consecutive frames differ (the counter changes every frame, the square moves). Converting the result with
    /// ``convertedBytes(to:)`` gives exactly what ``TestPattern/fill(_:frameIndex:)`` writes.
    ///
    /// - Throws: ``PixelBufferError/Code-swift.struct/invalidSize`` if a dimension is not positive or exceeds
    ///   ``PixelFormat/maximumDimension``.
    public static func testPattern(width: Int, height: Int, frameIndex: Int) throws(PixelBufferError) -> RGBImage {
        guard width > 0, height > 0, width <= PixelFormat.maximumDimension, height <= PixelFormat.maximumDimension
        else {
            throw PixelBufferError(.invalidSize, "RGBImage.testPattern(width: \(width), height: \(height))")
        }
        let geometry = TestPatternGeometry(width: width, height: height)
        func row(_ runs: [TestPatternGeometry.Run]) -> [UInt8] {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(width * 3)
            for run in runs {
                for _ in run.start..<run.end { bytes += TestPatternGeometry.colours[run.colour] }
            }
            return bytes
        }
        let rows = [row(geometry.barRuns), row(geometry.stepRuns), row(geometry.counterRuns(frameIndex: frameIndex))]
        var pixels: [UInt8] = []
        pixels.reserveCapacity(width * height * 3)
        for y in 0..<height { pixels += rows[geometry.band(ofRow: y)] }
        if let square = geometry.square(frameIndex: frameIndex) {
            let colour = TestPatternGeometry.colours[TestPatternGeometry.squareColour]
            let segment = Array([[UInt8]](repeating: colour, count: square.side).joined())
            for y in square.y..<(square.y + square.side) {
                let start = (y * width + square.x) * 3
                pixels.replaceSubrange(start..<(start + segment.count), with: segment)
            }
        }
        return RGBImage(uncheckedWidth: width, height: height, pixels: pixels)
    }
}

/// Where things are in the test pattern; shared by the RGB renderer and the direct writer so they agree.
struct TestPatternGeometry: Sendable {
    struct Run: Sendable {
        var start: Int
        var end: Int
        var colour: Int
    }

    /// 0–7: 75 % bars; 8–15: grey steps; 16: the square.
    static let colours: [[UInt8]] =
        [
            [191, 191, 191], [191, 191, 0], [0, 191, 191], [0, 191, 0], [191, 0, 191], [191, 0, 0], [0, 0, 191],
            [0, 0, 0],
        ] + (0..<8).map { step in [UInt8](repeating: UInt8(step * 255 / 7), count: 3) } + [[255, 128, 0]]
    static let squareColour = 16
    static let counterZero = 8
    static let counterOne = 15

    let width: Int
    let height: Int
    /// Rows `0..<barsEnd` are bars, `barsEnd..<stepsEnd` grey steps, the rest the counter; all even.
    let barsEnd: Int
    let stepsEnd: Int
    let barRuns: [Run]
    let stepRuns: [Run]
    let squareSide: Int

    init(width: Int, height: Int) {
        self.width = width
        self.height = height
        barsEnd = (height * 2 / 3) & ~1
        stepsEnd = (height * 5 / 6) & ~1
        barRuns = Self.runs(count: 8, width: width) { $0 }
        stepRuns = Self.runs(count: 8, width: width) { 8 + $0 }
        squareSide = max(2, (min(width, barsEnd) / 5) & ~1)
    }

    /// `count` runs across `width`, every edge but the last on an even column.
    static func runs(count: Int, width: Int, colour: (Int) -> Int) -> [Run] {
        (0..<count).map { index in
            let start = (index * width / count) & ~1
            let end = index == count - 1 ? width : ((index + 1) * width / count) & ~1
            return Run(start: start, end: max(start, end), colour: colour(index))
        }
    }

    func counterRuns(frameIndex: Int) -> [Run] {
        let bits = UInt64(bitPattern: Int64(frameIndex))
        return Self.runs(count: 32, width: width) { cell in
            (bits >> UInt64(31 - cell)) & 1 == 1 ? Self.counterOne : Self.counterZero
        }
    }

    /// 0 (bars), 1 (steps) or 2 (counter).
    func band(ofRow y: Int) -> Int { y < barsEnd ? 0 : (y < stepsEnd ? 1 : 2) }

    /// The square's top-left corner (even) for a frame, or `nil` if the bars band is too small for it.
    func square(frameIndex: Int) -> (x: Int, y: Int, side: Int)? {
        let maxX = (width & ~1) - squareSide
        let maxY = barsEnd - squareSide
        guard maxX >= 0, maxY >= 0 else { return nil }
        func wrapped(_ value: Int, _ positions: Int) -> Int { ((value % positions) + positions) % positions }
        let x = wrapped(frameIndex, maxX / 8 + 1) * 8
        let y = wrapped(frameIndex, maxY / 2 + 1) * 2
        return (x, y, squareSide)
    }
}
