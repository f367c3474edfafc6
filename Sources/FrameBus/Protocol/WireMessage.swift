// The FrameBus wire protocol, versions 1 and 2. docs/PROTOCOL.md is the normative description; these files
// implement it. Every message is one SOCK_SEQPACKET datagram: an 8-byte header, then a body whose size is fixed
// per type (HELLO, ERROR and MONITOR_REPORT have one counted tail). All integers are little-endian.
//
// The message structs are plain values: the encoder writes whatever they hold (tests and hostile peers need to
// write bad messages), and the decoder is the one place that range-checks every field of a received datagram
// (WireMessage+Decoding.swift). A decoded message is therefore valid on its own; checks that need the
// receiver's state (a known surface id, a held frame) belong to the state machines.

/// Message type codes (header offset 0, `u16`).
package enum WireMessageType: UInt16, Sendable, CaseIterable {
    /// Subscriber or monitor → publisher, first message: version, kind, delivery mode, accepted formats.
    case hello = 0x0001
    /// Publisher → subscriber: the subscription is accepted.
    case welcome = 0x0002
    /// Either direction: a refusal or a fatal error, with a reason; the sender closes right after.
    case error = 0x0003
    /// Publisher → version-1 subscriber: a memfd surface, with its fd, before the first frame that uses it.
    case surfaceV1 = 0x0010
    /// Publisher → subscriber: a surface will not be used again (until announced again).
    case retireSurface = 0x0011
    /// Publisher → version-2 subscriber: a surface (memfd or DMA-BUF, 1…4 fds) before the first frame on it.
    case surface = 0x0012
    /// Publisher → subscriber: one frame.
    case frame = 0x0020
    /// Publisher → subscriber: frames that were not delivered, and why.
    case drop = 0x0021
    /// Publisher → subscriber: the stream ended.
    case endOfStream = 0x0030
    /// Subscriber → publisher: a frame is returned.
    case release = 0x0040
    /// Subscriber or monitor → publisher: it leaves.
    case goodbye = 0x0041
    /// Publisher → monitor (version 2): a snapshot of the publisher's counters.
    case monitorReport = 0x0050
    /// Publisher → subscriber or monitor that set ``WireHello/wantsStatusFlag``: system pressure, cost, frame
    /// duration.
    case status = 0x0060

    /// The name docs/PROTOCOL.md uses.
    public var name: String {
        switch self {
        case .hello: "HELLO"
        case .welcome: "WELCOME"
        case .error: "ERROR"
        case .surfaceV1: "SURFACE_V1"
        case .retireSurface: "RETIRE_SURFACE"
        case .surface: "SURFACE"
        case .frame: "FRAME"
        case .drop: "DROP"
        case .endOfStream: "END_OF_STREAM"
        case .release: "RELEASE"
        case .goodbye: "GOODBYE"
        case .monitorReport: "MONITOR_REPORT"
        case .status: "STATUS"
        }
    }
}

