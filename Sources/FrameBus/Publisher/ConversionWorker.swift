import Foundation
import PixelBuffers

/// The thread that makes every representation of a frame other than the published one (the compressed variant, or
/// the base of a compressed frame) and fans it out, so that encoding never runs on the producer's thread.
///
/// It is latest-only: it holds at most one frame waiting besides the one it converts. A frame that arrives while
/// another waits replaces it, and the replaced frame is *shed* in its conversion formats: their subscribers get a
/// DROP for it (``PublisherStateMachine/shed(_:format:now:)``), in sequence order with the frames the worker delivers.
/// So when conversion takes longer than the frame interval, the producer and the subscribers of the published format
/// keep their rate and the converted formats get what the worker can make; the cost meter tells the producer.
///
/// The worker keeps at most two of the producer's buffers out of their pool (one converting, one waiting).
final class ConversionWorker: @unchecked Sendable {
    // `@unchecked Sendable`: every mutable property is read and written only with `condition` locked.

    /// One frame to convert.
    struct Job: Sendable {
        var buffer: PixelBuffer
        var template: WireFrame
        /// The formats to make, in the frame plan's order.
        var formats: [UInt32]
    }

    /// What the worker does next, in sequence order.
    enum Item: Sendable {
        /// Convert and fan out a frame.
        case convert(Job)
        /// Frames replaced before the worker took them: a DROP for the subscribers of these formats.
        case shed(ClosedRange<UInt64>, formats: [UInt32])
        /// Frames the producer reported lost while the worker had work: the DROP for the subscribers it serves waits
        /// for the frames before it (docs/PROTOCOL.md §4.2).
        case drop(ClosedRange<UInt64>, WireDropReason, formats: [UInt32])
    }

    private let condition = NSCondition()
    /// In sequence order. A `.convert` that is the last item is replaced by the next frame (and becomes a `.shed`);
    /// the rest are drops, one per run of replaced frames or per report, so the list grows only while one frame is
    /// being converted, by at most one item per frame published or loss reported meanwhile.
    private var items: [Item] = []
    private var isStopped = false
    private var isStarted = false
    private var isBusy = false
    /// The frame being converted now (``stop()`` accounts for it).
    private var inFlight: Job?
    /// Tests hold the worker still, to stand for an encoder slower than any frame interval without timing anything.
    private var isPaused = false

    /// Hands a frame to the worker, starting its thread on first use.
    ///
    /// - Returns: the buffer of the frame it replaced, if any, for the caller to drop once it has left its locks
    ///   (its last reference may run the pool's observers).
    func submit(_ job: Job, core: PublisherCore) -> PixelBuffer? {
        condition.lock()
        defer { condition.unlock() }
        guard !isStopped else { return job.buffer }
        var replaced: PixelBuffer?
        if case .convert(let old) = items.last {
            items.removeLast()
            replaced = old.buffer
            let sequence = old.template.sequence
            if case .shed(let range, let formats) = items.last, formats == old.formats, range.upperBound < sequence {
                items[items.count - 1] = .shed(range.lowerBound...sequence, formats: formats)
            } else {
                items.append(.shed(sequence...sequence, formats: old.formats))
            }
        }
        items.append(.convert(job))
        if !isStarted {
            isStarted = true
            let thread = Thread { [self] in
                while let item = next() { core.carryOut(item) }
            }
            thread.name = "framebus.convert"
            thread.start()
        }
        condition.signal()
        return replaced
    }

