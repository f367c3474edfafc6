import SampleBuffers

/// Frames that a subscriber did not get, and why (`captureOutput(_:didDrop:from:)` as a value).
///
/// The range can be huge (a publisher may report `0...UInt64.max`): use ``frameCount`` rather than
/// `sequences.count`, which is an `Int` and traps for ranges longer than `Int.max`.
public struct SubscriberDrop: Hashable, Sendable, CustomStringConvertible {
    /// Why the frames were dropped.
    public var reason: DroppedFrameReason
    /// The first and last sequence numbers of the dropped frames.
    public var sequences: ClosedRange<UInt64>
    /// How many frames were dropped; at most the length of ``sequences`` (less when drops that were not
    /// contiguous were merged into one report), and `UInt64.max` when the range holds more.
    public var frameCount: UInt64

    /// Creates a report of every frame in `sequences`.
    public init(reason: DroppedFrameReason, sequences: ClosedRange<UInt64>) {
        self.reason = reason
        self.sequences = sequences
        let span = sequences.upperBound - sequences.lowerBound
        self.frameCount = span == .max ? .max : span + 1
    }

    /// Creates a report.
    public init(reason: DroppedFrameReason, sequences: ClosedRange<UInt64>, frameCount: UInt64) {
        self.reason = reason
        self.sequences = sequences
        self.frameCount = frameCount
    }

    public var description: String {
        "\(reason) \(sequences.lowerBound)...\(sequences.upperBound) (\(frameCount) frames)"
    }
}

/// One thing that happened to a subscription, in order: what ``Subscriber/events`` yields.
///
/// Nothing is lost silently: every drop the publisher reports and every frame replaced before the consumer took it
/// arrives as ``dropped(_:)`` (neighbouring reports are merged into ranges), and the end of every connection as
/// ``ended(_:)``.
public enum SubscriberEvent: Sendable, CustomStringConvertible {
    /// The first connection's handshake succeeded.
    case connected(Subscriber.Session)
    /// A later connection's handshake succeeded (``Subscriber/Configuration/reconnects``); the next frame carries a
    /// discontinuity.
    case reconnected(Subscriber.Session)
    /// A frame. It is held (its surface pinned in the publisher's pool) while its sample buffer or its image
    /// buffer is referenced.
    case frame(SampleBuffer)
    /// Frames that were not delivered.
    case dropped(SubscriberDrop)
    /// The publisher's system pressure changed (``Subscriber/Configuration/receivesStatus``): the first one comes
    /// right after ``connected(_:)``, then one per change. Apple's advice applies to a consumer too: do less per
    /// frame at serious and critical. The publisher's cost and frame duration are in ``Subscriber/publisherStatus``.
    case systemPressureChanged(SystemPressureState)
    /// The connection ended: ``FrameBusError/Code-swift.struct/endOfStream`` when the publisher stopped or died;
    /// ``FrameBusError/Code-swift.struct/refused``, ``FrameBusError/Code-swift.struct/permissionDenied``,
    /// ``FrameBusError/Code-swift.struct/timedOut``, ``FrameBusError/Code-swift.struct/protocolViolation`` or
    /// ``FrameBusError/Code-swift.struct/surfaceRejected`` otherwise. With ``Subscriber/Configuration/reconnects``
    /// more events follow.
    case ended(FrameBusError)

    public var description: String {
        switch self {
        case .connected(let session): "connected(\(session.format), stream \(session.streamID))"
        case .reconnected(let session): "reconnected(\(session.format), stream \(session.streamID))"
        case .frame(let sample): "frame(\(sample.busSequenceNumber.map { "\($0)" } ?? "?"))"
        case .dropped(let drop): "dropped(\(drop))"
        case .systemPressureChanged(let state): "systemPressureChanged(\(state))"
        case .ended(let error): "ended(\(error))"
        }
    }
}

