#if arch(x86_64)
import CSurfaceCodecKernels
import Glibc
import TestSupport
import Testing

@testable import SurfaceCompression

/// The AVX2 packed8 kernel unpacks blocks three ways: with AVX-512 (VBMI, VBMI2, GFNI: Intel from Ice Lake, AMD
/// from Zen 4), with BMI2's pdep where it is fast (Intel, AMD Zen 3 on) and with byte shuffles and multiplies
/// elsewhere; the packed10 kernel with byte shuffles and shifts. Each must
/// decode exactly what the portable Swift decoder decodes (packed8 into strided rows without touching a byte
/// beside them), and read nothing past the payload's end.
@Suite(.heavyWork, .timeLimit(.minutes(10))) struct KernelUnpackingTests {
    /// Sizes with whole groups of four blocks, partial groups and partial blocks, and rows long enough that the
    /// vector loop does most of the work.
    static let sizes: [(Int, Int)] = [(32, 3), (40, 4), (63, 5), (96, 7), (256, 6), (517, 3), (1000, 2), (5, 9)]

    /// The unpackings `csck_decode_packed8_avx2_unpacking` takes: shuffles (0), pdep (1), AVX-512 (2; where the
    /// processor lacks it, pdep or shuffles run instead, and AVX512Packed8KernelTests says so).
    static let unpackings: [Int32] = [0, 1, 2]


    /// The portable decoder's samples (contiguous rows), or nil for a refusal.
    static func portable(_ payload: [UInt8], width: Int, height: Int) -> [UInt8]? {
        var output = [UInt8](repeating: 0, count: width * height + 64)
        var controls = [UInt8](repeating: 0, count: payload.count + 64)
        let ok = payload.withUnsafeBytes { p in
            output.withUnsafeMutableBufferPointer { x in
                controls.withUnsafeMutableBufferPointer { c in
                    ComponentCodec.decodePacked8(
                        p.baseAddress!,
                        count: p.count,
                        width: width,
                        height: height,
                        controls: c.baseAddress!,
                        controlsCapacity: c.count,
                        into: x.baseAddress!,
                        capacity: x.count,
                        usesVectorKernels: false
                    )
                }
            }
        }
        return ok ? Array(output.prefix(width * height)) : nil
    }

    /// Decodes `payload` with the kernel's chosen unpacking (see ``unpackings``) into rows `stride` bytes apart of a
    /// plane filled with a canary. The payload is copied to the end of a page followed by an inaccessible page, so
    /// a read past its end faults.
    static func kernel(_ payload: [UInt8], width: Int, height: Int, stride: Int, unpacking: Int32) -> [UInt8] {
        let blocks = (width + 7) / 8 * height
        let controlBytes = (blocks + 1) / 2 + (blocks + 7) / 8
        // Private controls, readable CSCK_CONTROL_SLACK (8) bytes past their end.
        var controls = [UInt8](repeating: 0, count: controlBytes + 8)
        for i in 0..<controlBytes { controls[i] = payload[i] }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let pages = (payload.count + page - 1) / page + 1
        let mapping = mmap(nil, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
        defer { munmap(mapping, (pages + 1) * page) }
        mprotect(mapping + pages * page, page, PROT_NONE)
        let shared = (mapping + pages * page - payload.count).assumingMemoryBound(to: UInt8.self)
        payload.withUnsafeBufferPointer { shared.update(from: $0.baseAddress!, count: payload.count) }
        var plane = [UInt8](repeating: 0xA5, count: stride * height + 64)
        let status = controls.withUnsafeBufferPointer { c in
            plane.withUnsafeMutableBufferPointer { x in
                csck_decode_packed8_avx2_unpacking(
                    shared,
                    payload.count,
                    controlBytes,
                    c.baseAddress!,
                    c.count,
                    c.baseAddress! + (blocks + 1) / 2,
                    c.count - (blocks + 1) / 2,
                    width,
                    height,
                    x.baseAddress!,
                    x.count,
                    stride,
                    unpacking
                )
            }
        }
        #expect(status == 0)
        return plane
    }

    /// Checks the strided plane against the portable samples, row by row, and the canary beside the rows.
    static func expectSame(_ plane: [UInt8], _ expected: [UInt8], width: Int, height: Int, stride: Int, _ what: String)
    {
        for y in 0..<height {
            #expect(
                Array(plane[y * stride..<y * stride + width]) == Array(expected[y * width..<(y + 1) * width]),
                "\(what): row \(y)"
            )
            #expect(plane[y * stride + width..<(y + 1) * stride].allSatisfy { $0 == 0xA5 }, "\(what): row \(y) spilled")
        }
        #expect(plane[(stride * height)..<plane.count].allSatisfy { $0 == 0xA5 }, "\(what): past the last row")
    }

    /// pdep is chosen on Intel and on AMD from Zen 3 (family 19h), never on AMD Zen 1 and 2 or Hygon (family 17h,
    /// 18h: microcoded), nor without BMI2 and AVX2. Vendor strings as cpuid leaf 0 returns them (ebx, ecx, edx),
    /// signatures as leaf 1's eax.
    @Test func pdepIsChosenOnlyWhereItIsFast() {
        let intel: (UInt32, UInt32, UInt32) = (0x756e_6547, 0x6c65_746e, 0x4965_6e69)  // "GenuineIntel"
        let amd: (UInt32, UInt32, UInt32) = (0x6874_7541, 0x444d_4163, 0x6974_6e65)  // "AuthenticAMD"
        let hygon: (UInt32, UInt32, UInt32) = (0x6f67_7948, 0x656e_6975, 0x6e65_476e)  // "HygonGenuine"
        func fast(_ vendor: (UInt32, UInt32, UInt32), _ signature: UInt32, supported: Bool = true) -> Bool {
            csck_pdep_is_fast(supported ? 1 : 0, vendor.0, vendor.1, vendor.2, signature) != 0
        }
        #expect(fast(intel, 0x0008_06F8))  // Sapphire Rapids
        #expect(fast(intel, 0x0003_06C3))  // Haswell
        #expect(!fast(intel, 0x0008_06F8, supported: false))
        #expect(!fast(amd, 0x0080_0F12))  // Zen 1 (family 17h)
        #expect(!fast(amd, 0x0083_0F10))  // Zen 2 (family 17h)
        #expect(fast(amd, 0x00A0_0F11))  // Zen 3 (family 19h)
        #expect(fast(amd, 0x00A1_0F11))  // Zen 4 (family 19h)
        #expect(fast(amd, 0x00B0_0F21))  // Zen 5 (family 1Ah)
        #expect(!fast(hygon, 0x0090_0F01))  // Dhyana (family 18h, Zen 1)
        #expect(!fast(amd, 0x00A0_0F11, supported: false))
        // This processor's answer is one of these, and never without AVX2.
        if csck_cpu_has_fast_pdep() != 0 { #expect(csck_cpu_has_avx2() != 0) }
    }

    /// Random payloads (widths 0...8, and all 8), every unpacking, strided: byte for byte the portable samples.
    @Test(arguments: sizes.indices)
    func everyUnpackingMatchesThePortableDecoder(index: Int) throws {
        try #require(csck_cpu_has_avx2() != 0, "the kernel needs AVX2")
        let (width, height) = Self.sizes[index]
        var random = SplitMix(seed: UInt64(900 + index))
        for round in 0..<12 {
            let payload = arbitraryPackedPayload(
                blocks: blockCount(width: width, height: height),
                maximum: 8,
                widths: round % 4 == 3 ? .widest : .uniform,
                random: &random
            )
            let expected = try #require(Self.portable(payload, width: width, height: height))
            for unpacking in Self.unpackings {
                let stride = width + 1 + round
                let plane = Self.kernel(payload, width: width, height: height, stride: stride, unpacking: unpacking)
                Self.expectSame(plane, expected, width: width, height: height, stride: stride, "unpacking \(unpacking)")
            }
        }
    }

    /// Encoded photographs-like components (smooth gradients with noise, so both predictors and every width
    /// occur) decode to the original samples with every unpacking.
    @Test(arguments: sizes.indices)
    func everyUnpackingRoundTripsEncodedComponents(index: Int) throws {
        try #require(csck_cpu_has_avx2() != 0, "the kernel needs AVX2")
        let (width, height) = Self.sizes[index]
        var random = SplitMix(seed: UInt64(950 + index))
        for style in 0..<3 {
            var samples = [UInt8](repeating: 0, count: width * height + 64)
            for y in 0..<height {
                for x in 0..<width {
                    let smooth = UInt8(truncatingIfNeeded: x * 3 + y * 7)
                    let noise = UInt8(truncatingIfNeeded: random.next() % (style == 0 ? 4 : style == 1 ? 30 : 256))
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
                        residuals: base.assumingMemoryBound(to: UInt8.self),
                        residuals2: (base + stride).assumingMemoryBound(to: UInt8.self),
                        packed: base + 2 * stride,
                        alternative: base + 3 * stride
                    )
                }
                guard choice.mode == .packed8 else { return nil }
                return Array(UnsafeRawBufferPointer(start: choice.payload, count: choice.byteCount))
            }
            guard let payload else { continue }
            for unpacking in Self.unpackings {
                let plane = Self.kernel(payload, width: width, height: height, stride: width + 3, unpacking: unpacking)
                Self.expectSame(
                    plane,
                    original,
                    width: width,
                    height: height,
                    stride: width + 3,
                    "style \(style), unpacking \(unpacking)"
                )
            }
        }
    }

    /// A payload cut short (its widths claim more bytes than there are, as a rewritten shared payload may):
    /// no unpacking reads past the end (the page after it is inaccessible), and bytes past the end count as
    /// zeros: the samples are those of the payload completed with zeros, which the portable decoder accepts.
    @Test(arguments: sizes.indices)
    func everyUnpackingStaysInsideAShortPayload(index: Int) throws {
        try #require(csck_cpu_has_avx2() != 0, "the kernel needs AVX2")
        let (width, height) = Self.sizes[index]
        var random = SplitMix(seed: UInt64(990 + index))
        let blocks = (width + 7) / 8 * height
        let controlBytes = (blocks + 1) / 2 + (blocks + 7) / 8
        for _ in 0..<8 {
            let full = arbitraryPackedPayload(
                blocks: blockCount(width: width, height: height),
                maximum: 8,
                widths: .uniform,
                random: &random
            )
            let cut = controlBytes + Int(random.next() % UInt64(full.count - controlBytes + 1))
            let completed = Array(full.prefix(cut)) + [UInt8](repeating: 0, count: full.count - cut)
            let expected = try #require(Self.portable(completed, width: width, height: height))
            for unpacking in Self.unpackings {
                let plane = Self.kernel(
                    Array(full.prefix(cut)),
                    width: width,
                    height: height,
                    stride: width,
                    unpacking: unpacking
                )
                Self.expectSame(
                    plane,
                    expected,
                    width: width,
                    height: height,
                    stride: width,
                    "cut at \(cut), unpacking \(unpacking)"
                )
            }
        }
    }

    // MARK: packed10


    /// The portable 10-bit decoder's samples, or nil for a refusal.
    static func portable10(_ payload: [UInt8], width: Int, height: Int) -> [UInt16]? {
        var output = [UInt16](repeating: 0, count: width * height + 64)
        var controls = [UInt8](repeating: 0, count: payload.count + 64)
        var residuals = [UInt16](repeating: 0, count: (width + 8) * height + 64)
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
                            controlsCapacity: c.count,
                            residuals: r.baseAddress!,
                            into: x.baseAddress!,
                            capacity: x.count,
                            usesVectorKernels: false
                        )
                    }
                }
            }
        }
        return ok ? Array(output.prefix(width * height)) : nil
    }

    /// The 10-bit kernel (byte shuffles, no pdep), the payload at the end of a page before an inaccessible one.
    static func kernel10(_ payload: [UInt8], width: Int, height: Int) -> [UInt16] {
        let blocks = (width + 7) / 8 * height
        let controlBytes = (blocks + 1) / 2 + (blocks + 7) / 8
        var controls = [UInt8](repeating: 0, count: controlBytes + 8)
        for i in 0..<controlBytes { controls[i] = payload[i] }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let pages = (payload.count + page - 1) / page + 1
        let mapping = mmap(nil, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
        defer { munmap(mapping, (pages + 1) * page) }
        mprotect(mapping + pages * page, page, PROT_NONE)
        let shared = (mapping + pages * page - payload.count).assumingMemoryBound(to: UInt8.self)
        payload.withUnsafeBufferPointer { shared.update(from: $0.baseAddress!, count: payload.count) }
        // The kernel may write up to 16 samples of slack past the component.
        var output = [UInt16](repeating: 0xA5A5, count: width * height + 16)
        let status = controls.withUnsafeBufferPointer { c in
            output.withUnsafeMutableBufferPointer { x in
                csck_decode_packed10_avx2(
                    shared,
                    payload.count,
                    controlBytes,
                    c.baseAddress!,
                    c.count,
                    c.baseAddress! + (blocks + 1) / 2,
                    c.count - (blocks + 1) / 2,
                    width,
                    height,
                    x.baseAddress!,
                    x.count
                )
            }
        }
        #expect(status == 0)
        return Array(output.prefix(width * height))
    }

    /// Random 10-bit payloads (widths 0...10, and all 10): the kernel gives the portable decoder's samples.
    @Test(arguments: sizes.indices)
    func theTenBitKernelMatchesThePortableDecoder(index: Int) throws {
        try #require(csck_cpu_has_avx2() != 0, "the kernel needs AVX2")
        let (width, height) = Self.sizes[index]
        var random = SplitMix(seed: UInt64(1200 + index))
        for round in 0..<12 {
            let payload = arbitraryPackedPayload(
                blocks: blockCount(width: width, height: height),
                maximum: 10,
                widths: round % 4 == 3 ? .widest : .uniform,
                random: &random
            )
            let expected = try #require(Self.portable10(payload, width: width, height: height))
            #expect(Self.kernel10(payload, width: width, height: height) == expected)
        }
    }

    /// Encoded 10-bit components round-trip through the kernel.
    @Test(arguments: sizes.indices)
    func theTenBitKernelRoundTripsEncodedComponents(index: Int) throws {
        try #require(csck_cpu_has_avx2() != 0, "the kernel needs AVX2")
        let (width, height) = Self.sizes[index]
        var random = SplitMix(seed: UInt64(1300 + index))
        for spread in [3, 40, 1024] {
            var samples = [UInt16](repeating: 0, count: width * height + 64)
            for y in 0..<height {
                for x in 0..<width {
                    let value = (x * 7 + y * 11 + Int(random.next() % UInt64(spread))) & 0x3FF
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
            guard let payload else { continue }
            #expect(Self.kernel10(payload, width: width, height: height) == original)
        }
    }

    /// 10-bit payloads cut short (widths claiming more bytes than there are): the kernel reads nothing past the
    /// end (the page after it is inaccessible), and bytes past the end count as zeros: the samples are those of
    /// the payload completed with zeros, which the portable decoder accepts.
    @Test(arguments: sizes.indices)
    func theTenBitKernelStaysInsideAShortPayload(index: Int) throws {
        try #require(csck_cpu_has_avx2() != 0, "the kernel needs AVX2")
        let (width, height) = Self.sizes[index]
        var random = SplitMix(seed: UInt64(1400 + index))
        let blocks = (width + 7) / 8 * height
        let controlBytes = (blocks + 1) / 2 + (blocks + 7) / 8
        for _ in 0..<8 {
            let full = arbitraryPackedPayload(
                blocks: blockCount(width: width, height: height),
                maximum: 10,
                widths: .uniform,
                random: &random
            )
            let cut = controlBytes + Int(random.next() % UInt64(full.count - controlBytes + 1))
            let completed = Array(full.prefix(cut)) + [UInt8](repeating: 0, count: full.count - cut)
            let expected = try #require(Self.portable10(completed, width: width, height: height))
            #expect(
                Self.kernel10(Array(full.prefix(cut)), width: width, height: height) == expected,
                "\(width)x\(height) cut at \(cut) of \(full.count)"
            )
        }
    }
}
#endif