    /// Queues the DROP of frames the producer reported lost behind the work that waits, if any work waits or runs.
    ///
    /// - Returns: false when the worker is idle: the caller sends the DROP itself, at once.
    func deferDrop(_ range: ClosedRange<UInt64>, _ reason: WireDropReason, formats: [UInt32]) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !isStopped, isBusy || !items.isEmpty else { return false }
        // After everything queued: the frames waiting were published before the loss was reported.
        items.append(.drop(range, reason, formats: formats))
        condition.signal()
        return true
    }

    /// Holds the worker after the item it carries out now (for tests: an encoder that takes as long as a test wants).
    func pause() {
        condition.lock()
        isPaused = true
        condition.unlock()
    }

    /// Lets a paused worker go on.
    func resume() {
        condition.lock()
        isPaused = false
        condition.signal()
        condition.unlock()
    }

    /// Whether nothing is being converted and nothing waits (for tests).
    var isIdle: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !isBusy && items.isEmpty
    }

    /// Ends the worker: what waits is dropped, and its thread ends after the item it carries out now.
    ///
    /// - Returns: what it had not carried out, the frame it converts now first, in sequence order: the publisher
    ///   tells the subscribers of those frames before its END_OF_STREAM, so every sequence is accounted for. The caller
    ///   drops the buffers in them once it has left its locks.
    func stop() -> [Item] {
        condition.lock()
        defer { condition.unlock() }
        isStopped = true
        var left = inFlight.map { [Item.convert($0)] } ?? []
        left += items
        items.removeAll()
        inFlight = nil
        condition.broadcast()
        return left
    }

    private func next() -> Item? {
        condition.lock()
        defer { condition.unlock() }
        isBusy = false
        inFlight = nil
        while (items.isEmpty || isPaused) && !isStopped { condition.wait() }
        if isStopped { return nil }
        isBusy = true
        let item = items.removeFirst()
        if case .convert(let job) = item { inFlight = job }
        return item
    }
}

extension PublisherCore {
    // MARK: Conversion (on the conversion worker's thread)

    /// Carries out one item of the worker, on its thread.
    func carryOut(_ item: ConversionWorker.Item) {
        var released: [PixelBuffer] = []
        defer { released.removeAll() }  // outside every lock
        switch item {
        case .shed(let range, let formats):
            let dropped = withState(releasingInto: &released) { state in
                let now = ProcessInfoShim.monotonicNanoseconds()
                var dropped: [(format: UInt32, subscribers: [UInt64])] = []
                for format in formats {
                    let (actions, subscribers) = state.machine.shed(range, format: format, now: now)
                    perform(actions, &state, now: now)
                    if !subscribers.isEmpty { dropped.append((format, subscribers.map(\.rawValue))) }
                }
                return dropped
            }
            let frames = WireDrop(range, reason: .outOfBuffers).frameCount
            costMeter.withLock { meter in
                for entry in dropped {
                    meter.shed(format: entry.format, frames: frames, subscribers: entry.subscribers)
                }
            }
        case .drop(let range, let reason, let formats):
            withState(releasingInto: &released) { state in
                let now = ProcessInfoShim.monotonicNanoseconds()
                perform(state.machine.deferredDrop(range, reason: reason, formats: formats, now: now), &state, now: now)
            }
        case .convert(let job):
            let started = ProcessInfoShim.monotonicNanoseconds()
            for fourCC in job.formats {
                guard let format = try? PixelFormat(fourCC: fourCC) else { continue }
                let converted = convert(job.buffer, to: format)
                deliverRepresentation(
                    job.template,
                    fourCC: fourCC,
                    converted: converted?.0,
                    bytesUsed: converted?.1 ?? 0,
                    isConversion: true,
                    knownDescribed: false,
                    releasingInto: &released
                )
            }
            let spent = ProcessInfoShim.monotonicNanoseconds() &- started
            costMeter.withLock { $0.converted(nanoseconds: spent) }
        }
    }
}

extension PublisherCore {
    /// Writes a cost line (overloaded, or recovered), at most one per ``costLogInterval`` while overloaded.
    func logCost(_ line: String) {
        guard line.hasPrefix("overloaded") else {
            configuration.logger.notice("\(line)")
            return
        }
        let now = ProcessInfoShim.monotonicNanoseconds()
        let admitted = withState { state in
            state.logLimiter.admit(key: "cost", message: line, now: now, interval: Self.costLogInterval)
        }
        guard let admitted else { return }
        configuration.logger.warning("\(admitted)")
    }

    /// While overloaded, the cost line is written at most this often (the first one at once).
    static let costLogInterval: UInt64 = 10_000_000_000

    /// The cost of the last window (documented on ``Publisher/cost``).
    var cost: PublisherCost { costMeter.withLock { $0.current } }
}