/// Constants of the protocol (docs/PROTOCOL.md §1, §3, §9).
package enum WireProtocol {
    /// The newest version this implementation speaks.
    public static let version: UInt16 = 2
    /// Every version this implementation speaks, oldest first.
    public static let supportedVersions: ClosedRange<UInt16> = 1...3
    /// The version whose subscribers receive frames through shared-memory rings (docs/PROTOCOL.md §9): its HELLO
    /// and WELCOME each carry two fds (a ring file and a wake-up socket).
    public static let ringVersion: UInt16 = 3
    /// Version 1's magic: the bytes `F` `B` `U` `S` read as a little-endian `u32` (the opposite of a FourCC).
    public static let magicV1: UInt32 = 0x5355_4246
    /// Version 2's magic: `'FBUS'` as a FourCC (first character in the most significant byte), like formats.
    public static let magic: UInt32 = 0x4642_5553
    /// Size of the common header.
    public static let headerSize = 8
    /// Largest datagram either side sends or accepts.
    public static let maximumMessageSize = 4096
    /// Most formats a HELLO may list.
    public static let maximumFormatCount = 16
    /// Longest reason in an ERROR, in bytes.
    public static let maximumReasonLength = 1024
    /// Most planes a SURFACE describes (the remaining plane records are zero).
    public static let maximumPlaneCount = 4
    /// Most descriptors (fds) a version-2 SURFACE carries.
    public static let maximumDescriptorCount = 4
    /// Largest queue depth a HELLO may ask for.
    public static let maximumQueueDepth: UInt16 = 64
    /// Largest surface memory object, and largest `bytesUsed`: 2³² bytes.
    public static let maximumByteCount: UInt64 = 1 << 32
    /// Largest surface width or height in pixels.
    public static let maximumDimension: UInt32 = 65536
    /// Most subscriber records in one MONITOR_REPORT.
    public static let maximumMonitorRecords = 32

    /// Bytes of a HELLO before anything version-dependent: header, magic, version. Frozen for every version.
    public static let helloVersionPrefixSize = 14
    static let helloFixedSize = 24
    static let welcomeV1Size = 48
    static let welcomeSize = 56
    static let errorFixedSize = 12
    static let surfaceV1Size = 136
    static let surfaceSize = 200
    static let retireSurfaceSize = 16
    static let frameSize = 80
    static let dropSize = 32
    static let endOfStreamSize = 24
    static let releaseSize = 32
    static let goodbyeSize = 16
    static let monitorReportFixedSize = 40
    static let monitorRecordSize = 96
    static let statusSize = 48
}

/// What a connection is for (HELLO and WELCOME `kind`, version 2).
package enum WireConnectionKind: UInt16, Sendable, CaseIterable {
    /// Receives frames.
    case subscriber = 0
    /// Receives a MONITOR_REPORT each second and no frames (`framebus top`).
    case monitor = 1
}

/// HELLO: what the subscriber (or monitor) wants.
package struct WireHello: Hashable, Sendable {
    /// Bit of ``flags``: the subscriber can import DMA-BUF surfaces (version 2).
    public static let acceptsDMABufFlag: UInt16 = 1 << 0
    /// Bit of ``flags``: the subscriber is deferred; the publisher sends it frames only from its deferred start on
    /// (version 2 and later, docs/PROTOCOL.md §5.1.1).
    public static let deferredFlag: UInt16 = 1 << 1
    /// Bit of ``flags`` (docs/PROTOCOL.md §5.1): a subscriber understands DROP reason 5 (`unsupportedSurface`); a
    /// monitor understands a report record's `droppedUnsupportedSurface` and a WELCOME that names the publisher's
    /// format. A peer that does not set it is sent neither.
    public static let knowsUnsupportedSurfaceFlag: UInt16 = 1 << 3
    /// Bit of ``flags``: the peer understands STATUS and DROP reason `workFellBehind`, and wants them (versions 2
    /// and 3; docs/PROTOCOL.md §5.13).
    public static let wantsStatusFlag: UInt16 = 1 << 2
    /// Every flag this implementation knows.
    static let knownFlags: UInt16 = acceptsDMABufFlag | deferredFlag | wantsStatusFlag | knowsUnsupportedSurfaceFlag

    /// 1 (the version-1 layout and magic) or 2.
    public var version: UInt16
    /// Subscriber or monitor; version 1 knows only subscribers.
    public var kind: WireConnectionKind
    /// 0 = latest-only, 1 = queue.
    public var deliveryMode: UInt16
    /// 1 for latest-only; 1…64 for queue; 0 for a monitor.
    public var queueDepth: UInt16
    /// Version 2: bit 0 ``acceptsDMABufFlag``, bit 1 ``deferredFlag``, bit 2 ``wantsStatusFlag``, bit 3
    /// ``knowsUnsupportedSurfaceFlag``.
    public var flags: UInt16
    /// FourCC codes in order of preference, 1…16 of them (none for a monitor).
    public var formats: [UInt32]

    public init(
        version: UInt16 = WireProtocol.version,
        kind: WireConnectionKind = .subscriber,
        deliveryMode: UInt16,
        queueDepth: UInt16,
        flags: UInt16 = 0,
        formats: [UInt32]
    ) {
        self.version = version
        self.kind = kind
        self.deliveryMode = deliveryMode
        self.queueDepth = queueDepth
        self.flags = flags
        self.formats = formats
    }

    /// A version-2 monitor's HELLO (docs/PROTOCOL.md Appendix A).
    public static let monitor = WireHello(kind: .monitor, deliveryMode: 0, queueDepth: 0, formats: [])

    /// The HELLO of a monitor that understands `droppedUnsupportedSurface` and the publisher's format (§5.12).
    public static let knowingMonitor = WireHello(
        kind: .monitor,
        deliveryMode: 0,
        queueDepth: 0,
        flags: knowsUnsupportedSurfaceFlag,
        formats: []
    )
}

