import PixelBuffers
import Synchronization

/// A video sample: an image buffer with its timing, format description and attachments (`CMSampleBuffer`).
///
/// The image buffer, format description and timing are fixed at creation. Validity, data readiness and the
/// attachments change over the buffer's life and may be read and written from any thread.
///
/// A sample buffer without an image buffer is a *marker*: it stands for a frame that was dropped, carrying the
/// drop's timing and ``droppedFrameReason`` (what `captureOutput(_:didDrop:from:)` receives).
///
/// ```swift
/// let buffer = try PixelBuffer(width: 1280, height: 720, pixelFormat: .yuv420BiPlanarVideoRange8)
/// let sample = try SampleBuffer(
///     imageBuffer: buffer,
///     timing: SampleTimingInfo(presentationTimeStamp: HostClock.now, duration: MediaTime(value: 1, timescale: 60)))
/// sample.formatDescription?.dimensions  // 1280x720
/// sample.invalidate()                   // runs the invalidation handler once
/// ```
public final class SampleBuffer: Sendable, Hashable, CustomStringConvertible {
    /// The image, or `nil` for a dropped-frame marker (`CMSampleBufferGetImageBuffer`).
    public let imageBuffer: PixelBuffer?
    /// The description of the image (`CMSampleBufferGetFormatDescription`); `nil` only for a marker made without.
    public let formatDescription: VideoFormatDescription?
    /// Presentation and decode time stamps and duration (`CMSampleBufferGetSampleTimingInfo`).
    public let timing: SampleTimingInfo

    /// A closure run once when the buffer is invalidated (`CMSampleBufferInvalidateCallback`).
    public typealias InvalidationHandler = @Sendable (SampleBuffer) -> Void
    /// A closure that makes the data ready, run by ``makeDataReady()`` (`CMSampleBufferMakeDataReadyCallback`).
    public typealias MakeDataReadyHandler = @Sendable (SampleBuffer) throws(SampleBufferError) -> Void

    /// The mutable part of the buffer.
    private struct State {
        var isValid = true
        var dataIsReady: Bool
        var attachments: SampleAttachments
        var invalidationHandler: InvalidationHandler?
        var makeDataReadyHandler: MakeDataReadyHandler?
    }

    /// Validity, readiness, attachments and handlers are read and written from any thread (a consumer's queue,
    /// the bus's receive loop), so they live behind a process-private `Mutex`; everything else is `let`. Handlers
    /// are always called after the lock is released, so they may use the buffer.
    private let state: Mutex<State>

    /// Creates a sample buffer for an image buffer (`CMSampleBufferCreateForImageBuffer`).
    ///
    /// - Parameters:
    ///   - imageBuffer: the image.
    ///   - formatDescription: its description; by default made from `imageBuffer`.
    ///   - timing: the sample's timing.
    ///   - attachments: initial sample attachments.
    ///   - invalidationHandler: run once by ``invalidate()``; a trailing closure is this handler.
    ///   - dataIsReady: whether the image's bytes are ready to read; if `false`, ``makeDataReady()`` calls
    ///     `makeDataReadyHandler` (for instance to wait for a producer's fence or decode a compressed surface).
    ///   - makeDataReadyHandler: what makes the data ready, if it is not.
    /// - Throws: ``SampleBufferError/Code-swift.struct/formatDescriptionMismatch`` if `formatDescription` does
    ///   not match `imageBuffer` (``VideoFormatDescription/matches(_:)``).
    public init(
        imageBuffer: PixelBuffer,
        formatDescription: VideoFormatDescription? = nil,
        timing: SampleTimingInfo,
        attachments: SampleAttachments = SampleAttachments(),
        invalidationHandler: InvalidationHandler? = nil,
        dataIsReady: Bool = true,
        makeDataReadyHandler: MakeDataReadyHandler? = nil
    ) throws(SampleBufferError) {
        let description: VideoFormatDescription
        if let formatDescription {
            guard formatDescription.matches(imageBuffer) else {
                throw SampleBufferError(
                    .formatDescriptionMismatch,
                    "SampleBuffer(imageBuffer: \(imageBuffer.pixelFormat) \(imageBuffer.width)x\(imageBuffer.height), "
                        + "formatDescription: \(formatDescription))"
                )
            }
            description = formatDescription
        } else {
            description = VideoFormatDescription(imageBuffer: imageBuffer)
        }
        self.imageBuffer = imageBuffer
        self.formatDescription = description
        self.timing = timing
        self.state = Mutex(
            State(
                dataIsReady: dataIsReady,
                attachments: attachments,
                invalidationHandler: invalidationHandler,
                makeDataReadyHandler: makeDataReadyHandler
            )
        )
    }

