import Foundation
import Testing
import TestSupport

@testable import SurfaceCompression

/// The NEON kernels, checked on an x86-64 machine: inputs generated here, the expected bytes computed by the
/// portable Swift decoder and encoder, then Sources/CSurfaceCodecKernels/kernels_neon.c and
/// Tests/Kernels/neon_harness.c compiled with `aarch64-linux-gnu-gcc -O2 -static` and run under `qemu-aarch64`,
/// which compares every byte and prints the counts. Skipped (naming the missing tool) without the cross compiler
/// or qemu, unless FRAMEBUS_REQUIRE_ALL=1, which turns the skip into a failure. (Debian: gcc-aarch64-linux-gnu,
/// libc6-dev-arm64-cross, qemu-user.)
@Suite(.heavyWork, .timeLimit(.minutes(30))) struct NEONKernelTests {
    static var packageRoot: URL { TestLocations.packageRoot }

    static let crossCompiler = TestLocations.onPath("aarch64-linux-gnu-gcc")
    static let emulator = TestLocations.onPath("qemu-aarch64")
    static let requireAll = ProcessInfo.processInfo.environment["FRAMEBUS_REQUIRE_ALL"] == "1"
    static let missing: String = {
        var names: [String] = []
        if crossCompiler == nil {
            names.append("aarch64-linux-gnu-gcc (apt: gcc-aarch64-linux-gnu libc6-dev-arm64-cross)")
        }
        if emulator == nil { names.append("qemu-aarch64 (apt: qemu-user)") }
        return names.isEmpty ? "" : "needs " + names.joined(separator: " and ") + " on the PATH"
    }()

    /// Little-endian records for the harness (see Tests/Kernels/neon_harness.c).
    struct Input {
        var bytes: [UInt8] = []
        var counts = [0, 0, 0, 0]
        var compared = [0, 0, 0, 0]

        mutating func u32(_ value: Int) {
            precondition(value >= 0 && value <= Int(UInt32.max))
            for shift in [0, 8, 16, 24] { bytes.append(UInt8(truncatingIfNeeded: value >> shift)) }
        }

        mutating func decode8(_ payload: [UInt8], width: Int, height: Int, stride: Int) {
            let portable = VectorKernelTests.decode8(payload, width: width, height: height, tier: .portable)!
            var plane = [UInt8](repeating: 0xA5, count: stride * height)
            for y in 0..<height { plane[y * stride..<y * stride + width] = portable[y * width..<(y + 1) * width] }
            u32(1)
            u32(width)
            u32(height)
            u32(stride)
            u32(payload.count)
            bytes += payload + plane
            counts[1] += 1
            compared[1] += stride * height + 64
        }

        mutating func decode10(_ payload: [UInt8], width: Int, height: Int) {
            let portable = VectorKernelTests.decode10(payload, width: width, height: height, tier: .portable)!
            u32(2)
            u32(width)
            u32(height)
            u32(payload.count)
            bytes += payload
            for value in portable {
                bytes += [UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8)]
            }
            counts[2] += 1
            compared[2] += width * height * 2
        }

        mutating func pack8(up: [UInt8], left: [UInt8], blockCount: Int, expected: [UInt8], zeroBlocks: Int) {
            u32(3)
            u32(blockCount)
            bytes += up + left
            u32(expected.count)
            bytes += expected
            u32(zeroBlocks)
            counts[3] += 1
            compared[3] += expected.count
        }
    }

    /// Every width 1...300 and height 1...70 (VectorKernelTests.cases): arbitrary and encoded packed8 and packed10
    /// payloads, decoded strided into a larger plane; and the block packer on the residuals of encoded components
    /// (the portable encoder's payload) and on arbitrary residual blocks.
    static func makeInput() -> Input {
        var input = Input()
        var random = SplitMix(seed: 0x4E45_4F4E)
        for (width, height) in VectorKernelTests.cases {
            let blocks = (width + 7) / 8 * height
            for style in 0..<3 {
                let payload = arbitraryPackedPayload(
                    blocks: blocks,
                    maximum: 8,
                    widths: PayloadWidths.mixes[style],
                    random: &random
                )
                input.decode8(payload, width: width, height: height, stride: width + 1 + Int(random.next() % 17))
                let payload10 = arbitraryPackedPayload(
                    blocks: blocks,
                    maximum: 10,
                    widths: PayloadWidths.mixes[style],
                    random: &random
                )
                input.decode10(payload10, width: width, height: height)
            }
            let noise: UInt64 = [3, 40, 256][Int(random.next() % 3)]
            let samples = VectorKernelTests.samples8(width: width, height: height, noise: noise, &random)
            let encoded = Self.encode8Residuals(samples, width: width, height: height)
            if let encoded {
                input.decode8(encoded.payload, width: width, height: height, stride: width + Int(random.next() % 9))
                let reference = VectorKernelTests.referencePack8(
                    up: encoded.up,
                    left: encoded.left,
                    blockCount: blocks
                )
                input.pack8(
                    up: encoded.up,
                    left: encoded.left,
                    blockCount: blocks,
                    expected: encoded.payload,
                    zeroBlocks: reference.zeroBlocks
                )
            }
            let samples10 = (0..<width * height).map { i in
                UInt16(((i % width) * 7 + (i / width) * 11 + Int(random.next() % 60)) & 0x3FF) << 6
            }
            let (mode10, payload10) = VectorKernelTests.encode16(samples10, width: width, height: height)
            if mode10 == .packed10 { input.decode10(payload10, width: width, height: height) }
        }
        for blockCount in 1...300 {
            var up: [UInt8] = []
            var left: [UInt8] = []
            for _ in 0..<blockCount * 8 {
                up.append(UInt8(truncatingIfNeeded: random.next() >> UInt64(56 + random.next() % 9)))
                left.append(UInt8(truncatingIfNeeded: random.next() >> UInt64(56 + random.next() % 9)))
            }
            let reference = VectorKernelTests.referencePack8(up: up, left: left, blockCount: blockCount)
            input.pack8(
                up: up,
                left: left,
                blockCount: blockCount,
                expected: reference.payload,
                zeroBlocks: reference.zeroBlocks
            )
        }
        input.u32(0)
        return input
    }

    /// `samples` encoded by the portable encoder, if it chose packed8: its payload, and the zig-zagged residual
    /// blocks under each predictor that it packed (left in its scratch).
    static func encode8Residuals(
        _ samples: [UInt8],
        width: Int,
        height: Int
    ) -> (payload: [UInt8], up: [UInt8], left: [UInt8])? {
        let blocks = (width + 7) / 8 * height
        let stride = (width + 16) * height * 2 + 128
        var scratch = [UInt8](repeating: 0, count: stride * 4)
        var copy = samples + [UInt8](repeating: 0, count: 64)
        return Kernels.withTier(.portable) {
            scratch.withUnsafeMutableBytes { s in
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
                        usesVectorKernels: false
                    )
                }
                guard choice.mode == .packed8 else { return nil }
                return (
                    Array(UnsafeRawBufferPointer(start: choice.payload, count: choice.byteCount)),
                    Array(UnsafeRawBufferPointer(start: base, count: blocks * 8)),
                    Array(UnsafeRawBufferPointer(start: base + stride, count: blocks * 8))
                )
            }
        }
    }

    @Test(.enabled(if: missing.isEmpty || requireAll, "\(missing)"))
    func theNEONKernelsMatchThePortableCodeUnderEmulation() async throws {
        let compiler = try #require(Self.crossCompiler, "\(Self.missing)")
        let emulator = try #require(Self.emulator, "\(Self.missing)")
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(
            "framebus-neon-\(UUID().uuidString.prefix(8))"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let kernels = Self.packageRoot.appendingPathComponent("Sources/CSurfaceCodecKernels")
        let harness = directory.appendingPathComponent("neon_harness")
        let (compiled, compilerOutput) = try await runToEnd(
            compiler,
            [
                "-O2", "-static", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas", "-I",
                kernels.appendingPathComponent("include").path, "-I", kernels.path,
                kernels.appendingPathComponent("kernels_neon.c").path,
                Self.packageRoot.appendingPathComponent("Tests/Kernels/neon_harness.c").path, "-o", harness.path,
            ],
            timeout: 600
        )
        try #require(compiled == 0, "aarch64-linux-gnu-gcc failed (\(compiled)):\n\(compilerOutput)")

        let input = Self.makeInput()
        let inputFile = directory.appendingPathComponent("input.bin")
        try Data(input.bytes).write(to: inputFile)
        let (status, output) = try await runToEnd(emulator, [harness.path, inputFile.path], timeout: 1200)
        try #require(status == 0, "the harness under qemu-aarch64 exited with \(status):\n\(output)")
        #expect(output.contains("\ndone") || output.hasPrefix("done"), "\(output)")
        var seen = 0
        for line in output.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let name = fields.first, let kind = ["decode8": 1, "decode10": 2, "pack8": 3][String(name)] else {
                continue
            }
            var values: [String: Int] = [:]
            for field in fields.dropFirst() {
                let pair = field.split(separator: "=")
                if pair.count == 2 { values[String(pair[0])] = Int(pair[1]) }
            }
            seen += 1
            #expect(values["cases"] == input.counts[kind], "\(line)")
            #expect(values["bytes"] == input.compared[kind], "\(line): every byte compared")
            #expect(values["different"] == 0, "\(line): the NEON kernel differs from the portable code")
        }
        #expect(seen == 3, "\(output)")
        #expect(input.counts[1] > 0 && input.counts[2] > 0 && input.counts[3] > 0)
    }
}