/// WELCOME: what the publisher granted.
package struct WireWelcome: Hashable, Sendable {
    /// The version of this session (the HELLO's).
    public var version: UInt16
    public var deliveryMode: UInt16
    public var queueDepth: UInt16
    /// Frames this subscriber may hold at once (delivered or queued, not yet released); 0 for a monitor.
    public var maximumHeldFrames: UInt16
    /// The format this subscriber will receive; 0 for a monitor.
    public var format: UInt32
    public var maximumMessageSize: UInt32
    /// Random per publisher instance: a new value means the publisher restarted.
    public var streamID: UInt64
    public var subscriberID: UInt64
    /// Sequence number the next published frame will carry.
    public var nextSequence: UInt64
    /// Version 2: most surfaces announced and not retired on this connection at once.
    public var maximumAnnouncedSurfaces: UInt16
    /// Version 2: subscriber or monitor.
    public var kind: WireConnectionKind

    public init(
        version: UInt16,
        deliveryMode: UInt16,
        queueDepth: UInt16,
        maximumHeldFrames: UInt16,
        format: UInt32,
        maximumMessageSize: UInt32,
        streamID: UInt64,
        subscriberID: UInt64,
        nextSequence: UInt64,
        maximumAnnouncedSurfaces: UInt16 = 0,
        kind: WireConnectionKind = .subscriber
    ) {
        self.version = version
        self.deliveryMode = deliveryMode
        self.queueDepth = queueDepth
        self.maximumHeldFrames = maximumHeldFrames
        self.format = format
        self.maximumMessageSize = maximumMessageSize
        self.streamID = streamID
        self.subscriberID = subscriberID
        self.nextSequence = nextSequence
        self.maximumAnnouncedSurfaces = maximumAnnouncedSurfaces
        self.kind = kind
    }
}

/// ERROR codes. Receivers accept unknown codes.
package enum WireErrorCode: UInt16, Sendable, CaseIterable {
    case unsupportedVersion = 1
    case noCommonFormat = 2
    case tooManySubscribers = 3
    case notPermitted = 4
    case malformedMessage = 5
    case invalidRequest = 6
    case shuttingDown = 7
    case invalidSurface = 8
    /// Version 2: the subscriber stopped reading and its outbound queue overflowed.
    case tooSlow = 9
    /// Version 2: no HELLO within the handshake timeout.
    case handshakeTimeout = 10
    /// Version 3: the subscriber sent more wake-ups than its releases and the frames announced to it explain
    /// (docs/PROTOCOL.md §9.5, the wake-up budget).
    case tooManyWakeUps = 11
    /// Subscriber: a SURFACE larger than the largest frame this subscriber accepts (its size policy); like
    /// `invalidSurface`, the publisher logs it and closes.
    case frameTooLarge = 12
}

/// ERROR: a refusal or fatal error with a UTF-8 reason. Its layout is the same in every version.
package struct WireErrorMessage: Hashable, Sendable {
    public var code: UInt16
    /// Text for people; untrusted (print it escaped).
    public var reason: String

    public init(code: UInt16, reason: String) {
        self.code = code
        self.reason = reason
    }

    public init(_ code: WireErrorCode, _ reason: String) {
        self.init(code: code.rawValue, reason: reason)
    }
}