    /// Creates a marker for a dropped frame: no image, the drop's timing, and its reason.
    ///
    /// - Parameters:
    ///   - droppedFrameReason: why the frame was dropped.
    ///   - info: more about why, if known.
    ///   - timing: the timing the frame would have had.
    ///   - formatDescription: the format of the stream, if known.
    ///   - attachments: further attachments; its ``SampleAttachments/droppedFrameReason`` and
    ///     ``SampleAttachments/droppedFrameReasonInfo`` are replaced by the arguments.
    public init(
        droppedFrameReason: DroppedFrameReason,
        info: DroppedFrameReasonInfo? = nil,
        timing: SampleTimingInfo,
        formatDescription: VideoFormatDescription? = nil,
        attachments: SampleAttachments = SampleAttachments(),
        invalidationHandler: InvalidationHandler? = nil
    ) {
        var attachments = attachments
        attachments.droppedFrameReason = droppedFrameReason
        attachments.droppedFrameReasonInfo = info
        self.imageBuffer = nil
        self.formatDescription = formatDescription
        self.timing = timing
        self.state = Mutex(
            State(
                dataIsReady: true,
                attachments: attachments,
                invalidationHandler: invalidationHandler,
                makeDataReadyHandler: nil
            )
        )
    }

    // MARK: Timing

    /// The presentation time stamp (`CMSampleBufferGetPresentationTimeStamp`).
    public var presentationTimeStamp: MediaTime { timing.presentationTimeStamp }
    /// The decode time stamp (`CMSampleBufferGetDecodeTimeStamp`).
    public var decodeTimeStamp: MediaTime { timing.decodeTimeStamp }
    /// The duration (`CMSampleBufferGetDuration`).
    public var duration: MediaTime { timing.duration }

    // MARK: Validity

    /// Whether the buffer is still valid (`CMSampleBufferIsValid`); `false` after ``invalidate()``.
    public var isValid: Bool { state.withLock { $0.isValid } }

    /// Invalidates the buffer and runs its invalidation handler, once (`CMSampleBufferInvalidate`).
    ///
    /// Only the first call, from any thread, runs the handler; it runs on the calling thread after the buffer is
    /// already invalid. The image buffer reference stays (it is a `let`); consumers must treat an invalid
    /// buffer's data as gone — on the bus, invalidation is how a consumer returns a frame early.
    ///
    /// The handler is not run when a still-valid buffer is deallocated.
    ///
    /// - Returns: `true` if this call invalidated the buffer, `false` if it was already invalid.
    @discardableResult
    public func invalidate() -> Bool {
        let (wasValid, handler) = state.withLock { state -> (Bool, InvalidationHandler?) in
            guard state.isValid else { return (false, nil) }
            state.isValid = false
            let handler = state.invalidationHandler
            state.invalidationHandler = nil
            state.makeDataReadyHandler = nil
            return (true, handler)
        }
        handler?(self)
        return wasValid
    }

    /// Sets or replaces the invalidation handler (`CMSampleBufferSetInvalidateHandler`).
    ///
    /// - Throws: ``SampleBufferError/Code-swift.struct/invalidated`` if the buffer is already invalid.
    public func setInvalidationHandler(_ handler: InvalidationHandler?) throws(SampleBufferError) {
        let accepted = state.withLock { state -> Bool in
            guard state.isValid else { return false }
            state.invalidationHandler = handler
            return true
        }
        guard accepted else { throw SampleBufferError(.invalidated, "SampleBuffer.setInvalidationHandler") }
    }

    // MARK: Data readiness

