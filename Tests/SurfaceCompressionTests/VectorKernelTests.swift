import Testing

@testable import SurfaceCompression

/// The AVX2 packed8 kernel must decode exactly what the portable Swift decoder decodes, for any payload.
@Suite struct VectorKernelTests {
    static let sizes: [(Int, Int)] = [(8, 1), (7, 3), (32, 2), (33, 5), (64, 64), (100, 9), (257, 4), (3, 17)]

    /// Decodes `payload` with both decoders into separate buffers; returns both results (nil for a refusal).
    static func decodeBoth(_ payload: [UInt8], width: Int, height: Int) -> ([UInt8]?, [UInt8]?) {
        func decode(vector: Bool) -> [UInt8]? {
            let slack = 64
            var output = [UInt8](repeating: 0xEE, count: width * height + slack)
            var controls = [UInt8](repeating: 0, count: width * height + slack)
            let ok = payload.withUnsafeBytes { p in
                output.withUnsafeMutableBufferPointer { x in
                    controls.withUnsafeMutableBufferPointer { c in
                        ComponentCodec.decodePacked8(
                            p.baseAddress!,
                            count: p.count,
                            width: width,
                            height: height,
                            controls: c.baseAddress!,
                            into: x.baseAddress!,
                            usesVectorKernels: vector
                        )
                    }
                }
            }
            return ok ? Array(output.prefix(width * height)) : nil
        }
        return (decode(vector: true), decode(vector: false))
    }

    /// Encoded components of every size: both decoders give the original samples back.
    @Test(arguments: sizes.indices)
    func bothDecodersRoundTripEncodedComponents(index: Int) throws {
        let (width, height) = Self.sizes[index]
        var random = SplitMix(seed: UInt64(index + 1))
        for style in 0..<3 {
            var samples = [UInt8](repeating: 0, count: width * height + 64)
            for y in 0..<height {
                for x in 0..<width {
                    let smooth = UInt8(truncatingIfNeeded: x * 3 + y * 5)
                    let noise = UInt8(truncatingIfNeeded: random.next() % (style == 0 ? 3 : style == 1 ? 40 : 256))
                    samples[y * width + x] = smooth &+ noise
                }
            }
            let original = Array(samples.prefix(width * height))
            let stride = (width + 16) * height * 2 + 128
            var scratch = [UInt8](repeating: 0, count: stride * 4)
            let payload: [UInt8]? = scratch.withUnsafeMutableBytes { s in
                let base = s.baseAddress!
                let choice = samples.withUnsafeMutableBufferPointer { samples in
                    ComponentCodec.encode8(
                        samples: samples.baseAddress!,
                        width: width,
                        height: height,
                        residuals: (base).assumingMemoryBound(to: UInt8.self),
                        residuals2: (base + stride).assumingMemoryBound(to: UInt8.self),
                        packed: base + 2 * stride,
                        alternative: base + 3 * stride
                    )
                }
                guard choice.mode == .packed8 else { return nil }
                return Array(UnsafeRawBufferPointer(start: choice.payload, count: choice.byteCount))
            }
            guard let payload else { continue }
            let (vector, portable) = Self.decodeBoth(payload, width: width, height: height)
            #expect(vector == original, "\(width)x\(height) style \(style)")
            #expect(portable == original, "\(width)x\(height) style \(style)")
        }
    }

    /// Random residual bytes and predictor bits under valid widths: whatever the payload says, both decoders
    /// agree byte for byte (what a rewritten shared payload would give).
    @Test(arguments: sizes.indices)
    func bothDecodersAgreeOnArbitraryPayloads(index: Int) {
        let (width, height) = Self.sizes[index]
        var random = SplitMix(seed: UInt64(100 + index))
        let blocks = (width + 7) / 8 * height
        for _ in 0..<20 {
            var nibbles = [UInt8](repeating: 0, count: (blocks + 1) / 2)
            var total = 0
            for block in 0..<blocks {
                let w = Int(random.next() % 9)
                nibbles[block / 2] |= UInt8(w) << (4 * (block % 2))
                total += w
            }
            var bits = [UInt8](repeating: 0, count: (blocks + 7) / 8)
            for block in 0..<blocks where random.next() % 2 == 0 { bits[block / 8] |= 1 << (block % 8) }
            let residuals = (0..<total).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let (vector, portable) = Self.decodeBoth(nibbles + bits + residuals, width: width, height: height)
            #expect(vector != nil)
            #expect(vector == portable, "\(width)x\(height)")
        }
    }

