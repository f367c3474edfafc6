// The FrameBus wire protocol, version 1. docs/PROTOCOL.md is the normative description; this file implements it.
// Every message is one SOCK_SEQPACKET datagram: an 8-byte header, then a body whose size is fixed per type
// (HELLO and ERROR have one variable-length tail). All integers are little-endian.

/// Message type codes (header offset 0, `u16`).
@_spi(Testing) public enum WireMessageType: UInt16, Sendable, CaseIterable {
    /// Subscriber → publisher, first message: version, delivery mode, accepted formats.
    case hello = 0x0001
    /// Publisher → subscriber: the subscription is accepted.
    case welcome = 0x0002
    /// Either direction: a refusal or a fatal error, with a reason; the sender closes right after.
    case error = 0x0003
    /// Publisher → subscriber: a surface, with its fd (`SCM_RIGHTS`), before the first frame that uses it.
    case surface = 0x0010
    /// Publisher → subscriber: a surface will not be used again.
    case retireSurface = 0x0011
    /// Publisher → subscriber: one frame.
    case frame = 0x0020
    /// Publisher → subscriber: frames that were not delivered, and why.
    case drop = 0x0021
    /// Publisher → subscriber: the stream ended.
    case endOfStream = 0x0030
    /// Subscriber → publisher: a frame is returned.
    case release = 0x0040
    /// Subscriber → publisher: the subscriber leaves.
    case goodbye = 0x0041
}

/// Constants of protocol version 1.
@_spi(Testing) public enum WireProtocol {
    /// The only version this implementation speaks.
    public static let version: UInt16 = 1
    /// `"FBUS"` read as a little-endian `u32`.
    public static let magic: UInt32 = 0x5355_4246
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
    /// Largest queue depth a HELLO may ask for.
    public static let maximumQueueDepth: UInt16 = 64

    static let welcomeSize = 48
    static let surfaceSize = 136
    static let retireSurfaceSize = 16
    static let frameSize = 80
    static let dropSize = 32
    static let endOfStreamSize = 24
    static let releaseSize = 32
    static let goodbyeSize = 16
    static let helloFixedSize = 24
    static let errorFixedSize = 12
}

/// HELLO: what the subscriber wants.
@_spi(Testing) public struct WireHello: Hashable, Sendable {
    public var version: UInt16 = WireProtocol.version
    /// 0 = latest-only, 1 = queue.
    public var deliveryMode: UInt16
    /// 1 for latest-only; 1…64 for queue.
    public var queueDepth: UInt16
    /// FourCC codes in order of preference, 1…16 of them.
    public var formats: [UInt32]

    public init(version: UInt16 = WireProtocol.version, deliveryMode: UInt16, queueDepth: UInt16, formats: [UInt32]) {
        self.version = version
        self.deliveryMode = deliveryMode
        self.queueDepth = queueDepth
        self.formats = formats
    }
}

/// WELCOME: what the publisher granted.
@_spi(Testing) public struct WireWelcome: Hashable, Sendable {
    public var version: UInt16
    public var deliveryMode: UInt16
    public var queueDepth: UInt16
    /// Frames this subscriber may hold at once (delivered or queued, not yet released).
    public var maximumHeldFrames: UInt16
    /// The format this subscriber will receive.
    public var format: UInt32
    public var maximumMessageSize: UInt32
    /// Random per publisher instance: a new value means the publisher restarted.
    public var streamID: UInt64
    public var subscriberID: UInt64
    /// Sequence number the next published frame will carry.
    public var nextSequence: UInt64

    public init(
        version: UInt16,
        deliveryMode: UInt16,
        queueDepth: UInt16,
        maximumHeldFrames: UInt16,
        format: UInt32,
        maximumMessageSize: UInt32,
        streamID: UInt64,
        subscriberID: UInt64,
        nextSequence: UInt64
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
    }
}

/// ERROR codes.
@_spi(Testing) public enum WireErrorCode: UInt16, Sendable, CaseIterable {
    case unsupportedVersion = 1
    case noCommonFormat = 2
    case tooManySubscribers = 3
    case notPermitted = 4
    case malformedMessage = 5
    case invalidRequest = 6
    case shuttingDown = 7
    case invalidSurface = 8
}

