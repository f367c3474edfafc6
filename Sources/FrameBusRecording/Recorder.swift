import Dispatch
import Foundation
import FrameBus
import Histogram
import Logging
import Surfaces
import Synchronization
import SystemPackage

/// Records a bus stream to a Matroska file, every frame as it arrives (raw, or the compressed layout as is), at the
/// disk's own pace: Apple's deterministic capture storage on Linux.
///
/// A queue-mode ``Subscriber`` hands each frame to the recorder on its connection thread, which copies it once
/// into a bounded in-memory backlog (a page-aligned ring, ``Configuration/backlogByteCount`` bytes) and releases it
/// at once. One I/O thread writes the backlog to the file in large block-aligned writes, with `O_DIRECT` where the
/// file system takes it, into space reserved ahead with `fallocate` in ``Configuration/reservationStep`` steps.
///
/// Durability: a checkpoint at least every ``Configuration/checkpointInterval`` (at most one second) closes the
/// current Matroska cluster on a block boundary and `fdatasync`s the file, so after a `kill -9` (or a power loss)
/// every frame up to the last checkpoint is in the file, bit-exact (docs/RECORDING.md).
///
/// Nothing is lost silently: a frame that does not reach the disk (a bus drop, a full backlog, a full disk, an I/O
/// error) is in the drop log, stored with the next frame and, when the recording is closed, in its tags.
///
/// ```swift
/// let recorder = try Recorder(configuration: .init(path: socketPath, outputPath: "camera.mkv"))
/// // … later …
/// let final = recorder.stop()   // drains the backlog, writes the cues and the drop log
/// print(final.framesWritten, final.drops)
/// ```
public final class Recorder: Sendable {
    /// What to record, where, and how.
    public struct Configuration: Sendable {
        /// The publisher's socket path.
        public var path: String
        /// The recording's path (created or truncated).
        public var outputPath: String
        /// Record the lossless compressed variant (the publisher encodes once; the recorder stores the compressed
        /// layout as is). Otherwise base formats (raw frames, which the real tools open).
        public var recordsCompressed = false
        /// The backlog's size in bytes (rounded up to 4096); it absorbs disk stalls. Default 256 MiB.
        public var backlogByteCount = 256 << 20
        /// Space reserved ahead of the writes, in bytes (rounded up to 4096). Default 256 MiB.
        public var reservationStep: Int64 = 256 << 20
        /// The longest time between checkpoints, 10 ms…1 s. Default 1 s.
        public var checkpointInterval: Duration = .seconds(1)
        /// The largest single write, in bytes (rounded up to 4096). Default 4 MiB.
        public var writeByteCount = 4 << 20
        /// How many writes may be in flight at once (1…16), each from its own worker thread at its own offset. Two
        /// (the default) keep the next write queued at the disk while the I/O thread counts the last one; a disk
        /// that needs a deeper queue (NVMe) may take more. Each write's latency grows with the depth
        /// (docs/BENCHMARKS.md).
        public var writesInFlight = 2
        /// Whether to try `O_DIRECT` (default); the recorder falls back to buffered writes where it is refused.
        public var usesDirectIO = true
        /// The queue depth asked of the publisher (1…64). Default 16.
        public var queueDepth = 16
        /// How long to wait for the publisher to appear.
        public var connectTimeout: Duration = .seconds(5)
        /// Publisher user ids allowed besides our own.
        public var allowedPublisherUserIDs: Set<UInt32> = []
        /// Where diagnostics go.
        public var logger: Logger
        /// Where the recorder publishes its status for `framebus top` (``RecorderStatusFile``): a directory, by
        /// default the runtime directory (``SocketPath/runtimeDirectory()``); nil publishes nothing.
        public var statusDirectory: String? = try? SocketPath.runtimeDirectory()

        /// Creates a configuration.
        public init(path: String, outputPath: String, logger: Logger = Logger(label: "framebus.recorder")) {
            self.path = path
            self.outputPath = outputPath
            self.logger = logger
        }
    }

    let core: RecorderCore
    private let subscriber: Subscriber

