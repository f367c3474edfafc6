import PixelBuffers

/// The attachments of a sample (CoreMedia's `kCMSampleBufferAttachmentKey_…`): why a frame was dropped, whether
/// it follows a discontinuity, and custom key/values.
///
/// A value type, so the bus can compare what changed from one frame to the next. Custom keys reuse the pixel
/// buffer ``AttachmentKey`` and ``AttachmentValue`` types.
///
/// ```swift
/// var attachments = SampleAttachments()
/// attachments.droppedFrameReason = .outOfBuffers
/// attachments.discontinuity = [.samplesDropped]
/// attachments["com.example.exposure"] = .double(0.008)
/// ```
public struct SampleAttachments: Hashable, Sendable {
    /// Why the frame this sample stands for was dropped (`kCMSampleBufferAttachmentKey_DroppedFrameReason`);
    /// `nil` for a delivered frame.
    public var droppedFrameReason: DroppedFrameReason?
    /// More about the drop (`kCMSampleBufferAttachmentKey_DroppedFrameReasonInfo`).
    public var droppedFrameReasonInfo: DroppedFrameReasonInfo?
    /// What kind of break precedes this sample; empty when it follows its predecessor normally.
    public var discontinuity: DiscontinuityFlags
    /// Custom attachments.
    public var custom: [AttachmentKey: AttachmentValue]

    /// Creates attachments; all empty by default.
    public init(
        droppedFrameReason: DroppedFrameReason? = nil,
        droppedFrameReasonInfo: DroppedFrameReasonInfo? = nil,
        discontinuity: DiscontinuityFlags = [],
        custom: [AttachmentKey: AttachmentValue] = [:]
    ) {
        self.droppedFrameReason = droppedFrameReason
        self.droppedFrameReasonInfo = droppedFrameReasonInfo
        self.discontinuity = discontinuity
        self.custom = custom
    }

    /// Whether a discontinuity precedes this sample.
    public var isDiscontinuity: Bool { !discontinuity.isEmpty }

    /// Whether nothing is attached.
    public var isEmpty: Bool {
        droppedFrameReason == nil && droppedFrameReasonInfo == nil && discontinuity.isEmpty && custom.isEmpty
    }

    /// The custom attachment for `key`; assigning `nil` removes it.
    public subscript(key: AttachmentKey) -> AttachmentValue? {
        get { custom[key] }
        set { custom[key] = newValue }
    }
}