    /// Decodes a packed10 `payload` with both decoders; returns both results (nil for a refusal).
    static func decodeBoth10(_ payload: [UInt8], width: Int, height: Int) -> ([UInt16]?, [UInt16]?) {
        func decode(vector: Bool) -> [UInt16]? {
            let slack = 64
            var output = [UInt16](repeating: 0xEEEE, count: width * height + slack)
            var controls = [UInt8](repeating: 0, count: width * height + slack)
            var residuals = [UInt16](repeating: 0, count: (width + 8) * height + slack)
            let ok = payload.withUnsafeBytes { p in
                output.withUnsafeMutableBufferPointer { x in
                    controls.withUnsafeMutableBufferPointer { c in
                        residuals.withUnsafeMutableBufferPointer { r in
                            ComponentCodec.decodePacked16(
                                p.baseAddress!,
                                count: p.count,
                                tenBit: true,
                                width: width,
                                height: height,
                                controls: c.baseAddress!,
                                residuals: r.baseAddress!,
                                into: x.baseAddress!,
                                usesVectorKernels: vector
                            )
                        }
                    }
                }
            }
            return ok ? Array(output.prefix(width * height)) : nil
        }
        return (decode(vector: true), decode(vector: false))
    }

    /// 10-bit: encoded components round-trip through both decoders, and arbitrary payloads decode alike.
    @Test(arguments: sizes.indices)
    func bothTenBitDecodersAgree(index: Int) throws {
        let (width, height) = Self.sizes[index]
        var random = SplitMix(seed: UInt64(200 + index))
        var samples = [UInt16](repeating: 0, count: width * height + 64)
        for y in 0..<height {
            for x in 0..<width {
                let value = (x * 7 + y * 11 + Int(random.next() % 20)) & 0x3FF
                samples[y * width + x] = UInt16(value) << 6
            }
        }
        let original = Array(samples.prefix(width * height))
        let stride = ((width + 16) * height * 2 + 128) * 2
        var scratch = [UInt8](repeating: 0, count: stride * 4)
        let payload: [UInt8]? = scratch.withUnsafeMutableBytes { s in
            let base = s.baseAddress!
            let choice = samples.withUnsafeMutableBufferPointer { samples in
                ComponentCodec.encode16(
                    samples: samples.baseAddress!,
                    width: width,
                    height: height,
                    residuals: base.assumingMemoryBound(to: UInt16.self),
                    residuals2: (base + stride).assumingMemoryBound(to: UInt16.self),
                    packed: base + 2 * stride,
                    alternative: base + 3 * stride
                )
            }
            guard choice.mode == .packed10 else { return nil }
            return Array(UnsafeRawBufferPointer(start: choice.payload, count: choice.byteCount))
        }
        if let payload {
            let (vector, portable) = Self.decodeBoth10(payload, width: width, height: height)
            #expect(vector == original, "\(width)x\(height)")
            #expect(portable == original, "\(width)x\(height)")
        }
        let blocks = (width + 7) / 8 * height
        for _ in 0..<20 {
            var nibbles = [UInt8](repeating: 0, count: (blocks + 1) / 2)
            var total = 0
            for block in 0..<blocks {
                let w = Int(random.next() % 11)
                nibbles[block / 2] |= UInt8(w) << (4 * (block % 2))
                total += w
            }
            var bits = [UInt8](repeating: 0, count: (blocks + 7) / 8)
            for block in 0..<blocks where random.next() % 2 == 0 { bits[block / 8] |= 1 << (block % 8) }
            let residuals = (0..<total).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let (vector, portable) = Self.decodeBoth10(nibbles + bits + residuals, width: width, height: height)
            #expect(vector != nil)
            #expect(vector == portable, "\(width)x\(height)")
        }
    }

    /// The AVX2 block packer writes exactly the portable encoder's bytes (same mode, same payload).
    @Test(arguments: sizes.indices)
    func bothEncodersWriteTheSameBytes(index: Int) {
        let (width, height) = Self.sizes[index]
        var random = SplitMix(seed: UInt64(300 + index))
        for style in 0..<4 {
            var samples = [UInt8](repeating: 0, count: width * height + 64)
            for i in 0..<width * height {
                let smooth = UInt8(truncatingIfNeeded: (i % width) * 3 + (i / width) * 5)
                let range: UInt64 = [2, 9, 60, 256][style]
                samples[i] = smooth &+ UInt8(truncatingIfNeeded: random.next() % range)
            }
            func encode(vector: Bool) -> (TileMode, [UInt8]) {
                let stride = (width + 16) * height * 2 + 128
                var scratch = [UInt8](repeating: 0, count: stride * 4)
                var copy = samples
                return scratch.withUnsafeMutableBytes { s in
                    let base = s.baseAddress!
                    let choice = copy.withUnsafeMutableBufferPointer { samples in
                        ComponentCodec.encode8(
                            samples: samples.baseAddress!,
                            width: width,
                            height: height,
                            residuals: base.assumingMemoryBound(to: UInt8.self),
                            residuals2: (base + stride).assumingMemoryBound(to: UInt8.self),
                            packed: base + 2 * stride,
                            alternative: base + 3 * stride,
                            usesVectorKernels: vector
                        )
                    }
                    return (choice.mode, Array(UnsafeRawBufferPointer(start: choice.payload, count: choice.byteCount)))
                }
            }
            let vector = encode(vector: true)
            let portable = encode(vector: false)
            #expect(vector.0 == portable.0, "\(width)x\(height) style \(style)")
            #expect(vector.1 == portable.1, "\(width)x\(height) style \(style)")
        }
    }