/// ERROR: a refusal or fatal error with a UTF-8 reason.
@_spi(Testing) public struct WireErrorMessage: Hashable, Sendable {
    public var code: UInt16
    public var reason: String

    public init(code: UInt16, reason: String) {
        self.code = code
        self.reason = reason
    }
}

/// One plane record of a SURFACE.
@_spi(Testing) public struct WirePlane: Hashable, Sendable {
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
}

/// SURFACE: a surface's id and layout; its read-only memfd travels with it.
@_spi(Testing) public struct WireSurface: Hashable, Sendable {
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

/// A rational time as CMTime spells it.
@_spi(Testing) public struct WireTime: Hashable, Sendable {
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
@_spi(Testing) public struct WireFrame: Hashable, Sendable {
    /// Bits of ``flags``.
    public static let discontinuityFlag: UInt32 = 1 << 0
    public static let attachmentsChangedFlag: UInt32 = 1 << 1

    public var sequence: UInt64
    public var surfaceID: UInt64
    public var presentationTime: WireTime
    public var duration: WireTime
    /// `CLOCK_MONOTONIC` nanoseconds when the publisher sent it (for latency).
    public var publishTime: UInt64
    public var bytesUsed: UInt64
    public var flags: UInt32
    /// Colour primaries, transfer function, Y'CbCr matrix and chroma location codes (PROTOCOL.md §5.6).
    public var attachments: (UInt8, UInt8, UInt8, UInt8)

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
        self.attachments = attachments
    }

    public static func == (lhs: WireFrame, rhs: WireFrame) -> Bool {
        lhs.sequence == rhs.sequence && lhs.surfaceID == rhs.surfaceID && lhs.presentationTime == rhs.presentationTime
            && lhs.duration == rhs.duration && lhs.publishTime == rhs.publishTime && lhs.bytesUsed == rhs.bytesUsed
            && lhs.flags == rhs.flags && lhs.attachments == rhs.attachments
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(sequence)
        hasher.combine(surfaceID)
    }
}

/// DROP reason codes.
@_spi(Testing) public enum WireDropReason: UInt32, Sendable, CaseIterable {
    case frameWasLate = 1
    case outOfBuffers = 2
    case discontinuity = 3
}

/// DROP: frames `firstSequence...lastSequence` were not delivered to this subscriber.
@_spi(Testing) public struct WireDrop: Hashable, Sendable {
    public var firstSequence: UInt64
    public var lastSequence: UInt64
    public var reason: UInt32

    public init(firstSequence: UInt64, lastSequence: UInt64, reason: UInt32) {
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.reason = reason
    }
}

/// END_OF_STREAM.
@_spi(Testing) public struct WireEndOfStream: Hashable, Sendable {
    /// Last sequence number published, `UInt64.max` if none.
    public var lastSequence: UInt64
    /// 0 = the publisher stopped.
    public var reason: UInt32

    public init(lastSequence: UInt64, reason: UInt32) {
        self.lastSequence = lastSequence
        self.reason = reason
    }
}

/// RELEASE: the subscriber returns a frame it holds.
@_spi(Testing) public struct WireRelease: Hashable, Sendable {
    /// Bit of ``flags``: the frame was replaced before the consumer saw it (a `frameWasLate` drop).
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

/// Every message of protocol version 1.
@_spi(Testing) public enum WireMessage: Hashable, Sendable {
    case hello(WireHello)
    case welcome(WireWelcome)
    case error(WireErrorMessage)
    case surface(WireSurface)
    case retireSurface(surfaceID: UInt64)
    case frame(WireFrame)
    case drop(WireDrop)
    case endOfStream(WireEndOfStream)
    case release(WireRelease)
    case goodbye(reason: UInt32)

    public var type: WireMessageType {
        switch self {
        case .hello: .hello
        case .welcome: .welcome
        case .error: .error
        case .surface: .surface
        case .retireSurface: .retireSurface
        case .frame: .frame
        case .drop: .drop
        case .endOfStream: .endOfStream
        case .release: .release
        case .goodbye: .goodbye
        }
    }