/// One plane record of a version-1 SURFACE (`SURFACE_V1`).
package struct WirePlane: Hashable, Sendable {
    public var offset: UInt64
    public var bytesPerRow: UInt32
    public var width: UInt32
    public var height: UInt32
    public var bytesPerElement: UInt32

    public init(offset: UInt64, bytesPerRow: UInt32, width: UInt32, height: UInt32, bytesPerElement: UInt32) {
        self.offset = offset
        self.bytesPerRow = bytesPerRow
        self.width = width
        self.height = height
        self.bytesPerElement = bytesPerElement
    }

    static let zero = WirePlane(offset: 0, bytesPerRow: 0, width: 0, height: 0, bytesPerElement: 0)
}

/// SURFACE_V1 (`0x0010`): a memfd surface's id and layout; its read-only memfd travels with it.
package struct WireSurfaceV1: Hashable, Sendable {
    public var surfaceID: UInt64
    public var allocationSize: UInt64
    public var pixelFormat: UInt32
    public var width: UInt32
    public var height: UInt32
    public var planes: [WirePlane]

    public init(
        surfaceID: UInt64,
        allocationSize: UInt64,
        pixelFormat: UInt32,
        width: UInt32,
        height: UInt32,
        planes: [WirePlane]
    ) {
        self.surfaceID = surfaceID
        self.allocationSize = allocationSize
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.planes = planes
    }
}

/// What backs a version-2 surface.
package enum WireBacking: UInt16, Sendable, CaseIterable {
    /// Sealed memfds (`F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL`), sent read-only.
    case memfd = 1
    /// DMA-BUFs (CPU access bracketed with `DMA_BUF_IOCTL_SYNC`).
    case dmaBuf = 2
}

/// One plane record of a version-2 SURFACE: which descriptor holds it and where.
package struct WireSurfacePlane: Hashable, Sendable {
    /// Index into the SURFACE's descriptors (and fds), 0…descriptorCount−1.
    public var descriptorIndex: UInt32
    /// Byte offset of the plane's first row in that descriptor.
    public var offset: UInt64
    /// Bytes from one row to the next (≥ width × bytesPerElement; the rest is padding).
    public var bytesPerRow: UInt32
    /// Elements per row.
    public var width: UInt32
    /// Rows.
    public var height: UInt32
    /// Bytes per element (an interleaved CbCr pair is one element).
    public var bytesPerElement: UInt32

    public init(
        descriptorIndex: UInt32 = 0,
        offset: UInt64,
        bytesPerRow: UInt32,
        width: UInt32,
        height: UInt32,
        bytesPerElement: UInt32
    ) {
        self.descriptorIndex = descriptorIndex
        self.offset = offset
        self.bytesPerRow = bytesPerRow
        self.width = width
        self.height = height
        self.bytesPerElement = bytesPerElement
    }

    static let zero = WireSurfacePlane(offset: 0, bytesPerRow: 0, width: 0, height: 0, bytesPerElement: 0)
}

/// SURFACE (`0x0012`, version 2): a surface's id, backing, modifier, descriptors and planes; its fds travel with it
/// (one per entry of ``descriptorByteCounts``, in order).
package struct WireSurface: Hashable, Sendable {
    /// `DRM_FORMAT_MOD_LINEAR`.
    public static let linearModifier: UInt64 = 0
    /// `DRM_FORMAT_MOD_INVALID`: never valid on the wire.
    public static let invalidModifier: UInt64 = 0x00FF_FFFF_FFFF_FFFF

    public var surfaceID: UInt64
    public var pixelFormat: UInt32
    public var width: UInt32
    public var height: UInt32
    public var backing: WireBacking
    /// The DRM format modifier; `linearModifier` for memfds.
    public var modifier: UInt64
    /// Bytes of each descriptor's memory object the subscriber may map, 1…2³² each, 1…4 descriptors.
    public var descriptorByteCounts: [UInt64]
    /// 0…4 planes; none for a compressed (opaque) format.
    public var planes: [WireSurfacePlane]

    public init(
        surfaceID: UInt64,
        pixelFormat: UInt32,
        width: UInt32,
        height: UInt32,
        backing: WireBacking = .memfd,
        modifier: UInt64 = WireSurface.linearModifier,
        descriptorByteCounts: [UInt64],
        planes: [WireSurfacePlane]
    ) {
        self.surfaceID = surfaceID
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.backing = backing
        self.modifier = modifier
        self.descriptorByteCounts = descriptorByteCounts
        self.planes = planes
    }
}