    /// Opens the file, connects to the publisher and starts recording; returns at once.
    ///
    /// - Throws: ``RecordingError/Code-swift.struct/invalidArgument`` for settings out of range or a backlog that
    ///   cannot be allocated; ``RecordingError/Code-swift.struct/diskFull``, ``RecordingError/Code-swift.struct/ioError``
    ///   if the file cannot be created; ``RecordingError/Code-swift.struct/subscriber`` if the subscriber cannot start.
    public init(configuration: Configuration) throws(RecordingError) {
        let interval = configuration.checkpointInterval
        guard interval >= .milliseconds(10), interval <= .seconds(1), configuration.backlogByteCount >= 1 << 20,
            configuration.reservationStep >= 4096, configuration.writeByteCount >= 4096,
            (1...64).contains(configuration.queueDepth), (1...16).contains(configuration.writesInFlight)
        else {
            throw RecordingError(
                .invalidArgument,
                "Recorder.init",
                message:
                    "checkpoint interval 10 ms…1 s, backlog ≥ 1 MiB, steps ≥ 4096 bytes, queue depth 1…64, writes in flight 1…16"
            )
        }
        let core = try RecorderCore(configuration: configuration)
        let formats = configuration.recordsCompressed ? PixelFormat.compressedFormats : PixelFormat.baseFormats
        var subscription = Subscriber.Configuration(
            path: configuration.path,
            acceptedFormats: formats,
            delivery: .queue(depth: configuration.queueDepth),
            logger: configuration.logger
        )
        subscription.connectTimeout = configuration.connectTimeout
        subscription.allowedPublisherUserIDs.formUnion(configuration.allowedPublisherUserIDs)
        // A recorder writes every byte it receives to a file: it takes sealed memfds, and DMA-BUFs too (the
        // copy into the backlog is the only read, bracketed by the surface's lock).
        do {
            subscriber = try Subscriber(configuration: subscription)
        } catch {
            // No recording: its status file (written when the core was made) goes too.
            core.statusWriter?.remove()
            throw RecordingError(.subscriber, "Recorder.init", message: "\(error)")
        }
        self.core = core
        subscriber.setDelegate(core)
        core.startIOThread()
    }

    deinit {
        subscriber.cancel()
        _ = core.stop()
    }

    /// A snapshot of the recorder's state.
    public var status: RecorderStatus { core.status() }

    /// Blocks the calling thread until the publisher's stream ended (``RecorderStatus/streamEnd`` is set: it stopped,
    /// went away, or never came) or the recorder was stopped, at most `timeout`; returns whether that happened. An
    /// event, not a poll: for a thread of its own (or C's `fb_recorder_wait`), never Swift's cooperative pool.
    public func waitForEnd(timeout: Duration) -> Bool { core.waitForEnd(timeout: timeout) }

    /// Stops recording: no frame is taken after this; the backlog is written, the last cluster checkpointed, and
    /// the file closed with its duration, cues and drop log. Idempotent; waits for the I/O thread.
    ///
    /// - Returns: the final status.
    @discardableResult
    public func stop() -> RecorderStatus {
        subscriber.cancel()
        let final = core.stop()
        core.signalEnd()
        return final
    }
}

/// The recorder's shared state and its two sides: the producer (the subscriber's connection thread, in the
/// delegate callbacks) and the I/O thread. One Mutex guards the positions; bytes are copied outside it.
final class RecorderCore: SubscriberDelegate, Sendable {
    /// Stream positions (bytes from the start of the file). `released ≤ written ≤ committed ≤ reserved`;
    /// the ring holds `[released, reserved)`.
    struct State {
        var track: RecordingTrack?
        var reserved = 0
        var committed = 0
        var written = 0
        var durable = 0
        var released = 0
        var checkpointTarget = 0
        var copying = false
        var lastCheckpoint: UInt64
        var clusterOpen = false
        var clusterTimestamp: UInt64 = 0
        var lastTimestamp: UInt64 = 0
        var firstTime: MediaTime?
        var firstHostNanoseconds: UInt64?
        var cues: [(timestamp: UInt64, position: UInt64)] = []
        var pendingDrops: [RecordingDrop] = []
        var pendingDiscontinuity = false
        var dropLog: [RecordingDrop] = []
        var dropCounts: [RecordingDropReason: UInt64] = [:]
        var framesAccepted: UInt64 = 0
        var framesWritten: UInt64 = 0
        /// Frames in the ring not yet wholly written: (sequence, end position), oldest first from `inFlightHead`.
        var inFlight: [(sequence: UInt64, end: Int)] = []
        var inFlightHead = 0
        /// The end of the last frame written whole.
        var lastCompleteEnd = 0
        var backlogPeak = 0
        var failure: RecordingError?
        var streamEnd: FrameBusError?
        var stopping = false
        var closed = false
        var writeStarted: UInt64?
        var syncing = false
        var reserving = false
        var usesDirectIO = false
        var directIORefusal: String?
        var reservedEnd: Int64 = 0
        var rateSamples: [(nanoseconds: UInt64, written: Int)] = []
        var latency = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .two)

