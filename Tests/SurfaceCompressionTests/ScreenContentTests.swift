import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// Screen content: packed residuals through LZ4 (mode packed8LZ4, layout version 3; packed10LZ4 and packed16LZ4,
/// version 4), LZ4's HC match search on the LZ4 winners, and how the layout version a surface states follows from
/// the modes it uses.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct ScreenContentTests {
    static let eightBitFormats: [PixelFormat] = [.yuv420BiPlanarVideoRange8, .yuv420BiPlanarFullRange8, .bgra8]

    static func compress(
        _ bytes: [UInt8],
        _ format: PixelFormat,
        width: Int,
        height: Int,
        tiles: SurfaceCodec.TileSize = .init(width: nil, height: 64),
        layoutVersion: Int = 5,
        effort: SurfaceCodec.Effort = .best
    ) throws -> (source: PixelBuffer, compressed: PixelBuffer, statistics: SurfaceCodec.Statistics) {
        let source = try makeBuffer(bytes, width: width, height: height, format: format)
        let compressed = try SurfaceCodec.makeCompressedBuffer(
            width: width,
            height: height,
            format: format,
            tileSize: tiles
        )
        // Version 5 unless asked: these tests are about the modes up to version 5, whose LZ4 blocks version 6 may
        // store with coded literals (CodedLiteralsTests).
        // Effort best unless asked: these tests are about the modes and their decoder, on the blocks the HC search
        // makes (their sizes and thresholds were measured on them); EncoderEffortTests covers the fast encoder.
        var options = SurfaceCodec.Options(tileSize: tiles, effort: effort)
        options.layoutVersion = layoutVersion
        let statistics = try SurfaceCodec.compress(source, into: compressed, options: options)
        return (source, compressed, statistics)
    }

    /// Tiles of 256 rows: the 256-row images of the version 3 and 4 tests are one band, with no tile above.
    static let oneBand = SurfaceCodec.TileSize(width: nil, height: 256)
    /// Tiles of 320 × 64: two across a 640-wide image, where the encoder does not try the Up modes (bands only).
    static let twoAcross = SurfaceCodec.TileSize(width: 320, height: 64)

    static func statedVersion(_ compressed: PixelBuffer) throws -> UInt16 {
        try compressed.lock([.readOnly])
        defer { try? compressed.unlock([.readOnly]) }
        return compressed.surface.withUnsafeBytes { $0.load(fromByteOffset: 4, as: UInt16.self) }
    }

    @Test(arguments: eightBitFormats)
    func screenContentUsesPackedResidualsThroughLZ4AndDecodesExactly(_ format: PixelFormat) throws {
        let bytes = screenBytes(format, width: 640, height: 256, seed: 1)
        // One band: no tile above, so no Up mode of version 5 (TileAboveTests).
        let (_, compressed, _) = try Self.compress(bytes, format, width: 640, height: 256, tiles: Self.oneBand)
        let modes = try SurfaceCodec.modeCounts(of: compressed)
        #expect(modes["packed8LZ4", default: 0] > 0, "\(modes)")
        #expect(try Self.statedVersion(compressed) == 3)
        for threads in [1, 2] {
            let output = try PixelBuffer(width: 640, height: 256, pixelFormat: format)
            try SurfaceCodec.decompress(compressed, into: output, options: .split(threads))
            #expect(try packed(output) == bytes)
        }
    }

    /// Y components stored as LZ4 or packed residuals go straight into the output plane when its rows are
    /// contiguous (640 wide) and through the scratch when they are padded (600 wide, rows of 640 bytes): both exact,
    /// whole-frame and tile row by tile row (where the plane is a small scratch buffer).
    @Test(arguments: [640, 600])
    func screenContentDecodesExactlyIntoPlanesWithAndWithoutRowPadding(width: Int) throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let height = 192
        let bytes = screenBytes(format, width: width, height: height, seed: 4)
        let (_, compressed, _) = try Self.compress(bytes, format, width: width, height: height)
        let modes = try SurfaceCodec.modeCounts(of: compressed)
        #expect(modes["lz4", default: 0] + modes["packed8LZ4", default: 0] > 0, "\(modes)")
        let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
        #expect((output.bytesPerRow(ofPlane: 0) == width) == (width % 64 == 0))
        try SurfaceCodec.decompress(compressed, into: output)
        #expect(try packed(output) == bytes)
        let scratch = try PixelBuffer(width: width, height: 64, pixelFormat: format)
        var assembled = [[UInt8]](repeating: [], count: 2)
        try SurfaceCodec.decodeTileRows(of: compressed, into: scratch) { rows in
            for (index, plane) in format.planes.enumerated() {
                let rowBytes = width / plane.horizontalSubsampling * plane.bytesPerElement
                let bytesPerRow = scratch.bytesPerRow(ofPlane: index)
                try? scratch.withUnsafeBytes(ofPlane: index) { planeBytes in
                    for row in 0..<rows.count / plane.verticalSubsampling {
                        assembled[index] += planeBytes[row * bytesPerRow..<row * bytesPerRow + rowBytes]
                    }
                }
            }
        }
        #expect(assembled.flatMap { $0 } == bytes)
    }

    /// A 10-bit Y stored as packed10 (through LZ4 or not) goes straight into the output plane when the band's width
    /// is a multiple of 8, whether the plane's rows are contiguous (640 wide) or padded (600 wide), and through the
    /// scratch otherwise (604 wide): all exact, whole-frame on 1 and 2 threads (neighbouring bands decoded at once
    /// must not touch each other's rows) and tile row by tile row (where the plane is a small scratch buffer).
    @Test(arguments: [640, 600, 604])
    func tenBitScreenContentDecodesExactlyIntoPlanesWithAndWithoutRowPadding(width: Int) throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange10
        let height = 64 * 5
        let bytes = screenBytes(format, width: width, height: height, seed: 8)
        let (_, compressed, _) = try Self.compress(bytes, format, width: width, height: height)
        let modes = try SurfaceCodec.modeCounts(of: compressed)
        #expect(modes.filter { $0.key.hasPrefix("packed10") }.map(\.value).reduce(0, +) > 0, "\(modes)")
        for threads in [1, 2] {
            let output = try PixelBuffer(width: width, height: height, pixelFormat: format)
            try SurfaceCodec.decompress(compressed, into: output, options: .split(threads))
            #expect(try packed(output) == bytes, "\(threads) threads")
        }
        let scratch = try PixelBuffer(width: width, height: 64, pixelFormat: format)
        var assembled = [[UInt8]](repeating: [], count: 2)
        try SurfaceCodec.decodeTileRows(of: compressed, into: scratch) { rows in
            for (index, plane) in format.planes.enumerated() {
                let rowBytes = width / plane.horizontalSubsampling * plane.bytesPerElement
                let bytesPerRow = scratch.bytesPerRow(ofPlane: index)
                try? scratch.withUnsafeBytes(ofPlane: index) { planeBytes in
                    for row in 0..<rows.count / plane.verticalSubsampling {
                        assembled[index] += planeBytes[row * bytesPerRow..<row * bytesPerRow + rowBytes]
                    }
                }
            }
        }
        #expect(assembled.flatMap { $0 } == bytes)
    }

    /// A surface that needs no version 3 mode says version 2, so decoders that know only version 2 read it.
    @Test func aSurfaceWithoutPackedResidualsThroughLZ4SaysVersion2() throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let bytes = syntheticBytes(format, width: 128, height: 64, seed: 7, noise: 16)
        let (_, compressed, _) = try Self.compress(bytes, format, width: 128, height: 64)
        #expect(try SurfaceCodec.modeCounts(of: compressed)["packed8LZ4"] == nil)
        #expect(try Self.statedVersion(compressed) == 2)
        let output = try PixelBuffer(width: 128, height: 64, pixelFormat: format)
        try SurfaceCodec.decompress(compressed, into: output)
        #expect(try packed(output) == bytes)
    }

    /// Mode 6 exists only from version 3: the same table under a version 2 header is refused.
    @Test func packedResidualsThroughLZ4InAVersion2SurfaceAreRefused() throws {
        let format = PixelFormat.bgra8
        let (_, compressed, _) = try Self.compress(
            screenBytes(format, width: 320, height: 128, seed: 2),
            format,
            width: 320,
            height: 128,
            tiles: Self.oneBand
        )
        #expect(try Self.statedVersion(compressed) == 3)
        try DamagedSurfaceTests.damage(compressed, reseal: true) {
            $0.storeBytes(of: UInt16(2), toByteOffset: 4, as: UInt16.self)
        }
        try DamagedSurfaceTests.expectDecode(compressed, fails: .invalidTileMode)
    }

    /// The LZ4 stream of a packed8LZ4 entry must give exactly a packed payload: relabelled entries (an LZ4 of raw
    /// samples read as packed residuals, and the reverse) and a broken LZ4 stream are corrupt, never decoded.
    @Test func packedResidualsThroughLZ4ThatAreNotAPackedPayloadAreCorrupt() throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let bytes = screenBytes(format, width: 640, height: 256, seed: 3)
        for (from, to) in [(TileMode.packed8LZ4, TileMode.lz4), (.lz4, .packed8LZ4)] {
            let (_, compressed, _) = try Self.compress(bytes, format, width: 640, height: 256, tiles: Self.twoAcross)
            var relabelled = 0
            try DamagedSurfaceTests.damage(compressed, reseal: true) { surface in
                let entries = Int(surface.load(fromByteOffset: 28, as: UInt32.self))
                for index in 0..<entries where surface[DamagedSurfaceTests.modeOffset(index)] == from.rawValue {
                    surface[DamagedSurfaceTests.modeOffset(index)] = to.rawValue
                    relabelled += 1
                }
            }
            #expect(relabelled > 0, "no \(from) entry to relabel")
            try DamagedSurfaceTests.expectDecode(compressed, fails: .corruptPayload, verifiesChecksums: false)
        }
        let (_, compressed, _) = try Self.compress(bytes, format, width: 640, height: 256, tiles: Self.twoAcross)
        var damaged = false
        try DamagedSurfaceTests.damage(compressed) { surface in
            let entries = Int(surface.load(fromByteOffset: 28, as: UInt32.self))
            for index in 0..<entries
            where !damaged && surface[DamagedSurfaceTests.modeOffset(index)] == TileMode.packed8LZ4.rawValue {
                surface[DamagedSurfaceTests.payloadOffset(surface, entry: index, entryCount: entries)] = 0xFF
                damaged = true
            }
        }
        #expect(damaged)
        try DamagedSurfaceTests.expectDecode(compressed, fails: .corruptPayload, verifiesChecksums: false)
        try DamagedSurfaceTests.expectDecode(compressed, fails: .checksumMismatch)
    }

    static let sixteenBitFormats: [PixelFormat] = [.yuv420BiPlanarVideoRange10, .yuv420BiPlanarFullRange10]

    /// 10-bit screen content (padding bits zero) takes packed10LZ4, says version 4, and decodes exactly with 1 and 2
    /// threads; with every padding bit set it takes packed16LZ4 instead.
    @Test(arguments: sixteenBitFormats)
    func tenBitScreenContentUsesPackedResidualsThroughLZ4AndDecodesExactly(_ format: PixelFormat) throws {
        for padded in [false, true] {
            var bytes = screenBytes(format, width: 640, height: 256, seed: 5)
            if padded {
                for index in stride(from: 0, to: bytes.count, by: 2) { bytes[index] |= 0x3F }
            }
            let (_, compressed, _) = try Self.compress(bytes, format, width: 640, height: 256, tiles: Self.oneBand)
            let modes = try SurfaceCodec.modeCounts(of: compressed)
            #expect(modes[padded ? "packed16LZ4" : "packed10LZ4", default: 0] > 0, "\(modes)")
            #expect(modes[padded ? "packed10LZ4" : "packed16LZ4"] == nil, "\(modes)")
            #expect(try Self.statedVersion(compressed) == 4)
            for threads in [1, 2] {
                let output = try PixelBuffer(width: 640, height: 256, pixelFormat: format)
                try SurfaceCodec.decompress(compressed, into: output, options: .split(threads))
                #expect(try packed(output) == bytes)
            }
        }
    }

    /// Modes 7 and 8 exist only from version 4: the same table under a version 3 header is refused.
    @Test func tenBitPackedResidualsThroughLZ4InAVersion3SurfaceAreRefused() throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange10
        let (_, compressed, _) = try Self.compress(
            screenBytes(format, width: 320, height: 128, seed: 6),
            format,
            width: 320,
            height: 128,
            tiles: Self.oneBand
        )
        #expect(try Self.statedVersion(compressed) == 4)
        try DamagedSurfaceTests.damage(compressed, reseal: true) {
            $0.storeBytes(of: UInt16(3), toByteOffset: 4, as: UInt16.self)
        }
        try DamagedSurfaceTests.expectDecode(compressed, fails: .invalidTileMode)
    }

    /// packed10LZ4 entries relabelled as lz4 (an LZ4 stream of the wrong length) or as packed10 (LZ4 bytes read as
    /// a packed payload), and a broken LZ4 stream in a packed10LZ4 entry, are corrupt (or fail their checksum),
    /// never decoded.
    @Test func tenBitPackedResidualsThroughLZ4ThatAreNotAPackedPayloadAreCorrupt() throws {
        let format = PixelFormat.yuv420BiPlanarVideoRange10
        let bytes = screenBytes(format, width: 640, height: 256, seed: 8)
        for (from, to) in [(TileMode.packed10LZ4, TileMode.lz4), (.packed10LZ4, .packed10)] {
            let (_, compressed, _) = try Self.compress(bytes, format, width: 640, height: 256)
            var relabelled = 0
            try DamagedSurfaceTests.damage(compressed, reseal: true) { surface in
                let entries = Int(surface.load(fromByteOffset: 28, as: UInt32.self))
                for index in 0..<entries where surface[DamagedSurfaceTests.modeOffset(index)] == from.rawValue {
                    surface[DamagedSurfaceTests.modeOffset(index)] = to.rawValue
                    relabelled += 1
                }
            }
            #expect(relabelled > 0, "no \(from) entry to relabel")
            try DamagedSurfaceTests.expectDecode(compressed, fails: .corruptPayload, verifiesChecksums: false)
        }
        let (_, compressed, _) = try Self.compress(bytes, format, width: 640, height: 256)
        var damaged = false
        try DamagedSurfaceTests.damage(compressed) { surface in
            let entries = Int(surface.load(fromByteOffset: 28, as: UInt32.self))
            for index in 0..<entries
            where !damaged && surface[DamagedSurfaceTests.modeOffset(index)] == TileMode.packed10LZ4.rawValue {
                surface[DamagedSurfaceTests.payloadOffset(surface, entry: index, entryCount: entries)] = 0xFF
                damaged = true
            }
        }
        #expect(damaged)
        try DamagedSurfaceTests.expectDecode(compressed, fails: .corruptPayload, verifiesChecksums: false)
        try DamagedSurfaceTests.expectDecode(compressed, fails: .checksumMismatch)
    }

    /// The HC match search on the LZ4 winners: never larger than the fast search, smaller on this screen content,
    /// and its output decodes to exactly the samples (through the same packed8 decoder).
    @Test func theHCMatchSearchShrinksLZ4WinnersAndDecodesExactly() throws {
        let width = 640
        let height = 64
        let bytes = screenBytes(.yuv420BiPlanarVideoRange8, width: width, height: height, seed: 9)
        let stride = (width + 16) * height * 2 + 128
        func slot() -> UnsafeMutableRawPointer { .allocate(byteCount: stride, alignment: 64) }
        let slots = (0..<5).map { _ in slot() }
        let state = UnsafeMutableRawPointer.allocate(byteCount: LZ4Block.highCompressionStateByteCount, alignment: 64)
        defer {
            slots.forEach { $0.deallocate() }
            state.deallocate()
        }
        func encode(_ highCompression: Bool) -> (mode: TileMode, payload: [UInt8]) {
            slots[0].copyMemory(from: bytes, byteCount: width * height)  // the Y plane comes first
            let choice = ComponentCodec.encode8(
                samples: slots[0].assumingMemoryBound(to: UInt8.self),
                width: width,
                height: height,
                residuals: slots[1].assumingMemoryBound(to: UInt8.self),
                residuals2: slots[2].assumingMemoryBound(to: UInt8.self),
                packed: slots[3],
                alternative: slots[4],
                highCompressionState: highCompression ? state : nil
            )
            return (choice.mode, Array(UnsafeRawBufferPointer(start: choice.payload, count: choice.byteCount)))
        }
        let fast = encode(false)
        let searched = encode(true)
        #expect([TileMode.lz4, .packed8LZ4].contains(fast.mode))
        #expect(searched.mode == fast.mode)
        #expect(searched.payload.count < fast.payload.count)
        // Decode the HC payload by hand: LZ4, then (packed8LZ4) the packed8 decoder.
        var decoded = [UInt8](repeating: 0, count: ComponentCodec.maximumPacked8ByteCount(width: width, height: height))
        let count = LZ4Block.decompress(searched.payload, count: searched.payload.count, into: &decoded)
        #expect(count > 0)
        if searched.mode == .lz4 {
            #expect(Array(decoded[..<count]) == Array(bytes[..<(width * height)]))
        } else {
            let controls = slot()
            let samples = slot()
            defer {
                controls.deallocate()
                samples.deallocate()
            }
            let valid = decoded.withUnsafeBytes {
                ComponentCodec.decodePacked8(
                    $0.baseAddress!,
                    count: count,
                    width: width,
                    height: height,
                    controls: controls.assumingMemoryBound(to: UInt8.self),
                    controlsCapacity: stride,
                    into: samples.assumingMemoryBound(to: UInt8.self),
                    capacity: stride
                )
            }
            #expect(valid)
            #expect(Array(UnsafeRawBufferPointer(start: samples, count: width * height)) == Array(bytes[..<(width * height)]))
        }
    }
}

/// The screen image of the version-6 tests (CodedLiteralsTests, OutsideDecoderTests): eleven 64-row bands, 640
/// wide (screenBytes, seed 31), compressed at layout version 6, which gives coded-literal entries in every format.
struct CodedScreen {
    static let width = 640
    static let height = 64 * 11

    let bytes: [UInt8]
    let compressed: PixelBuffer
    let statistics: SurfaceCodec.Statistics

    /// Compresses the image in `format` and checks that the surface states version 6 and has coded entries.
    init(_ format: PixelFormat) throws {
        bytes = screenBytes(format, width: Self.width, height: Self.height, seed: 31)
        (_, compressed, statistics) = try ScreenContentTests.compress(
            bytes,
            format,
            width: Self.width,
            height: Self.height,
            layoutVersion: 6
        )
        let modes = try SurfaceCodec.modeCounts(of: compressed)
        #expect(modes["codedLiterals", default: 0] > 0, "\(modes)")
        #expect(try ScreenContentTests.statedVersion(compressed) == 6)
    }
}
