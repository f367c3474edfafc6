import Foundation
import PixelBuffers
import TestSupport
import Testing

@testable import SurfaceCompression

/// docs/COMPRESSED-LAYOUT.md against the codec: a decoder written from the document alone, in Python
/// (Tests/OutsideDecoder/compressed_layout.py, liblz4 through ctypes, no code shared with this module), decodes
/// surfaces the encoder wrote, in every format and with the screen-content modes of versions 3 to 8, to exactly
/// the source bytes.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct OutsideDecoderTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("OutsideDecoder/compressed_layout.py")

    /// Runs python3 on the script, at most 4 minutes, through TestSupport's `ChildProcess` (started by the one spawner
    /// thread like every other child; awaited without blocking a thread of the cooperative pool). Its output is
    /// printed when it fails.
    static func runPython(_ arguments: [String]) async throws -> Int32 {
        let child = try await ChildProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3", script.path] + arguments)
        let status = try await child.exitStatus(within: 240)
        if status != 0 { print("compressed_layout.py exited \(status):\n\(child.output)") }
        return status
    }

    /// (format, padding bits set in 16-bit samples, the mode the screen content must use)
    static let cases: [(PixelFormat, Bool, String)] = [
        (.yuv420BiPlanarVideoRange8, false, "packed8LZ4"),
        (.bgra8, false, "packed8LZ4"),
        (.yuv420BiPlanarVideoRange10, false, "packed10LZ4"),
        (.yuv420BiPlanarFullRange10, true, "packed16LZ4"),
    ]

    /// Version 5 (the Up modes, docs §6.5): full-width bands of 16 rows, ten of them, so that Up entries appear in
    /// rows 1 to 7 and 9, with the inner payloads of raw, solid, lz4, packed and Up entries above them as dictionaries.
    static let upCases: [(PixelFormat, Bool, String)] = [
        (.yuv420BiPlanarVideoRange8, false, "packed8LZ4Up"),
        (.bgra8, false, "packed8LZ4Up"),
        (.yuv420BiPlanarVideoRange10, false, "packed10LZ4Up"),
        (.yuv420BiPlanarFullRange10, true, "packed16LZ4Up"),
    ]

    @Test(arguments: upCases.indices)
    func aDecoderWrittenFromTheLayoutDocumentDecodesUpModesExactly(index: Int) async throws {
        let (format, padded, mode) = Self.upCases[index]
        let width = 320
        let height = 160
        var bytes = screenBytes(format, width: width, height: height, seed: UInt64(40 + index))
        if padded {
            for i in stride(from: 0, to: bytes.count, by: 2) { bytes[i] |= 0x3F }
        }
        let (_, compressed, statistics) = try ScreenContentTests.compress(
            bytes,
            format,
            width: width,
            height: height,
            tiles: .init(width: nil, height: 16)
        )
        let modes = try SurfaceCodec.modeCounts(of: compressed)
        #expect(modes[mode, default: 0] + modes["lz4Up", default: 0] > 0, "\(modes)")
        #expect(try ScreenContentTests.statedVersion(compressed) == 5)
        try await Self.expectOutsideDecoderAgrees(compressed, byteCount: statistics.compressedByteCount, bytes)
    }

    /// Version 6 (coded literals, docs §6.6): screen content in 64-row bands, whose LZ4 blocks (plain and Up) code
    /// their literals where that saves enough.
    @Test(arguments: [PixelFormat.yuv420BiPlanarVideoRange8, .bgra8, .yuv420BiPlanarVideoRange10])
    func aDecoderWrittenFromTheLayoutDocumentDecodesCodedLiteralsExactly(_ format: PixelFormat) async throws {
        // The image of CodedLiteralsTests: eleven bands, coded entries in every format.
        let screen = try CodedScreen(format)
        try await Self.expectOutsideDecoderAgrees(
            screen.compressed,
            byteCount: screen.statistics.compressedByteCount,
            screen.bytes
        )
    }

    /// Version 7 (coded sequences, docs §6.7): the same screen at version 7, whose LZ4 blocks are split into five
    /// streams where that saves enough.
    @Test(arguments: [PixelFormat.yuv420BiPlanarVideoRange8, .bgra8, .yuv420BiPlanarVideoRange10])
    func aDecoderWrittenFromTheLayoutDocumentDecodesCodedSequencesExactly(_ format: PixelFormat) async throws {
        let (bytes, compressed, used, _) = try CodedSequencesTests.screen(format)
        let modes = try SurfaceCodec.modeCounts(of: compressed)
        #expect(modes["codedSequences", default: 0] > 0, "\(modes)")
        #expect(try ScreenContentTests.statedVersion(compressed) == 7)
        try await Self.expectOutsideDecoderAgrees(compressed, byteCount: used, bytes)
    }

    /// Version 8 (zstd, docs §6.9): screen content at effort fast, in every sample size, read through libzstd.
    @Test(arguments: [PixelFormat.yuv420BiPlanarVideoRange8, .bgra8, .yuv420BiPlanarVideoRange10])
    func aDecoderWrittenFromTheLayoutDocumentDecodesZstdEntriesExactly(_ format: PixelFormat) async throws {
        let bytes = screenBytes(format, width: 320, height: 96, seed: 50)
        let (_, compressed, statistics) = try ScreenContentTests.compress(
            bytes,
            format,
            width: 320,
            height: 96,
            tiles: .init(width: 192, height: 32),
            layoutVersion: 8,
            effort: .fast
        )
        #expect(try SurfaceCodec.modeCounts(of: compressed)["zstd", default: 0] > 0)
        #expect(try ScreenContentTests.statedVersion(compressed) == 8)
        try await Self.expectOutsideDecoderAgrees(compressed, byteCount: statistics.compressedByteCount, bytes)
    }

    static func expectOutsideDecoderAgrees(_ compressed: PixelBuffer, byteCount: Int, _ bytes: [UInt8]) async throws {
        try compressed.lock([.readOnly])
        let surface = compressed.surface.withUnsafeBytes { Array($0.prefix(byteCount)) }
        try compressed.unlock([.readOnly])
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outside-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent("surface")
        let output = directory.appendingPathComponent("image")
        try Data(surface).write(to: input)
        #expect(try await Self.runPython([input.path, output.path]) == 0)
        let decoded = try [UInt8](Data(contentsOf: output))
        // The first difference, not the arrays: a failure message stays short.
        #expect(decoded.count == bytes.count)
        let firstDifference = zip(decoded, bytes).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(firstDifference == nil, "first differing byte: \(firstDifference ?? -1)")
    }

    @Test(arguments: cases.indices)
    func aDecoderWrittenFromTheLayoutDocumentDecodesTheEncodersSurfacesExactly(index: Int) async throws {
        let (format, padded, mode) = Self.cases[index]
        let width = 320
        let height = 96
        var bytes = screenBytes(format, width: width, height: height, seed: UInt64(20 + index))
        if padded {
            for i in stride(from: 0, to: bytes.count, by: 2) { bytes[i] |= 0x3F }
        }
        // Tiles narrower than the image, so the document's tile geometry is exercised too.
        let (_, compressed, statistics) = try ScreenContentTests.compress(
            bytes,
            format,
            width: width,
            height: height,
            tiles: .init(width: 192, height: 32)
        )
        #expect(try SurfaceCodec.modeCounts(of: compressed)[mode, default: 0] > 0)
        try await Self.expectOutsideDecoderAgrees(compressed, byteCount: statistics.compressedByteCount, bytes)
    }
}