        /// A rate sample every 250 ms, kept for 3 s (from the I/O thread's rounds and from status snapshots, so an
        /// idle recorder's rate falls to zero without the I/O thread waking for it).
        mutating func sampleRate(now: UInt64) {
            if rateSamples.last.map({ now &- $0.nanoseconds >= 250_000_000 }) ?? true {
                rateSamples.append((now, written))
                if rateSamples.count > 12 { rateSamples.removeFirst() }
            }
        }

        mutating func noteDrop(_ reason: RecordingDropReason, _ sequences: ClosedRange<UInt64>, count: UInt64) {
            let drop = RecordingDrop(reason: reason, sequences: sequences, frameCount: count)
            dropCounts[reason, default: 0] &+= count
            Self.merge(drop, into: &pendingDrops, limit: FrameRecord.maximumDrops)
            Self.merge(drop, into: &dropLog, limit: RecorderCore.maximumDropLog)
        }

        /// Appends, merging with the last record when it has the same reason and the ranges touch, or when the
        /// list is at its limit (then the last record's range spans both and the counts add).
        static func merge(_ drop: RecordingDrop, into list: inout [RecordingDrop], limit: Int) {
            if var last = list.last,
                (last.reason == drop.reason && last.sequences.upperBound &+ 1 == drop.sequences.lowerBound)
                    || list.count >= limit
            {
                last.sequences =
                    min(
                        last.sequences.lowerBound,
                        drop.sequences.lowerBound
                    )...max(
                        last.sequences.upperBound,
                        drop.sequences.upperBound
                    )
                last.frameCount =
                    last.frameCount.addingReportingOverflow(drop.frameCount).overflow
                    ? .max : last.frameCount + drop.frameCount
                if last.reason != drop.reason { last.reason = drop.reason }
                list[list.count - 1] = last
            } else {
                list.append(drop)
            }
        }
    }

    static let maximumDropLog = 4096
    /// Space always kept reserved past the data, for the trailer written when the disk is full.
    static let closingReserve: Int64 = 1 << 20

    let configuration: Recorder.Configuration
    let ring: AlignedRing
    let file: RecordingFile
    let state: Mutex<State>
    let wake = DispatchSemaphore(value: 0)
    let finished = DispatchSemaphore(value: 0)
    let stopOnce = Mutex(false)
    let finalStatus = Mutex<RecorderStatus?>(nil)
    let checkpointNanoseconds: UInt64
    let writeByteCount: Int
    let reservationStep: Int64
    let writers: WriteWorkers
    let statusWriter: RecorderStatusWriter?

    init(configuration: Recorder.Configuration) throws(RecordingError) {
        self.configuration = configuration
        let capacity = Self.roundUp(configuration.backlogByteCount)
        guard let ring = AlignedRing(capacity: capacity) else {
            throw RecordingError(
                .invalidArgument,
                "Recorder.init",
                message: "cannot allocate a backlog of \(capacity) bytes"
            )
        }
        self.ring = ring
        file = try RecordingFile(path: configuration.outputPath, direct: configuration.usesDirectIO)
        let (seconds, attoseconds) = configuration.checkpointInterval.components
        checkpointNanoseconds = UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
        writeByteCount = min(Self.roundUp(configuration.writeByteCount), capacity / 4)
        reservationStep = Int64(Self.roundUp(Int(clamping: configuration.reservationStep)))
        writers = WriteWorkers(depth: configuration.writesInFlight, ring: ring, file: file, wake: wake)
        statusWriter = RecorderStatusWriter(
            directory: configuration.statusDirectory,
            socketPath: URL(fileURLWithPath: configuration.path).standardizedFileURL.path,
            outputPath: URL(fileURLWithPath: configuration.outputPath).standardizedFileURL.path
        )
        var initial = State(lastCheckpoint: Syscall.monotonicNanoseconds())
        initial.usesDirectIO = file.isDirect
        initial.directIORefusal = file.directRefusal
        state = Mutex(initial)
        if let refusal = file.directRefusal {
            configuration.logger.notice("O_DIRECT refused (\(refusal)): buffered writes with sync_file_range")
        }
        // Published before the subscriber connects: whoever sees the recorder on the bus finds its status.
        statusWriter?.write(status())
    }

    static func roundUp(_ value: Int) -> Int { (value + 4095) / 4096 * 4096 }

    func startIOThread() {
        writers.start()
        let thread = Thread { [self] in
            runIO()
            finished.signal()
        }
        thread.name = "framebus.recorder.io"
        thread.start()
    }

    // MARK: Producer (the subscriber's connection thread)

    func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {
        guard let image = sampleBuffer.imageBuffer else { return }
        let sequence = sampleBuffer.busSequenceNumber ?? 0
        let frameTrack = RecordingTrack(pixelFormat: image.pixelFormat, width: image.width, height: image.height)
        // The compressed frame's size, read once from its header (hostile memory) and clamped to the surface.
        var payload = 0
        if image.pixelFormat.isCompressed {
            guard let used = try? SurfaceCodec.bytesUsed(of: image), used > 0 else {
                state.withLock { $0.noteDrop(.formatChange, sequence...sequence, count: 1) }
                configuration.logger.warning("frame \(sequence): unreadable compressed header, dropped")
                return
            }
            payload = min(used, image.surface.allocationSize)
        } else {
            payload = frameTrack.maximumFrameByteCount
        }
        let now = Syscall.monotonicNanoseconds()
        let time = sampleBuffer.presentationTimeStamp

        enum Plan {
            case drop(RecordingDropReason)
            case write(start: Int, prefix: [UInt8])
        }
        let plan = state.withLock { state -> Plan in
            if state.stopping { return .drop(.diskFull) }
            if let failure = state.failure { return .drop(failure.code == .diskFull ? .diskFull : .ioError) }
            var prefix: [UInt8] = []
            if let track = state.track {
                if track != frameTrack || !track.isValidGeometry { return .drop(.formatChange) }
            } else {
                guard frameTrack.isValidGeometry else { return .drop(.formatChange) }
                prefix = MatroskaLayout.headerBlock(track: frameTrack)
            }
            // The Matroska timestamp: milliseconds since the first frame (never decreasing).
            // Strictly increasing after the first frame: tools that remux (ffmpeg) want increasing timestamps.
            var timestamp = state.framesAccepted == 0 && state.track == nil ? 0 : state.lastTimestamp + 1
            if time.isNumeric {
                if state.firstTime == nil { state.firstTime = time }
                if let first = state.firstTime {
                    let milliseconds = (time - first).seconds * 1000
                    if milliseconds.isFinite, milliseconds >= 0, milliseconds < 1e15 {
                        timestamp = max(timestamp, UInt64(milliseconds.rounded()))
                    }
                }
            } else {
                if state.firstHostNanoseconds == nil { state.firstHostNanoseconds = now }
                timestamp = max(timestamp, (now &- (state.firstHostNanoseconds ?? now)) / 1_000_000)
            }
            var position = state.reserved + prefix.count
            var closesCluster = false
            var checkpoint = state.checkpointTarget
            if state.clusterOpen,
                now &- state.lastCheckpoint >= checkpointNanoseconds || timestamp - state.clusterTimestamp > 30_000
            {
                let padding = MatroskaLayout.padding(from: position)
                prefix += padding
                position += padding.count
                checkpoint = position
                closesCluster = true
            }
            let opensCluster = !state.clusterOpen || closesCluster
            if opensCluster {
                prefix += MatroskaLayout.clusterHeader(timestamp: timestamp)
            }
            let clusterTimestamp = opensCluster ? timestamp : state.clusterTimestamp
            let record = FrameRecord(
                sequence: sequence,
                presentationTime: time,
                duration: sampleBuffer.duration,
                isDiscontinuity: sampleBuffer.isDiscontinuity || state.pendingDiscontinuity,
                drops: state.pendingDrops
            )
            prefix += MatroskaLayout.framePrefix(
                record: record,
                relativeTimestamp: Int16(clamping: Int64(timestamp) - Int64(clusterTimestamp)),
                payloadByteCount: payload
            )
            // Room for this frame, and for the padding of the checkpoint after it.
            let total = prefix.count + payload
            let used = state.reserved - state.released
            guard used + total + 2 * MatroskaLayout.blockSize <= ring.capacity else { return .drop(.backlogFull) }
            if state.track == nil { state.track = frameTrack }
            if closesCluster {
                state.checkpointTarget = checkpoint
                state.lastCheckpoint = now
            }
            if opensCluster {
                state.cues.append((timestamp, UInt64(position - MatroskaLayout.segmentDataOffset)))
                state.clusterOpen = true
                state.clusterTimestamp = timestamp
            }
            state.lastTimestamp = timestamp
            state.pendingDrops = []
            state.pendingDiscontinuity = false
            let start = state.reserved
            state.reserved += total
            state.copying = true
            state.inFlight.append((sequence, state.reserved))
            state.backlogPeak = max(state.backlogPeak, state.reserved - state.released)
            return .write(start: start, prefix: prefix)
        }
        switch plan {
        case .drop(let reason):
            state.withLock { state in
                if reason == .backlogFull || reason == .formatChange { state.pendingDiscontinuity = true }
                if !state.stopping { state.noteDrop(reason, sequence...sequence, count: 1) }
            }
        case .write(let start, let prefix):
            ring.write(prefix, at: start)
            let copied =
                image.pixelFormat.isCompressed
                ? FrameCopy.copyCompressed(image, byteCount: payload, into: ring, at: start + prefix.count)
                : FrameCopy.copyRaw(image, track: frameTrack, into: ring, at: start + prefix.count)
            if !copied {
                // The frame's memory could not be read as its layout says: its bytes in the file are whatever the
                // ring held, so say so in the drop log (the frame is there, but not the publisher's bytes).
                configuration.logger.warning("frame \(sequence): could not read its surface")
            }
            state.withLock { state in
                state.committed = state.reserved
                state.copying = false
                state.framesAccepted += 1
                if !copied { state.noteDrop(.formatChange, sequence...sequence, count: 1) }
            }
            wake.signal()
        }
    }

    func subscriber(_ subscriber: Subscriber, didDrop sampleBuffer: SampleBuffer) {
        guard let reason = sampleBuffer.droppedFrameReason, let range = sampleBuffer.busSequenceRange else { return }
        let count = sampleBuffer.busDroppedFrameCount ?? 1
        state.withLock { state in
            guard !state.stopping else { return }
            state.noteDrop(RecordingDropReason(bus: reason), range, count: count)
            if reason == .discontinuity { state.pendingDiscontinuity = true }
        }
    }

    func subscriber(_ subscriber: Subscriber, didEndWith error: FrameBusError) {
        state.withLock { $0.streamEnd = error }
        signalEnd()
    }

    /// Signalled once, when the stream ends or the recorder stops: what ``Recorder/waitForEnd(timeout:)`` waits on.
    /// Each waiter that takes the signal gives it back, so every waiter wakes.
    private let end = DispatchSemaphore(value: 0)
    private let endSignalled = Mutex(false)

    /// Wakes every waiter of ``waitForEnd(timeout:)``, once.
    func signalEnd() {
        let first = endSignalled.withLock { signalled -> Bool in
            defer { signalled = true }
            return !signalled
        }
        if first { end.signal() }
    }

    /// Blocks until the stream ended or the recorder stopped, at most `timeout`; whether it did.
    func waitForEnd(timeout: Duration) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let nanoseconds = max(0, min(seconds, 1 << 32)) * 1_000_000_000 + max(0, attoseconds / 1_000_000_000)
        guard end.wait(timeout: .now() + .nanoseconds(Int(nanoseconds))) == .success else { return false }
        end.signal()
        return true
    }

    // MARK: The I/O thread

    private func fail(_ error: Errno, _ operation: String) {
        let failure = RecordingError(RecordingFile.code(for: error), operation, errno: error)
        configuration.logger.error("recording stops writing: \(failure)")
        state.withLock { state in
            if state.failure == nil { state.failure = failure }
        }
    }

    /// The I/O thread: it plans which committed bytes to write, hands them to the write workers in pieces of at
    /// most ``writeByteCount`` (up to ``Configuration/writesInFlight`` at once, at disjoint offsets), reserves space
    /// ahead of them, counts what is written whole (in stream order), and checkpoints. It sleeps on ``wake`` when
    /// there is nothing to do: the producer signals it after each frame, a worker after each write, ``stop()`` once;
    /// its only time limit is the next checkpoint of an open cluster (never a poll of an idle recorder).
    private func runIO() {
        // Positions the I/O thread alone moves: handed to workers up to `submitted`, written contiguously up to
        // `written` (pieces that finished out of order wait in `finished`).
        var submitted = state.withLock { $0.written }
        var written = submitted
        var inFlight: [Int: UInt64] = [:]  // position → when it was handed over
        var finished: [Int: (count: Int, elapsed: UInt64)] = [:]
        var failed = false
        var statusWritten: UInt64 = 0
        var statusStale = false
        while true {
            var progressed = false
            // 1. Writes that finished.
            for completion in writers.takeCompletions() {
                progressed = true
                inFlight[completion.position] = nil
                switch completion.result {
                case .success: finished[completion.position] = (completion.count, completion.elapsed)
                case .failure(let error):
                    if !failed { fail(error, "pwrite") }
                    failed = true
                }
            }
            if failed {
                // Nothing more is handed over; the close waits for the writes in flight (their bytes are not counted).
                if inFlight.isEmpty { break }
                _ = wake.wait(timeout: .now() + .seconds(1))
                continue
            }
            var latencies: [UInt64] = []
            while let piece = finished.removeValue(forKey: written) {
                written += piece.count
                latencies.append(piece.elapsed)
            }
            if !latencies.isEmpty {
                noteWritten(upTo: written, latencies: latencies, oldestInFlight: inFlight.values.min())
            }

            // 2. What to write next, and whether a checkpoint is due.
            let now = Syscall.monotonicNanoseconds()
            let plan = planIO(now: now, written: written)
            if plan.failed {
                if inFlight.isEmpty { break }
                failed = true
                continue
            }

            // 3. Hand pieces to the workers, space reserved ahead of each.
            while submitted < plan.end, inFlight.count < writers.depth {
                let offset = submitted % ring.capacity
                let count = min(plan.end - submitted, writeByteCount, ring.capacity - offset)
                if !reserve(upTo: submitted + count) {
                    failed = true
                    break
                }
                let began = Syscall.monotonicNanoseconds()
                if inFlight.isEmpty { state.withLock { $0.writeStarted = began } }
                inFlight[submitted] = began
                writers.submit(position: submitted, count: count)
                submitted += count
                progressed = true
            }
            if failed { continue }

            // 4. A checkpoint whose bytes are all written.
            if let checkpoint = plan.checkpoint, written >= checkpoint {
                progressed = true
                state.withLock { $0.syncing = true }
                let result = file.checkpoint(from: Int64(plan.durable), upTo: Int64(checkpoint))
                state.withLock { state in
                    state.syncing = false
                    if case .success = result { state.durable = checkpoint }
                }
                if case .failure(let error) = result {
                    fail(error, "fdatasync")
                    failed = true
                    continue
                }
            }
            if plan.finishing, inFlight.isEmpty, written >= plan.end, plan.checkpoint.map({ written >= $0 }) ?? true {
                break
            }
            // The status file: at most once a second while writing, and once more when the recorder goes idle.
            if progressed { statusStale = true }
            let goingIdle = !progressed && inFlight.isEmpty && plan.checkpointDue == nil
            if let statusWriter, statusStale, goingIdle || now &- statusWritten >= 1_000_000_000 {
                statusWriter.write(status())
                statusWritten = now
                statusStale = false
            }
            if !progressed {
                // Idle, or waiting for writes in flight: sleep until the producer, a worker or stop() signals, or
                // until the open cluster's checkpoint is due.
                if let due = plan.checkpointDue {
                    let delay = due > now ? due - now : 0
                    _ = wake.wait(timeout: .now() + .nanoseconds(Int(clamping: max(delay, 1_000_000))))
                } else {
                    wake.wait()
                }
            }
        }
        writers.finish()
        close()
        statusWriter?.remove()
    }

    /// What the I/O thread does next, decided under the lock.
    private struct IOPlan {
        /// Write up to here (committed bytes, block-aligned).
        var end: Int
        /// A checkpoint to make once the bytes up to it are written.
        var checkpoint: Int?
        var durable: Int
        /// The recorder is stopping and everything is committed: leave once it is written and checkpointed.
        var finishing: Bool
        var failed: Bool
        /// When the open cluster's checkpoint falls due (nil: no cluster open, nothing to wait for).
        var checkpointDue: UInt64?
    }

    private func planIO(now: UInt64, written: Int) -> IOPlan {
        state.withLock { state -> IOPlan in
            // A checkpoint that no frame brings (the stream is idle, or stopping): pad the open cluster to the block
            // boundary here. Not while the producer is copying (its bytes are not committed yet).
            let due = now &- state.lastCheckpoint >= checkpointNanoseconds || state.stopping
            if state.failure == nil, !state.copying, state.clusterOpen, due, state.committed > state.checkpointTarget {
                let padding = MatroskaLayout.padding(from: state.committed)
                // The producer always leaves two blocks free for this.
                ring.write(padding, at: state.committed)
                state.reserved += padding.count
                state.committed = state.reserved
                state.checkpointTarget = state.committed
                state.clusterOpen = false
                state.lastCheckpoint = now
            }
            // Only committed bytes are written: a checkpoint the producer has planned lies beyond them until its
            // frame is copied.
            let end = state.committed / MatroskaLayout.blockSize * MatroskaLayout.blockSize
            let finishing =
                state.stopping && !state.copying && state.committed == state.checkpointTarget && !state.clusterOpen
            state.sampleRate(now: now)
            let checkpointDue: UInt64? =
                state.clusterOpen && state.committed > state.checkpointTarget
                ? state.lastCheckpoint &+ checkpointNanoseconds : nil
            return IOPlan(
                end: end,
                checkpoint: state.checkpointTarget > state.durable && state.checkpointTarget <= end
                    ? state.checkpointTarget : nil,
                durable: state.durable,
                finishing: finishing || (state.stopping && state.committed == state.reserved && state.track == nil),
                failed: state.failure != nil,
                checkpointDue: checkpointDue
            )
        }
    }

    /// Reserves space ahead of a write ending at `end` (plus room for the closing trailer). False after a failure
    /// (recorded).
    private func reserve(upTo end: Int) -> Bool {
        guard file.reserves else { return true }
        let needed = Int64(end) + Self.closingReserve
        guard needed > file.reservedEnd else { return true }
        state.withLock { $0.reserving = true }
        let result = file.reserve(upTo: needed, step: reservationStep)
        let reservedEnd = file.reservedEnd
        state.withLock { state in
            state.reserving = false
            state.reservedEnd = reservedEnd
        }
        if case .failure(let error) = result {
            fail(error, "fallocate")
            return false
        }
        return true
    }

    /// Everything up to `position` is in the file: frames counted, their ring space given back (except the block
    /// that holds the last one's end, which a trailer written after a failure starts from).
    private func noteWritten(upTo position: Int, latencies: [UInt64], oldestInFlight: UInt64?) {
        let direct = file.isDirect
        let refusal = file.directRefusal
        state.withLock { state in
            state.writeStarted = oldestInFlight
            for elapsed in latencies { _ = state.latency.record(elapsed / 1000) }
            state.usesDirectIO = direct
            state.directIORefusal = refusal
            state.written = position
            while state.inFlightHead < state.inFlight.count, state.inFlight[state.inFlightHead].end <= position {
                state.lastCompleteEnd = state.inFlight[state.inFlightHead].end
                state.inFlightHead += 1
                state.framesWritten += 1
            }
            if state.inFlightHead > 1024 {
                state.inFlight.removeFirst(state.inFlightHead)
                state.inFlightHead = 0
            }
            let keep = state.lastCompleteEnd / MatroskaLayout.blockSize * MatroskaLayout.blockSize
            state.released = max(state.released, min(keep, position))
        }
    }

    /// Closes the recording: after a clean end, the trailer (cues, drop log) after the last checkpoint; after a
    /// failure, the trailer right after the last frame written whole (over the partial one). Then the header
    /// block's Segment size, SeekHead and Duration.
    private func close() {
        let snapshot = state.withLock { state -> (State, [UInt8]?) in
            guard state.track != nil else { return (state, nil) }
            var end = state.committed
            var head: [UInt8] = []
            if state.failure != nil {
                // Frames not wholly written are lost: log them with the failure's reason.
                let reason: RecordingDropReason = state.failure?.code == .diskFull ? .diskFull : .ioError
                for index in state.inFlightHead..<state.inFlight.count {
                    let sequence = state.inFlight[index].sequence
                    state.noteDrop(reason, sequence...sequence, count: 1)
                }
                end = max(state.lastCompleteEnd, MatroskaLayout.blockSize)
                let blockStart = end / MatroskaLayout.blockSize * MatroskaLayout.blockSize
                head = end > blockStart ? ring.copy(at: blockStart, count: end - blockStart) : []
                state.cues.removeAll { Int($0.position) + MatroskaLayout.segmentDataOffset >= end }
            }
            state.committed = end
            return (state, head)
        }
        let final = snapshot.0
        if let track = final.track, let head = snapshot.1 {
            let end = final.committed
            let blockStart = end / MatroskaLayout.blockSize * MatroskaLayout.blockSize
            let trailer = MatroskaLayout.trailer(
                at: end,
                track: track,
                cues: final.cues,
                frames: final.framesWritten,
                drops: final.dropLog
            )
            let fileEnd = end + trailer.bytes.count
            var result = file.write(head + trailer.bytes, at: Int64(blockStart))
            if case .success = result {
                let closing = MatroskaLayout.Closing(
                    durationMilliseconds: Double(final.lastTimestamp) + Self.lastFrameDuration(final),
                    cuesPosition: trailer.cuesPosition,
                    tagsPosition: trailer.tagsPosition
                )
                result = file.write(MatroskaLayout.headerBlock(track: track, closing: closing), at: 0)
            }
            if case .success = result { result = file.finish(size: Int64(fileEnd)) }
            if case .failure(let error) = result {
                configuration.logger.error(
                    "closing the recording failed: \(error); it is readable up to its last frame written"
                )
                fail(error, "close")
            } else {
                state.withLock { $0.written = fileEnd }
            }
        } else {
            _ = file.finish(size: 0)
        }
        state.withLock { $0.closed = true }
    }

    /// The last frame's duration in milliseconds (its recorded duration, or the average frame interval).
    private static func lastFrameDuration(_ state: State) -> Double {
        guard state.framesWritten > 1 else { return 0 }
        return Double(state.lastTimestamp) / Double(state.framesWritten - 1)
    }

    // MARK: Status and stopping

    func stop() -> RecorderStatus {
        let first = stopOnce.withLock { stopped -> Bool in
            defer { stopped = true }
            return !stopped
        }
        if first {
            state.withLock { $0.stopping = true }
            wake.signal()
        }
        // Every caller waits for the I/O thread's end and passes the signal on to the next.
        finished.wait()
        finished.signal()
        if first {
            let status = status()
            finalStatus.withLock { $0 = status }
            return status
        }
        return finalStatus.withLock { $0 } ?? status()
    }

    func status() -> RecorderStatus {
        let now = Syscall.monotonicNanoseconds()
        var status = state.withLock { state -> RecorderStatus in
            state.sampleRate(now: now)
            var status = RecorderStatus()
            status.track = state.track
            status.framesAccepted = state.framesAccepted
            status.framesWritten = state.framesWritten
            status.bytesWritten = Int64(state.written)
            status.bytesDurable = Int64(state.durable)
            status.drops = state.dropCounts
            status.dropLog = state.dropLog
            status.backlogBytes = max(0, state.reserved - state.written)
            status.backlogCapacity = ring.capacity
            status.backlogPeakBytes = state.backlogPeak
            status.usesDirectIO = state.usesDirectIO
            status.directIORefusal = state.directIORefusal
            status.failure = state.failure
            status.streamEnd = state.streamEnd
            status.isClosed = state.closed
            status.writeLatencyP50Microseconds = state.latency.valueAtPercentile(50)
            status.writeLatencyP99Microseconds = state.latency.valueAtPercentile(99)
            if let first = state.rateSamples.first, now > first.nanoseconds + 500_000_000 {
                status.bytesPerSecond = Double(state.written - first.written) / (Double(now - first.nanoseconds) / 1e9)
            }
            if let started = state.writeStarted, now &- started > 100_000_000 { status.busyReasons.insert(.writeStall) }
            if state.syncing { status.busyReasons.insert(.syncing) }
            if state.reserving { status.busyReasons.insert(.reserving) }
            if (state.reserved - state.written) * 2 > ring.capacity { status.busyReasons.insert(.backlogFilling) }
            if !state.usesDirectIO && configuration.usesDirectIO { status.busyReasons.insert(.bufferedWrites) }
            let free = (try? Syscall.availableBytes(file.descriptor).get()) ?? 0
            status.remainingBytes =
                free.addingReportingOverflow(max(0, state.reservedEnd - Int64(state.written)))
                .partialValue
            return status
        }
        if status.bytesPerSecond > 0 { status.remainingSeconds = Double(status.remainingBytes) / status.bytesPerSecond }
        return status
    }
}