    /// Widths above 8 are refused wherever they sit among the nibbles (the validation reads 16 at a time), even
    /// when the payload's size adds up.
    @Test func aWidthAboveEightIsRefusedAnywhere() {
        let width = 64
        let height = 5
        let blocks = width / 8 * height
        for position in [0, 1, 7, 15, 16, 17, blocks - 1] {
            for bad in [9, 12, 15] {
                var nibbles = [UInt8](repeating: 0x33, count: blocks / 2)
                nibbles[position / 2] = position % 2 == 0 ? (0x30 | UInt8(bad)) : (0x03 | UInt8(bad) << 4)
                let total = 3 * (blocks - 1) + bad
                let payload = nibbles + [UInt8](repeating: 0, count: blocks / 8) + [UInt8](repeating: 1, count: total)
                let (vector, portable) = Self.decodeBoth(payload, width: width, height: height)
                #expect(vector == nil, "nibble \(position) = \(bad)")
                #expect(portable == nil, "nibble \(position) = \(bad)")
            }
            // The same with width 8 is valid.
            var nibbles = [UInt8](repeating: 0x33, count: blocks / 2)
            nibbles[position / 2] = position % 2 == 0 ? 0x38 : 0x83
            let payload =
                nibbles + [UInt8](repeating: 0, count: blocks / 8) + [UInt8](repeating: 1, count: 3 * (blocks - 1) + 8)
            #expect(Self.decodeBoth(payload, width: width, height: height).0 != nil)
        }
    }

    /// Straight into a plane: rows `stride` apart, and not one byte written past a row's end (the bytes between
    /// rows keep their canary), since other threads write beside the component.
    @Test(arguments: sizes.indices)
    func theKernelWritesExactlyTheSamplesOfAStridedPlane(index: Int) throws {
        try #require(Kernels.hasAVX2, "the strided path is the AVX2 kernel's")
        let (width, height) = Self.sizes[index]
        var random = SplitMix(seed: UInt64(400 + index))
        let blocks = (width + 7) / 8 * height
        var nibbles = [UInt8](repeating: 0, count: (blocks + 1) / 2)
        var total = 0
        for block in 0..<blocks {
            let w = Int(random.next() % 9)
            nibbles[block / 2] |= UInt8(w) << (4 * (block % 2))
            total += w
        }
        var bits = [UInt8](repeating: 0, count: (blocks + 7) / 8)
        for block in 0..<blocks where random.next() % 2 == 0 { bits[block / 8] |= 1 << (block % 8) }
        let payload = nibbles + bits + (0..<total).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let contiguous = try #require(Self.decodeBoth(payload, width: width, height: height).1)
        let stride = width + 5
        var plane = [UInt8](repeating: 0xA5, count: stride * height + 64)
        var controls = [UInt8](repeating: 0, count: payload.count + 64)
        let ok = payload.withUnsafeBytes { p in
            plane.withUnsafeMutableBufferPointer { x in
                controls.withUnsafeMutableBufferPointer { c in
                    ComponentCodec.decodePacked8(
                        p.baseAddress!,
                        count: p.count,
                        width: width,
                        height: height,
                        controls: c.baseAddress!,
                        into: x.baseAddress!,
                        rowStride: stride
                    )
                }
            }
        }
        #expect(ok)
        for y in 0..<height {
            #expect(Array(plane[y * stride..<y * stride + width]) == Array(contiguous[y * width..<(y + 1) * width]))
            #expect(plane[y * stride + width..<(y + 1) * stride].allSatisfy { $0 == 0xA5 }, "row \(y) spilled")
        }
        #expect(plane[(stride * height)..<plane.count].allSatisfy { $0 == 0xA5 })
    }
}