    /// Whether exactly one fd travels with this message (SURFACE) or none (everything else).
    public var carriesDescriptor: Bool { type == .surface }

    /// The datagram for this message.
    public func encoded() -> [UInt8] {
        var writer = WireWriter(capacity: 136)
        writer.writeHeader(type)
        switch self {
        case .hello(let hello):
            writer.write(WireProtocol.magic)
            writer.write(hello.version)
            writer.write(hello.deliveryMode)
            writer.write(hello.queueDepth)
            writer.write(UInt16(truncatingIfNeeded: hello.formats.count))
            writer.write(UInt32(0))
            for format in hello.formats { writer.write(format) }
        case .welcome(let welcome):
            writer.write(welcome.version)
            writer.write(welcome.deliveryMode)
            writer.write(welcome.queueDepth)
            writer.write(welcome.maximumHeldFrames)
            writer.write(welcome.format)
            writer.write(welcome.maximumMessageSize)
            writer.write(welcome.streamID)
            writer.write(welcome.subscriberID)
            writer.write(welcome.nextSequence)
        case .error(let error):
            let reason = Array(error.reason.utf8.prefix(WireProtocol.maximumReasonLength))
            writer.write(error.code)
            writer.write(UInt16(reason.count))
            writer.write(bytes: reason)
        case .surface(let surface):
            writer.write(surface.surfaceID)
            writer.write(surface.allocationSize)
            writer.write(surface.pixelFormat)
            writer.write(surface.width)
            writer.write(surface.height)
            writer.write(UInt32(truncatingIfNeeded: surface.planes.count))
            for index in 0..<WireProtocol.maximumPlaneCount {
                let plane =
                    index < surface.planes.count
                    ? surface.planes[index]
                    : WirePlane(offset: 0, bytesPerRow: 0, width: 0, height: 0, bytesPerElement: 0)
                writer.write(plane.offset)
                writer.write(plane.bytesPerRow)
                writer.write(plane.width)
                writer.write(plane.height)
                writer.write(plane.bytesPerElement)
            }
        case .retireSurface(let surfaceID):
            writer.write(surfaceID)
        case .frame(let frame):
            writer.write(frame.sequence)
            writer.write(frame.surfaceID)
            writer.write(frame.presentationTime.value)
            writer.write(frame.presentationTime.timescale)
            writer.write(frame.presentationTime.flags)
            writer.write(frame.duration.value)
            writer.write(frame.duration.timescale)
            writer.write(frame.duration.flags)
            writer.write(frame.publishTime)
            writer.write(frame.bytesUsed)
            writer.write(frame.flags)
            writer.write(frame.attachments.0)
            writer.write(frame.attachments.1)
            writer.write(frame.attachments.2)
            writer.write(frame.attachments.3)
        case .drop(let drop):
            writer.write(drop.firstSequence)
            writer.write(drop.lastSequence)
            writer.write(drop.reason)
            writer.write(UInt32(0))
        case .endOfStream(let end):
            writer.write(end.lastSequence)
            writer.write(end.reason)
            writer.write(UInt32(0))
        case .release(let release):
            writer.write(release.sequence)
            writer.write(release.surfaceID)
            writer.write(release.flags)
            writer.write(UInt32(0))
        case .goodbye(let reason):
            writer.write(reason)
            writer.write(UInt32(0))
        }
        return writer.finish()
    }
}

extension WireMessage {
    /// Decodes one datagram, checking its header, its length against its type, every reserved field, and the
    /// descriptor count (1 for SURFACE, 0 otherwise).
    ///
    /// Value ranges that depend on the receiver's state (a known surface id, a held frame) are checked by the
    /// receiver, not here.
    public static func decode(_ bytes: [UInt8], descriptorCount: Int) throws(WireError) -> WireMessage {
        guard bytes.count <= WireProtocol.maximumMessageSize else {
            throw WireError(.oversized, "\(bytes.count) bytes > \(WireProtocol.maximumMessageSize)")
        }
        guard bytes.count >= WireProtocol.headerSize else {
            throw WireError(.truncated, "\(bytes.count) bytes, shorter than the 8-byte header")
        }
        var reader = WireReader(bytes)
        let rawType: UInt16 = try reader.read()
        try reader.readReserved(UInt16.self, "header flags")
        let length: UInt32 = try reader.read()
        guard let type = WireMessageType(rawValue: rawType) else {
            throw WireError(.unknownType, "type 0x\(String(rawType, radix: 16))")
        }
        guard Int(length) == bytes.count else {
            throw WireError(.wrongLength, "\(type) header says \(length) bytes, datagram has \(bytes.count)")
        }
        func expectLength(_ expected: Int) throws(WireError) {
            guard bytes.count == expected else {
                throw WireError(.wrongLength, "\(type) must be \(expected) bytes, is \(bytes.count)")
            }
        }
        if type == .surface {
            guard descriptorCount == 1 else {
                throw descriptorCount == 0
                    ? WireError(.missingDescriptor, "SURFACE without its fd")
                    : WireError(.unexpectedDescriptors, "SURFACE with \(descriptorCount) fds")
            }
        } else if descriptorCount != 0 {
            throw WireError(.unexpectedDescriptors, "\(type) with \(descriptorCount) fds")
        }

        switch type {
        case .hello:
            guard bytes.count >= WireProtocol.helloFixedSize else {
                throw WireError(.wrongLength, "HELLO shorter than \(WireProtocol.helloFixedSize) bytes")
            }
            let magic: UInt32 = try reader.read()
            guard magic == WireProtocol.magic else { throw WireError(.badMagic, "0x\(String(magic, radix: 16))") }
            let version: UInt16 = try reader.read()
            guard version == WireProtocol.version else {
                throw WireError(.unsupportedVersion, "subscriber speaks \(version), publisher \(WireProtocol.version)")
            }
            let mode: UInt16 = try reader.read()
            let depth: UInt16 = try reader.read()
            let count: UInt16 = try reader.read()
            try reader.readReserved(UInt32.self, "HELLO options")
            try expectLength(WireProtocol.helloFixedSize + 4 * Int(count))
            guard count >= 1, count <= WireProtocol.maximumFormatCount else {
                throw WireError(.invalidField, "format count \(count)")
            }
            guard mode <= 1 else { throw WireError(.invalidField, "delivery mode \(mode)") }
            guard depth >= 1, depth <= WireProtocol.maximumQueueDepth, mode == 1 || depth == 1 else {
                throw WireError(.invalidField, "queue depth \(depth) for mode \(mode)")
            }
            var formats: [UInt32] = []
            for _ in 0..<count { formats.append(try reader.read()) }
            return .hello(WireHello(version: version, deliveryMode: mode, queueDepth: depth, formats: formats))
        case .welcome:
            try expectLength(WireProtocol.welcomeSize)
            let version: UInt16 = try reader.read()
            guard version == WireProtocol.version else {
                throw WireError(.unsupportedVersion, "publisher speaks \(version)")
            }
            let welcome = WireWelcome(
                version: version,
                deliveryMode: try reader.read(),
                queueDepth: try reader.read(),
                maximumHeldFrames: try reader.read(),
                format: try reader.read(),
                maximumMessageSize: try reader.read(),
                streamID: try reader.read(),
                subscriberID: try reader.read(),
                nextSequence: try reader.read()
            )
            guard welcome.deliveryMode <= 1, welcome.queueDepth >= 1, welcome.maximumHeldFrames >= 1 else {
                throw WireError(.invalidField, "WELCOME mode/depth/held")
            }
            return .welcome(welcome)
        case .error:
            guard bytes.count >= WireProtocol.errorFixedSize else {
                throw WireError(.wrongLength, "ERROR shorter than \(WireProtocol.errorFixedSize) bytes")
            }
            let code: UInt16 = try reader.read()
            let length: UInt16 = try reader.read()
            guard length <= WireProtocol.maximumReasonLength else { throw WireError(.invalidField, "reason length") }
            try expectLength(WireProtocol.errorFixedSize + Int(length))
            let reason = String(decoding: try reader.readBytes(Int(length)), as: UTF8.self)
            return .error(WireErrorMessage(code: code, reason: reason))
        case .surface:
            try expectLength(WireProtocol.surfaceSize)
            let surfaceID: UInt64 = try reader.read()
            let allocationSize: UInt64 = try reader.read()
            let pixelFormat: UInt32 = try reader.read()
            let width: UInt32 = try reader.read()
            let height: UInt32 = try reader.read()
            let planeCount: UInt32 = try reader.read()
            guard planeCount <= WireProtocol.maximumPlaneCount else {
                throw WireError(.invalidField, "plane count \(planeCount)")
            }
            var planes: [WirePlane] = []
            for index in 0..<WireProtocol.maximumPlaneCount {
                let plane = WirePlane(
                    offset: try reader.read(),
                    bytesPerRow: try reader.read(),
                    width: try reader.read(),
                    height: try reader.read(),
                    bytesPerElement: try reader.read()
                )
                if index < planeCount {
                    planes.append(plane)
                } else if plane != WirePlane(offset: 0, bytesPerRow: 0, width: 0, height: 0, bytesPerElement: 0) {
                    throw WireError(.invalidField, "unused plane record \(index) is not zero")
                }
            }
            return .surface(
                WireSurface(
                    surfaceID: surfaceID,
                    allocationSize: allocationSize,
                    pixelFormat: pixelFormat,
                    width: width,
                    height: height,
                    planes: planes
                )
            )
        case .retireSurface:
            try expectLength(WireProtocol.retireSurfaceSize)
            return .retireSurface(surfaceID: try reader.read())
        case .frame:
            try expectLength(WireProtocol.frameSize)
            let sequence: UInt64 = try reader.read()
            let surfaceID: UInt64 = try reader.read()
            let presentation = WireTime(
                value: try reader.read(),
                timescale: try reader.read(),
                flags: try reader.read()
            )
            let duration = WireTime(value: try reader.read(), timescale: try reader.read(), flags: try reader.read())
            let publishTime: UInt64 = try reader.read()
            let bytesUsed: UInt64 = try reader.read()
            let flags: UInt32 = try reader.read()
            guard flags & ~(WireFrame.discontinuityFlag | WireFrame.attachmentsChangedFlag) == 0 else {
                throw WireError(.invalidField, "FRAME flags 0x\(String(flags, radix: 16))")
            }
            let attachments: (UInt8, UInt8, UInt8, UInt8) = (
                try reader.read(), try reader.read(), try reader.read(), try reader.read()
            )
            return .frame(
                WireFrame(
                    sequence: sequence,
                    surfaceID: surfaceID,
                    presentationTime: presentation,
                    duration: duration,
                    publishTime: publishTime,
                    bytesUsed: bytesUsed,
                    flags: flags,
                    attachments: attachments
                )
            )
        case .drop:
            try expectLength(WireProtocol.dropSize)
            let drop = WireDrop(
                firstSequence: try reader.read(),
                lastSequence: try reader.read(),
                reason: try reader.read()
            )
            try reader.readReserved(UInt32.self, "DROP reserved")
            guard drop.firstSequence <= drop.lastSequence, WireDropReason(rawValue: drop.reason) != nil else {
                throw WireError(.invalidField, "DROP range or reason")
            }
            return .drop(drop)
        case .endOfStream:
            try expectLength(WireProtocol.endOfStreamSize)
            let end = WireEndOfStream(lastSequence: try reader.read(), reason: try reader.read())
            try reader.readReserved(UInt32.self, "END_OF_STREAM reserved")
            return .endOfStream(end)
        case .release:
            try expectLength(WireProtocol.releaseSize)
            let release = WireRelease(
                sequence: try reader.read(),
                surfaceID: try reader.read(),
                flags: try reader.read()
            )
            try reader.readReserved(UInt32.self, "RELEASE reserved")
            guard release.flags & ~WireRelease.notDeliveredFlag == 0 else {
                throw WireError(.invalidField, "RELEASE flags 0x\(String(release.flags, radix: 16))")
            }
            return .release(release)
        case .goodbye:
            try expectLength(WireProtocol.goodbyeSize)
            let reason: UInt32 = try reader.read()
            try reader.readReserved(UInt32.self, "GOODBYE reserved")
            return .goodbye(reason: reason)
        }
    }
}
