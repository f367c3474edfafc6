import Foundation
import FrameBus
import FrameBusRecording
import TestSupport
import Testing

/// The reader against damaged and hostile files: a recording made in this process by a real recorder and publisher,
/// then cut and corrupted.
@Suite(.timeLimit(.minutes(5))) struct RecordingReaderTests {
    /// Records `count` 64x48 frames (each a different fill) through a publisher and a recorder in this process.
    static func makeRecording(count: Int) async throws -> (file: URL, frames: [[UInt8]]) {
        let path = temporarySocketPath("reader")
        let file = temporaryFileURL("reader.mkv")
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        defer { publisher.stop() }
        var configuration = Recorder.Configuration(path: path, outputPath: file.path)
        configuration.backlogByteCount = 4 << 20
        configuration.reservationStep = 1 << 20
        let recorder = try Recorder(configuration: configuration)
        try #require(await eventually { publisher.subscriberCount == 1 })
        let pool = try PixelBufferPool(
            attributes: .init(width: 64, height: 48, pixelFormat: .yuv420BiPlanarVideoRange8)
        )
        var frames: [[UInt8]] = []
        for index in 0..<count {
            let buffer = try await publisher.nextPixelBuffer(from: pool)
            try buffer.lock()
            for plane in 0..<buffer.planeCount {
                try unsafe buffer.withUnsafeMutableBytes(ofPlane: plane) { bytes in
                    for offset in 0..<bytes.count {
                        unsafe bytes[offset] = UInt8(truncatingIfNeeded: offset &* 7 &+ index &* 13)
                    }
                }
            }
            frames.append(try buffer.packedBytes())
            try buffer.unlock()
            try publisher.publish(buffer, timing: SampleTimingInfo(presentationTimeStamp: HostClock.now))
        }
        try #require(await eventually { recorder.status.framesAccepted == UInt64(count) })
        let final = recorder.stop()
        #expect(final.framesWritten == UInt64(count))
        #expect(final.failure == nil)
        return (file, frames)
    }

    @Test func aRecordingMadeInProcessReadsBackEveryFrameWithItsSequence() async throws {
        let (file, frames) = try await Self.makeRecording(count: 12)
        defer { try? FileManager.default.removeItem(at: file) }
        let recording = try readRecording(file.path)
        #expect(recording.ending == nil)
        #expect(recording.frames.map(\.bytes) == frames)
        #expect(recording.frames.compactMap(\.sequence) == Array(0..<12))
        #expect(try RecordingReader(path: file.path).isClosed)
    }

    @Test func framesReadStraightIntoBuffersEqualTheRecordedBytesWithPackedOrPaddedRows() async throws {
        let (file, frames) = try await Self.makeRecording(count: 5)
        defer { try? FileManager.default.removeItem(at: file) }
        // A pool's buffer (rows as the pool lays them out) and one with rows padded to 128 bytes (read through the
        // reader's scratch plane, row by row).
        let pool = try PixelBufferPool(
            attributes: .init(width: 64, height: 48, pixelFormat: .yuv420BiPlanarVideoRange8)
        )
        let pooled = try pool.makePixelBuffer()
        let padded = try PixelBuffer(
            width: 64,
            height: 48,
            pixelFormat: .yuv420BiPlanarVideoRange8,
            bytesPerRowAlignment: 128
        )
        #expect(padded.bytesPerRow(ofPlane: 0) > 64, "the padded buffer's rows are not padded")
        for buffer in [pooled, padded] {
            let reader = try RecordingReader(path: file.path)
            var read: [[UInt8]] = []
            var sequences: [UInt64] = []
            while let frame = try reader.nextFrame(into: buffer) {
                #expect(frame.bytes.isEmpty)
                sequences.append(frame.sequence ?? .max)
                read.append(try buffer.withLock(.readOnly) { try buffer.packedBytes() })
            }
            #expect(read == frames)
            #expect(sequences == Array(0..<5))
        }
        // A buffer of another size is refused before anything is read.
        let wrong = try PixelBuffer(width: 32, height: 48, pixelFormat: .yuv420BiPlanarVideoRange8)
        let reader = try RecordingReader(path: file.path)
        #expect(throws: RecordingError.self) { _ = try reader.nextFrame(into: wrong) }
        #expect(try reader.nextFrame()?.bytes == frames[0])
    }

    @Test func everyCutOfARecordingReadsAPrefixOfItsFramesOrFailsWithATypedError() async throws {
        let (file, frames) = try await Self.makeRecording(count: 6)
        defer { try? FileManager.default.removeItem(at: file) }
        let bytes = Array(try Data(contentsOf: file))
        let cut = temporaryFileURL("cut.mkv")
        defer { try? FileManager.default.removeItem(at: cut) }
        var truncatedSeen = false
        for length in stride(from: 0, to: bytes.count, by: 61) {
            try Data(bytes[0..<length]).write(to: cut)
            do {
                let recording = try readRecording(cut.path)
                // Whatever was read is the recording's first frames, exactly.
                #expect(Array(frames.prefix(recording.frames.count)) == recording.frames.map(\.bytes))
                if recording.ending?.code == .truncated { truncatedSeen = true }
            } catch let error as RecordingError {
                #expect([.truncated, .notARecording, .malformed].contains(error.code), "\(error) at \(length)")
            }
        }
        #expect(truncatedSeen)
    }

    @Test func corruptedBytesGiveTypedErrorsOrWrongPixelsNeverACrash() async throws {
        let (file, _) = try await Self.makeRecording(count: 4)
        defer { try? FileManager.default.removeItem(at: file) }
        let original = Array(try Data(contentsOf: file))
        let damaged = temporaryFileURL("damaged.mkv")
        defer { try? FileManager.default.removeItem(at: damaged) }
        var generator = SplitMix(seed: 27)
        var errors = 0
        // Structure lives in the first block and in each frame's headers: aim most flips there.
        let hot = Array(0..<4096) + Array(4096..<min(original.count, 4096 + 512))
        for round in 0..<400 {
            var bytes = original
            for _ in 0..<(1 + round % 4) {
                let index =
                    round % 3 == 0
                    ? Int(generator.next() % UInt64(bytes.count)) : hot[Int(generator.next() % UInt64(hot.count))]
                bytes[index] = UInt8(truncatingIfNeeded: generator.next())
            }
            try Data(bytes).write(to: damaged)
            do {
                let recording = try readRecording(damaged.path)
                if recording.ending != nil { errors += 1 }
                for frame in recording.frames { #expect(frame.bytes.count == 64 * 48 * 3 / 2) }
            } catch is RecordingError {
                errors += 1
            }
        }
        #expect(errors > 0)
    }

    @Test func aSizeFieldLargerThanTheFileIsTruncationNotAnAllocation() async throws {
        let (file, _) = try await Self.makeRecording(count: 2)
        defer { try? FileManager.default.removeItem(at: file) }
        var bytes = Array(try Data(contentsOf: file))
        // The first BlockGroup's 8-byte size field (after the Cluster header and its Timestamp), set to 2^55.
        let blockGroup = try #require((4096..<bytes.count).first { bytes[$0] == 0xA0 && bytes[$0 + 1] == 0x01 })
        bytes.replaceSubrange((blockGroup + 1)..<(blockGroup + 9), with: [0x01, 0x80, 0, 0, 0, 0, 0, 0])
        let damaged = temporaryFileURL("huge.mkv")
        defer { try? FileManager.default.removeItem(at: damaged) }
        try Data(bytes).write(to: damaged)
        let recording = try readRecording(damaged.path)
        #expect(recording.frames.isEmpty)
        #expect(recording.ending?.code == .truncated)
    }

    @Test func aFileThatIsNotMatroskaIsNotARecording() throws {
        let file = temporaryFileURL("text.mkv")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data("just some text, not EBML at all".utf8).write(to: file)
        #expect(throws: RecordingError.self) { try RecordingReader(path: file.path) }
        do {
            _ = try RecordingReader(path: file.path)
        } catch {
            #expect(error.code == .notARecording || error.code == .malformed || error.code == .truncated)
        }
    }
}

/// A seeded generator, so a failing corruption can be replayed.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
