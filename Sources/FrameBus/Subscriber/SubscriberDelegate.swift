import SampleBuffers

/// Receives a subscriber's frames (AVCaptureVideoDataOutputSampleBufferDelegate): on the subscriber's connection
/// thread with ``Subscriber/setDelegate(_:)`` (the default, one thread wake-up per frame; a callback must not block),
/// or asynchronously on a queue of your choice with ``Subscriber/setDelegate(_:queue:)`` (a second wake-up per frame).
///
/// Callbacks arrive one at a time and in order. The subscriber holds its delegate
/// weakly, so an owner may be its own subscriber's delegate.
///
/// A frame stays held (its surface pinned in the publisher's pool) while any reference to its ``SampleBuffer``
/// or its image buffer exists; dropping the last reference returns it to the publisher.
public protocol SubscriberDelegate: AnyObject, Sendable {
    /// A frame arrived (`captureOutput(_:didOutput:from:)`). Keep `sampleBuffer` only as long as you need it.
    func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer)
    /// Frames were dropped (`captureOutput(_:didDrop:from:)`): `sampleBuffer` is a marker without an image whose
    /// `droppedFrameReason` says why and whose ``SampleBuffer/busSequenceRange`` says which frames.
    func subscriber(_ subscriber: Subscriber, didDrop sampleBuffer: SampleBuffer)
    /// The stream ended: the publisher stopped or died (``FrameBusError/Code-swift.struct/endOfStream``), refused
    /// us, or broke the protocol. With ``Subscriber/Configuration/reconnects``, frames resume after a reconnect.
    func subscriber(_ subscriber: Subscriber, didEndWith error: FrameBusError)
    /// A handshake succeeded (the first, or one after a reconnect): `session` says what the publisher granted.
    func subscriber(_ subscriber: Subscriber, didConnect session: Subscriber.Session)
    /// The publisher's system pressure changed (``SubscriberEvent/systemPressureChanged(_:)``; the first right after
    /// the handshake). Apple's advice applies to a consumer too: do less per frame at serious and critical.
    func subscriber(_ subscriber: Subscriber, didChangeSystemPressure state: SystemPressureState)
}

extension SubscriberDelegate {
    /// The publisher's system pressure changed (``SubscriberEvent/systemPressureChanged(_:)``); nothing by default.
    public func subscriber(_ subscriber: Subscriber, didChangeSystemPressure state: SystemPressureState) {}

    /// Does nothing.
    public func subscriber(_ subscriber: Subscriber, didDrop sampleBuffer: SampleBuffer) {}
    /// Does nothing.
    public func subscriber(_ subscriber: Subscriber, didEndWith error: FrameBusError) {}
    /// Does nothing.
    public func subscriber(_ subscriber: Subscriber, didConnect session: Subscriber.Session) {}
}

extension AttachmentKey {
    /// The bus sequence number of a frame (`.integer`), or the first of a dropped range.
    public static let busSequenceNumber: AttachmentKey = "FrameBusSequenceNumber"
    /// The last sequence number of a dropped range (`.integer`, the bits of a `UInt64`).
    public static let busLastSequenceNumber: AttachmentKey = "FrameBusLastSequenceNumber"
    /// The number of frames a drop marker stands for (`.integer`, clamped to `Int64.max`).
    public static let busDroppedFrameCount: AttachmentKey = "FrameBusDroppedFrameCount"
    /// Bytes of the surface the frame uses (`.integer`): for a compressed frame, what the codec wrote.
    public static let busBytesUsed: AttachmentKey = "FrameBusBytesUsed"
    /// The publisher's `CLOCK_MONOTONIC` time, in ns, when it published the frame (`.integer`).
    public static let busPublishTime: AttachmentKey = "FrameBusPublishTime"
}

extension SampleBuffer {
    private func integer(_ key: AttachmentKey) -> Int64? {
        if case .integer(let value) = attachments.custom[key] { return value }
        return nil
    }

    /// The frame's sequence number on the bus, or nil for a buffer that did not come from a ``Subscriber``.
    public var busSequenceNumber: UInt64? { integer(.busSequenceNumber).map { UInt64(bitPattern: $0) } }

    /// For a drop marker from a ``Subscriber``: the first and last sequence numbers of the dropped frames (use
    /// ``busDroppedFrameCount``, not `count`, which traps for ranges longer than `Int.max`).
    ///
    /// Total for any attachments: a last number before the first, or a count past `UInt64.max`, gives the
    /// saturated range rather than a trap.
    public var busSequenceRange: ClosedRange<UInt64>? {
        guard let first = busSequenceNumber else { return nil }
        if let last = integer(.busLastSequenceNumber).map({ UInt64(bitPattern: $0) }) {
            return first...max(first, last)
        }
        let count = UInt64(clamping: max(1, integer(.busDroppedFrameCount) ?? 1))
        let (last, overflow) = first.addingReportingOverflow(count - 1)
        return first...(overflow ? .max : last)
    }

    /// For a drop marker from a ``Subscriber``: how many frames were dropped (saturated at `Int64.max`).
    public var busDroppedFrameCount: UInt64? {
        guard busSequenceNumber != nil else { return nil }
        return UInt64(clamping: max(1, integer(.busDroppedFrameCount) ?? 1))
    }

    /// Bytes of the surface the frame uses (for compressed frames, the compressed size).
    public var busBytesUsed: Int? { integer(.busBytesUsed).map { Int($0) } }

    /// When the publisher published the frame (`CLOCK_MONOTONIC` ns).
    public var busPublishTime: UInt64? { integer(.busPublishTime).map { UInt64(bitPattern: $0) } }
}