/// A rational time as CMTime spells it.
package struct WireTime: Hashable, Sendable {
    /// Bits of ``flags``: valid, hasBeenRounded, +∞, −∞, indefinite.
    public static let knownFlags: UInt32 = 0x1F
    public static let validFlag: UInt32 = 1

    public var value: Int64
    public var timescale: Int32
    public var flags: UInt32

    public init(value: Int64, timescale: Int32, flags: UInt32) {
        self.value = value
        self.timescale = timescale
        self.flags = flags
    }

    public static let invalid = WireTime(value: 0, timescale: 0, flags: 0)
}

/// FRAME: one frame, 80 bytes.
package struct WireFrame: Hashable, Sendable {
    /// Bits of ``flags``.
    public static let discontinuityFlag: UInt32 = 1 << 0
    public static let attachmentsChangedFlag: UInt32 = 1 << 1

    public var sequence: UInt64
    public var surfaceID: UInt64
    public var presentationTime: WireTime
    public var duration: WireTime
    /// `CLOCK_MONOTONIC` nanoseconds when the publisher sent it (for latency).
    public var publishTime: UInt64
    /// Raw formats: Σ bytesPerRow × height over the planes (row padding included); compressed: the codec's bytes.
    public var bytesUsed: UInt64
    public var flags: UInt32
    /// Colour primaries, transfer function, Y'CbCr matrix and chroma location codes (PROTOCOL.md §5.7).
    public var attachments: WireAttachmentCodes

    public init(
        sequence: UInt64,
        surfaceID: UInt64,
        presentationTime: WireTime,
        duration: WireTime,
        publishTime: UInt64,
        bytesUsed: UInt64,
        flags: UInt32,
        attachments: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
    ) {
        self.sequence = sequence
        self.surfaceID = surfaceID
        self.presentationTime = presentationTime
        self.duration = duration
        self.publishTime = publishTime
        self.bytesUsed = bytesUsed
        self.flags = flags
        self.attachments = WireAttachmentCodes(attachments)
    }
}

/// The four attachment code bytes of a FRAME, as a hashable value.
package struct WireAttachmentCodes: Hashable, Sendable {
    public var colorPrimaries: UInt8
    public var transferFunction: UInt8
    public var yCbCrMatrix: UInt8
    public var chromaLocation: UInt8

    public init(_ codes: (UInt8, UInt8, UInt8, UInt8)) {
        (colorPrimaries, transferFunction, yCbCrMatrix, chromaLocation) = codes
    }

    /// The codes as a tuple, in wire order.
    public var tuple: (UInt8, UInt8, UInt8, UInt8) { (colorPrimaries, transferFunction, yCbCrMatrix, chromaLocation) }
}

/// DROP reason codes.
package enum WireDropReason: UInt32, Sendable, CaseIterable {
    case frameWasLate = 1
    case outOfBuffers = 2
    case discontinuity = 3
    /// The work for this subscriber's format (the conversion worker) fell behind; sent only to a subscriber that set
    /// ``WireHello/wantsStatusFlag`` (docs/PROTOCOL.md §5.8).
    case workFellBehind = 4

    /// DROP reason 5 (docs/PROTOCOL.md §5.8): an `outOfBuffers` drop whose cause is the frame's surface, one this
    /// subscriber cannot take (a DMA-BUF for a subscriber without `acceptsDMABuf`). Sent only to a subscriber that
    /// set ``WireHello/knowsUnsupportedSurfaceFlag``; any other gets reason 2. Not a case of this enum: decoders
    /// of older peers refuse it, and a receiver counts it as `outOfBuffers`.
    package static let unsupportedSurfaceRawValue: UInt32 = 5
}