    /// Whether the data is ready to read (`CMSampleBufferDataIsReady`).
    public var dataIsReady: Bool { state.withLock { $0.dataIsReady } }

    /// Marks the data ready (`CMSampleBufferSetDataReady`).
    public func setDataReady() {
        state.withLock { $0.dataIsReady = true }
    }

    /// Makes the data ready if it is not, by calling the handler given at creation (`CMSampleBufferMakeDataReady`).
    ///
    /// The handler runs without the lock held; if two threads call this at once, both may run it, so it must be
    /// idempotent. On success the data is marked ready.
    ///
    /// - Throws: ``SampleBufferError/Code-swift.struct/invalidated`` for an invalid buffer,
    ///   ``SampleBufferError/Code-swift.struct/dataNotReady`` if there is no handler, or the handler's error.
    public func makeDataReady() throws(SampleBufferError) {
        enum Next {
            case ready, invalid, noHandler
            case call(MakeDataReadyHandler)
        }
        let next = state.withLock { state -> Next in
            guard state.isValid else { return .invalid }
            if state.dataIsReady { return .ready }
            guard let handler = state.makeDataReadyHandler else { return .noHandler }
            return .call(handler)
        }
        switch next {
        case .ready:
            return
        case .invalid:
            throw SampleBufferError(.invalidated, "SampleBuffer.makeDataReady")
        case .noHandler:
            throw SampleBufferError(.dataNotReady, "SampleBuffer.makeDataReady")
        case .call(let handler):
            try handler(self)
            state.withLock { $0.dataIsReady = true }
        }
    }

    // MARK: Attachments

    /// The sample attachments; reading and writing are thread-safe.
    public var attachments: SampleAttachments {
        get { state.withLock { $0.attachments } }
        set { state.withLock { $0.attachments = newValue } }
    }

    /// Why the frame was dropped (`kCMSampleBufferAttachmentKey_DroppedFrameReason`); `nil` for a delivered frame.
    public var droppedFrameReason: DroppedFrameReason? {
        get { state.withLock { $0.attachments.droppedFrameReason } }
        set { state.withLock { $0.attachments.droppedFrameReason = newValue } }
    }

    /// More about why the frame was dropped (`kCMSampleBufferAttachmentKey_DroppedFrameReasonInfo`).
    public var droppedFrameReasonInfo: DroppedFrameReasonInfo? {
        get { state.withLock { $0.attachments.droppedFrameReasonInfo } }
        set { state.withLock { $0.attachments.droppedFrameReasonInfo = newValue } }
    }

    /// What kind of break precedes this sample.
    public var discontinuity: DiscontinuityFlags {
        get { state.withLock { $0.attachments.discontinuity } }
        set { state.withLock { $0.attachments.discontinuity = newValue } }
    }

    /// Whether a discontinuity precedes this sample.
    public var isDiscontinuity: Bool { state.withLock { $0.attachments.isDiscontinuity } }

    /// The custom attachment for `key` (`CMGetAttachment`); assigning `nil` removes it.
    public subscript(attachment key: AttachmentKey) -> AttachmentValue? {
        get { state.withLock { $0.attachments.custom[key] } }
        set { state.withLock { $0.attachments.custom[key] = newValue } }
    }

    /// Changes the attachments in one step, atomically with respect to other threads.
    public func updateAttachments<R>(_ body: (inout SampleAttachments) -> R) -> R {
        state.withLock { body(&$0.attachments) }
    }

    // MARK: Identity

    /// Sample buffers are reference types: equal only to themselves (as `CFEqual` on a `CMSampleBuffer`).
    public static func == (lhs: SampleBuffer, rhs: SampleBuffer) -> Bool { lhs === rhs }

    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// `"SampleBuffer(420v 1920x1080, pts …)"`, or `"SampleBuffer(dropped FrameWasLate, pts …)"` for a marker.
    public var description: String {
        let what: String
        if imageBuffer != nil, let formatDescription {
            what = formatDescription.description
        } else if let reason = droppedFrameReason {
            what = "dropped \(reason)"
        } else {
            what = "no image"
        }
        return "SampleBuffer(\(what), pts \(presentationTimeStamp)\(isValid ? "" : ", invalid"))"
    }
}