/// The ordered, bounded queue of events waiting for a subscriber's consumer; no IO, no locks (the owner locks).
///
/// Bounds (a publisher drives what goes in, so each is capped):
/// - frames: the delivery depth (1 for latest-only). A frame that arrives when the queue is full replaces the
///   oldest waiting frame, which becomes a `frameWasLate` drop and is returned to be released unseen. Except the
///   *promised* frame: once the consumer has taken an event that stood before a waiting frame (a drop report, most
///   often), that frame is not replaced; the consumer's next take reaches it. Without this a consumer slower than the
///   stream that spends a moment on each drop report would take only drop reports: each took long enough for the
///   frame behind it to be replaced, behind a new report. When the promised frame is the only one a latest-only queue
///   may hold, an arriving frame is late at once (a `frameWasLate` drop after the promised frame).
/// - drop reports: contiguous reports of the same reason merge into one range; beyond
///   ``maximumDropReports`` waiting reports, a new one merges into the newest waiting report of its reason (or the
///   newest report), whose range then spans both and whose count adds up. Counts saturate.
/// - connection events: the owner stops reconnecting while ``isHoldingConnectionEvents`` (see there).
package struct SubscriberEventQueue<Frame> {
    package enum Entry {
        case connected(Subscriber.Session, isReconnect: Bool)
        case frame(Frame, sequence: UInt64)
        case dropped(SubscriberDrop)
        case systemPressure(SystemPressureState)
        case ended(FrameBusError)
    }

    package static var maximumDropReports: Int { 64 }
    package static var maximumConnectionEvents: Int { 8 }

    private(set) var depth: Int
    package private(set) var entries: [Entry] = []
    package private(set) var frameCount = 0
    package private(set) var dropReportCount = 0
    package private(set) var connectionEventCount = 0
    /// The sequence number of the promised frame (see above), if one waits.
    package private(set) var promisedSequence: UInt64?

    package init(depth: Int) {
        self.depth = max(1, depth)
    }

    var isEmpty: Bool { entries.isEmpty }

    /// Lets up to `depth` frames wait (never fewer than before).
    mutating func raiseDepth(to depth: Int) { self.depth = max(self.depth, depth) }

    /// Whether enough connection events (connected/ended) wait that the owner should not reconnect until the
    /// consumer catches up; so a publisher that restarts in a loop cannot grow the queue.
    package var isHoldingConnectionEvents: Bool { connectionEventCount >= Self.maximumConnectionEvents }

    /// Appends a frame. Returns the frames it pushed out (the queue was full), to be released unseen.
    package mutating func append(frame: Frame, sequence: UInt64) -> [Frame] {
        var replaced: [Frame] = []
        while frameCount >= depth,
            let oldest = entries.firstIndex(where: { entry in
                if case .frame(_, let waiting) = entry { waiting != promisedSequence } else { false }
            })
        {
            guard case .frame(let old, let oldSequence) = entries[oldest] else { break }
            replaced.append(old)
            frameCount -= 1
            entries[oldest] = .dropped(SubscriberDrop(reason: .frameWasLate, sequences: oldSequence...oldSequence))
            dropReportCount += 1
            coalesce(around: oldest)
        }
        guard frameCount < depth else {
            // Only the promised frame waits and no other may: this one is late on arrival, reported after it.
            append(drop: SubscriberDrop(reason: .frameWasLate, sequences: sequence...sequence))
            replaced.append(frame)
            return replaced
        }
        entries.append(.frame(frame, sequence: sequence))
        frameCount += 1
        return replaced
    }

    /// Appends a drop report, merging it into its neighbour when it continues its range.
    package mutating func append(drop: SubscriberDrop) {
        entries.append(.dropped(drop))
        dropReportCount += 1
        coalesce(around: entries.count - 1)
    }

    /// Appends a pressure change; one still waiting is dropped first (only the newest state matters), so at most one
    /// waits however often the publisher's state changes.
    package mutating func append(systemPressure state: SystemPressureState) {
        entries.removeAll { if case .systemPressure = $0 { true } else { false } }
        entries.append(.systemPressure(state))
    }

    package mutating func append(connected session: Subscriber.Session, isReconnect: Bool) {
        entries.append(.connected(session, isReconnect: isReconnect))
        connectionEventCount += 1
    }

    package mutating func append(ended error: FrameBusError) {
        entries.append(.ended(error))
        connectionEventCount += 1
    }

    /// Takes the oldest event.
    package mutating func popFirst() -> Entry? {
        guard !entries.isEmpty else { return nil }
        let entry = entries.removeFirst()
        account(removing: entry)
        if case .frame(_, let sequence) = entry {
            if sequence == promisedSequence { promisedSequence = nil }
        } else if promisedSequence == nil {
            // The consumer took an event that stood before the first waiting frame: that frame is promised.
            for case .frame(_, let sequence) in entries {
                promisedSequence = sequence
                break
            }
        }
        return entry
    }

    /// Removes every waiting frame (cancellation), keeping the other events; returns the frames.
    mutating func removeAllFrames() -> [Frame] {
        var frames: [Frame] = []
        entries.removeAll { entry in
            guard case .frame(let frame, _) = entry else { return false }
            frames.append(frame)
            return true
        }
        frameCount = 0
        promisedSequence = nil
        return frames
    }

    private mutating func account(removing entry: Entry) {
        switch entry {
        case .frame: frameCount -= 1
        case .dropped: dropReportCount -= 1
        case .systemPressure: break
        case .connected, .ended: connectionEventCount -= 1
        }
    }

    /// Merges the drop report at `index` with contiguous same-reason neighbours, then enforces the report bound.
    private mutating func coalesce(around index: Int) {
        var index = index
        if index + 1 < entries.count, case .dropped(let next) = entries[index + 1],
            case .dropped(let this) = entries[index], let merged = Self.contiguous(this, next)
        {
            entries[index] = .dropped(merged)
            entries.remove(at: index + 1)
            dropReportCount -= 1
        }
        if index > 0, case .dropped(let previous) = entries[index - 1], case .dropped(let this) = entries[index],
            let merged = Self.contiguous(previous, this)
        {
            entries[index - 1] = .dropped(merged)
            entries.remove(at: index)
            dropReportCount -= 1
            index -= 1
        }
        guard dropReportCount > Self.maximumDropReports, case .dropped(let this) = entries[index] else { return }
        // Too many reports wait: fold this one into the newest other report, preferring one of the same reason.
        var target: Int?
        for candidate in entries.indices.reversed() where candidate != index {
            guard case .dropped(let other) = entries[candidate] else { continue }
            if other.reason == this.reason {
                target = candidate
                break
            }
            if target == nil { target = candidate }
        }
        guard let target, case .dropped(let other) = entries[target] else { return }
        entries[target] = .dropped(
            SubscriberDrop(
                reason: other.reason,
                sequences: min(
                    other.sequences.lowerBound,
                    this.sequences.lowerBound
                )...max(
                    other.sequences.upperBound,
                    this.sequences.upperBound
                ),
                frameCount: Saturating.add(other.frameCount, this.frameCount)
            )
        )
        entries.remove(at: index)
        dropReportCount -= 1
    }

    /// `first` followed by `second` as one report, if they have the same reason and `second` starts right after
    /// `first`.
    private static func contiguous(_ first: SubscriberDrop, _ second: SubscriberDrop) -> SubscriberDrop? {
        guard first.reason == second.reason, first.sequences.upperBound < .max,
            first.sequences.upperBound + 1 == second.sequences.lowerBound
        else { return nil }
        return SubscriberDrop(
            reason: first.reason,
            sequences: first.sequences.lowerBound...second.sequences.upperBound,
            frameCount: Saturating.add(first.frameCount, second.frameCount)
        )
    }
}

extension SubscriberEventQueue.Entry: Sendable where Frame: Sendable {}
extension SubscriberEventQueue: Sendable where Frame: Sendable {}