/// DROP: frames `firstSequence...lastSequence` were not delivered to this subscriber.
package struct WireDrop: Hashable, Sendable {
    public var firstSequence: UInt64
    /// ≥ ``firstSequence`` (inclusive).
    public var lastSequence: UInt64
    public var reason: UInt32

    public init(firstSequence: UInt64, lastSequence: UInt64, reason: UInt32) {
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.reason = reason
    }

    public init(_ range: ClosedRange<UInt64>, reason: WireDropReason) {
        self.init(firstSequence: range.lowerBound, lastSequence: range.upperBound, reason: reason.rawValue)
    }

    /// The frames in the range, saturating at `UInt64.max` (the range 0…UInt64.max has 2⁶⁴ frames).
    public var frameCount: UInt64 {
        let (difference, _) = lastSequence.subtractingReportingOverflow(firstSequence)
        let (count, overflow) = difference.addingReportingOverflow(1)
        return overflow ? .max : count
    }
}

/// END_OF_STREAM.
package struct WireEndOfStream: Hashable, Sendable {
    /// Last sequence published; `UInt64.max` if none.
    public var lastSequence: UInt64
    /// 0 = stopped by its owner; other values are treated as 0.
    public var reason: UInt32

    public init(lastSequence: UInt64, reason: UInt32) {
        self.lastSequence = lastSequence
        self.reason = reason
    }
}

/// RELEASE: the subscriber returns a frame.
package struct WireRelease: Hashable, Sendable {
    /// Bit of ``flags``: the frame was replaced in the subscriber's queue before its consumer saw it.
    public static let notDeliveredFlag: UInt32 = 1 << 0

    public var sequence: UInt64
    public var surfaceID: UInt64
    public var flags: UInt32

    public init(sequence: UInt64, surfaceID: UInt64, flags: UInt32) {
        self.sequence = sequence
        self.surfaceID = surfaceID
        self.flags = flags
    }
}

/// Every message of protocol versions 1 and 2.
package enum WireMessage: Hashable, Sendable {
    case hello(WireHello)
    case welcome(WireWelcome)
    case error(WireErrorMessage)
    case surfaceV1(WireSurfaceV1)
    case surface(WireSurface)
    case retireSurface(surfaceID: UInt64)
    case frame(WireFrame)
    case drop(WireDrop)
    case endOfStream(WireEndOfStream)
    case release(WireRelease)
    case goodbye(reason: UInt32)
    case monitorReport(WireMonitorReport)
    case status(WireStatus)

    public var type: WireMessageType {
        switch self {
        case .hello: .hello
        case .welcome: .welcome
        case .error: .error
        case .surfaceV1: .surfaceV1
        case .surface: .surface
        case .retireSurface: .retireSurface
        case .frame: .frame
        case .drop: .drop
        case .endOfStream: .endOfStream
        case .release: .release
        case .goodbye: .goodbye
        case .monitorReport: .monitorReport
        case .status: .status
        }
    }

    /// How many fds travel with this message: 1 for SURFACE_V1, one per descriptor for SURFACE, 2 for a version-3
    /// subscriber's HELLO and WELCOME (a ring file and a wake-up socket), else 0.
    public var descriptorCount: Int {
        switch self {
        case .surfaceV1: 1
        case .surface(let surface): surface.descriptorByteCounts.count
        case .hello(let hello): hello.version >= WireProtocol.ringVersion && hello.kind == .subscriber ? 2 : 0
        case .welcome(let welcome): welcome.version >= WireProtocol.ringVersion && welcome.kind == .subscriber ? 2 : 0
        default: 0
        }
    }

    /// Whether fds travel with this message.
    public var carriesDescriptor: Bool { descriptorCount > 0 }
}
