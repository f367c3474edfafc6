extension WireMessage {
    /// Decodes one received datagram: a total function, it returns a valid message or throws, for every input.
    ///
    /// It checks the header (known type, reserved 0, `length` equal to the datagram size), the size the type
    /// requires, every reserved field, every field's range (docs/PROTOCOL.md §5), and that `descriptorCount` fds
    /// came with it (1 for SURFACE_V1, the SURFACE's own count, 0 otherwise). Nothing it does on the bytes can
    /// trap: offsets and sizes are checked with overflow-reporting arithmetic.
    ///
    /// Checks that need the receiver's state (a known surface id, a held frame, the session's version, the message
    /// direction) are the state machines' job.
    ///
    /// - Parameters:
    ///   - bytes: the datagram, already copied into private memory.
    ///   - descriptorCount: how many fds arrived with it (`SCM_RIGHTS`).
    /// - Throws: ``WireError``; its ``WireError/errorCode`` is what to answer with.
    public static func decode(_ bytes: [UInt8], descriptorCount: Int) throws(WireError) -> WireMessage {
        guard bytes.count <= WireProtocol.maximumMessageSize else {
            throw WireError(.oversized, "\(bytes.count) bytes > \(WireProtocol.maximumMessageSize)")
        }
        guard bytes.count >= WireProtocol.headerSize else {
            throw WireError(.truncated, "\(bytes.count) bytes, shorter than the 8-byte header")
        }
        var reader = WireReader(bytes)
        let rawType: UInt16 = try reader.read()
        try reader.readReserved(UInt16.self, "header reserved")
        let length: UInt32 = try reader.read()
        guard let type = WireMessageType(rawValue: rawType) else {
            throw WireError(.unknownType, "type 0x\(String(rawType, radix: 16))")
        }
        guard length == UInt32(bytes.count) else {
            throw WireError(.wrongLength, "\(type.name) header says \(length) bytes, datagram has \(bytes.count)")
        }
        var decoder = Decoder(reader: reader, type: type, size: bytes.count)
        let message = try decoder.decodeBody()
        let expected = message.descriptorCount
        guard descriptorCount == expected else {
            if expected > 0 && descriptorCount < expected {
                throw WireError(.missingDescriptor, "\(type.name) with \(descriptorCount) fds, needs \(expected)")
            }
            throw WireError(.unexpectedDescriptors, "\(type.name) with \(descriptorCount) fds, needs \(expected)")
        }
        return message
    }

    private struct Decoder {
        var reader: WireReader
        let type: WireMessageType
        let size: Int

        func expectSize(_ expected: Int) throws(WireError) {
            guard size == expected else {
                throw WireError(.wrongLength, "\(type.name) must be \(expected) bytes, is \(size)")
            }
        }

        func check(_ condition: Bool, _ detail: @autoclosure () -> String) throws(WireError) {
            guard condition else { throw WireError(.invalidField, "\(type.name): \(detail())") }
        }

        mutating func decodeBody() throws(WireError) -> WireMessage {
            switch type {
            case .hello: return .hello(try decodeHello())
            case .welcome: return .welcome(try decodeWelcome())
            case .error:
                guard size >= WireProtocol.errorFixedSize else {
                    throw WireError(.wrongLength, "ERROR shorter than \(WireProtocol.errorFixedSize) bytes")
                }
                let code: UInt16 = try reader.read()
                let length: UInt16 = try reader.read()
                try check(length <= WireProtocol.maximumReasonLength, "reason length \(length) > 1024")
                try expectSize(WireProtocol.errorFixedSize + Int(length))
                let reason = String(decoding: try reader.readBytes(Int(length)), as: UTF8.self)
                return .error(WireErrorMessage(code: code, reason: reason))
            case .surfaceV1: return .surfaceV1(try decodeSurfaceV1())
            case .surface: return .surface(try decodeSurface())
            case .retireSurface:
                try expectSize(WireProtocol.retireSurfaceSize)
                let surfaceID: UInt64 = try reader.read()
                try check(surfaceID != 0, "surface id 0")
                return .retireSurface(surfaceID: surfaceID)
            case .frame: return .frame(try decodeFrame())
            case .drop:
                try expectSize(WireProtocol.dropSize)
                let drop = WireDrop(
                    firstSequence: try reader.read(),
                    lastSequence: try reader.read(),
                    reason: try reader.read()
                )
                try reader.readReserved(UInt32.self, "DROP reserved")
                try check(drop.firstSequence <= drop.lastSequence, "range \(drop.firstSequence)…\(drop.lastSequence)")
                try check(
                    WireDropReason(rawValue: drop.reason) != nil || drop.reason == WireDropReason.unsupportedSurfaceRawValue,
                    "reason \(drop.reason)"
                )
                return .drop(drop)
            case .endOfStream:
                try expectSize(WireProtocol.endOfStreamSize)
                let end = WireEndOfStream(lastSequence: try reader.read(), reason: try reader.read())
                try reader.readReserved(UInt32.self, "END_OF_STREAM reserved")
                return .endOfStream(end)
            case .release:
                try expectSize(WireProtocol.releaseSize)
                let release = WireRelease(
                    sequence: try reader.read(),
                    surfaceID: try reader.read(),
                    flags: try reader.read()
                )
                try reader.readReserved(UInt32.self, "RELEASE reserved")
                try check(release.surfaceID != 0, "surface id 0")
                try check(
                    release.flags & ~WireRelease.notDeliveredFlag == 0,
                    "flags 0x\(String(release.flags, radix: 16))"
                )
                return .release(release)
            case .goodbye:
                try expectSize(WireProtocol.goodbyeSize)
                let reason: UInt32 = try reader.read()
                try reader.readReserved(UInt32.self, "GOODBYE reserved")
                return .goodbye(reason: reason)
            case .monitorReport: return .monitorReport(try decodeMonitorReport())
            case .status:
                try expectSize(WireProtocol.statusSize)
                let level: UInt16 = try reader.read()
                let factors: UInt16 = try reader.read()
                let cost: UInt32 = try reader.read()
                let duration = WireTime(
                    value: try reader.read(),
                    timescale: try reader.read(),
                    flags: try reader.read()
                )
                let status = WireStatus(
                    level: level,
                    factors: factors,
                    cost: cost,
                    frameDuration: duration,
                    time: try reader.read(),
                    framesShed: try reader.read()
                )
                try check(level <= WireStatus.maximumLevel, "level \(level)")
                try checkTime(duration, "frame duration")
                return .status(status)
            }
        }

        mutating func decodeHello() throws(WireError) -> WireHello {
            // Magic and version come first and are frozen for every version, so a HELLO of any length from a
            // future version gets `unsupportedVersion`, not `malformedMessage`.
            guard size >= WireProtocol.helloVersionPrefixSize else {
                throw WireError(.truncated, "HELLO of \(size) bytes has no magic and version")
            }
            let magic: UInt32 = try reader.read()
            let version: UInt16 = try reader.read()
            switch magic {
            case WireProtocol.magicV1:
                guard version == 1 else {
                    throw WireError(.unsupportedVersion, "version-1 magic with version \(version)")
                }
            case WireProtocol.magic:
                guard version >= 2, WireProtocol.supportedVersions.contains(version) else {
                    throw WireError(
                        .unsupportedVersion,
                        "version \(version); this publisher speaks \(WireProtocol.supportedVersions)"
                    )
                }
            default:
                throw WireError(.badMagic, "0x\(String(magic, radix: 16))")
            }
            guard size >= WireProtocol.helloFixedSize else {
                throw WireError(.wrongLength, "HELLO shorter than \(WireProtocol.helloFixedSize) bytes")
            }
            let mode: UInt16 = try reader.read()
            let depth: UInt16 = try reader.read()
            let count: UInt16 = try reader.read()
            var kind = WireConnectionKind.subscriber
            var flags: UInt16 = 0
            if version == 1 {
                try reader.readReserved(UInt32.self, "HELLO reserved")
            } else {
                let rawKind: UInt16 = try reader.read()
                guard let known = WireConnectionKind(rawValue: rawKind) else {
                    throw WireError(.invalidField, "HELLO: connection kind \(rawKind)")
                }
                kind = known
                flags = try reader.read()
                try check(flags & ~WireHello.knownFlags == 0, "flags 0x\(String(flags, radix: 16))")
            }
            try expectSize(WireProtocol.helloFixedSize + 4 * Int(count))
            switch kind {
            case .subscriber:
                try check(count >= 1 && count <= WireProtocol.maximumFormatCount, "format count \(count)")
                try check(mode <= 1, "delivery mode \(mode)")
                try check(
                    depth >= 1 && depth <= WireProtocol.maximumQueueDepth && (mode == 1 || depth == 1),
                    "queue depth \(depth) for mode \(mode)"
                )
            case .monitor:
                try check(count == 0 && mode == 0 && depth == 0, "a monitor asks for no formats, mode or depth")
            }
            var formats: [UInt32] = []
            formats.reserveCapacity(Int(count))
            for _ in 0..<count { formats.append(try reader.read()) }
            return WireHello(
                version: version,
                kind: kind,
                deliveryMode: mode,
                queueDepth: depth,
                flags: flags,
                formats: formats
            )
        }

        mutating func decodeWelcome() throws(WireError) -> WireWelcome {
            guard size >= 10 else { throw WireError(.wrongLength, "WELCOME of \(size) bytes") }
            let version: UInt16 = try reader.read()
            switch version {
            case 1: try expectSize(WireProtocol.welcomeV1Size)
            case 2, 3: try expectSize(WireProtocol.welcomeSize)
            default: throw WireError(.unsupportedVersion, "WELCOME version \(version)")
            }
            var welcome = WireWelcome(
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
            if version >= 2 {
                welcome.maximumAnnouncedSurfaces = try reader.read()
                let rawKind: UInt16 = try reader.read()
                guard let kind = WireConnectionKind(rawValue: rawKind) else {
                    throw WireError(.invalidField, "WELCOME: connection kind \(rawKind)")
                }
                welcome.kind = kind
                try reader.readReserved(UInt32.self, "WELCOME reserved")
            }
            try check(
                welcome.maximumMessageSize == UInt32(WireProtocol.maximumMessageSize),
                "maximum message size \(welcome.maximumMessageSize)"
            )
            switch welcome.kind {
            case .subscriber:
                try check(welcome.deliveryMode <= 1, "delivery mode \(welcome.deliveryMode)")
                try check(
                    welcome.queueDepth >= 1 && welcome.queueDepth <= WireProtocol.maximumQueueDepth
                        && (welcome.deliveryMode == 1 || welcome.queueDepth == 1),
                    "queue depth \(welcome.queueDepth)"
                )
                try check(welcome.maximumHeldFrames >= 1, "maximum held frames 0")
                try check(welcome.format != 0, "format 0")
                try check(version == 1 || welcome.maximumAnnouncedSurfaces >= 1, "maximum announced surfaces 0")
            case .monitor:
                // `format` is the publisher's own for a monitor that set `knowsUnsupportedSurface` (§5.2), else 0.
                try check(
                    welcome.deliveryMode == 0 && welcome.queueDepth == 0 && welcome.maximumHeldFrames == 0
                        && welcome.maximumAnnouncedSurfaces == 0,
                    "a monitor's WELCOME grants nothing"
                )
            }
            return welcome
        }

        mutating func decodeSurfaceV1() throws(WireError) -> WireSurfaceV1 {
            try expectSize(WireProtocol.surfaceV1Size)
            let surfaceID: UInt64 = try reader.read()
            let allocationSize: UInt64 = try reader.read()
            let pixelFormat: UInt32 = try reader.read()
            let width: UInt32 = try reader.read()
            let height: UInt32 = try reader.read()
            let planeCount: UInt32 = try reader.read()
            try check(surfaceID != 0, "surface id 0")
            try check(
                allocationSize >= 1 && allocationSize <= WireProtocol.maximumByteCount,
                "allocation size \(allocationSize)"
            )
            try checkDimensions(width, height)
            try check(planeCount <= UInt32(WireProtocol.maximumPlaneCount), "plane count \(planeCount)")
            var planes: [WirePlane] = []
            for index in 0..<WireProtocol.maximumPlaneCount {
                let plane = WirePlane(
                    offset: try reader.read(),
                    bytesPerRow: try reader.read(),
                    width: try reader.read(),
                    height: try reader.read(),
                    bytesPerElement: try reader.read()
                )
                if index < Int(planeCount) {
                    try checkPlane(
                        index,
                        offset: plane.offset,
                        bytesPerRow: plane.bytesPerRow,
                        width: plane.width,
                        height: plane.height,
                        bytesPerElement: plane.bytesPerElement,
                        within: allocationSize
                    )
                    planes.append(plane)
                } else {
                    try check(plane == .zero, "unused plane record \(index) is not zero")
                }
            }
            return WireSurfaceV1(
                surfaceID: surfaceID,
                allocationSize: allocationSize,
                pixelFormat: pixelFormat,
                width: width,
                height: height,
                planes: planes
            )
        }

        mutating func decodeSurface() throws(WireError) -> WireSurface {
            try expectSize(WireProtocol.surfaceSize)
            let surfaceID: UInt64 = try reader.read()
            let pixelFormat: UInt32 = try reader.read()
            let width: UInt32 = try reader.read()
            let height: UInt32 = try reader.read()
            let rawBacking: UInt16 = try reader.read()
            let descriptorCount: UInt8 = try reader.read()
            let planeCount: UInt8 = try reader.read()
            let modifier: UInt64 = try reader.read()
            try check(surfaceID != 0, "surface id 0")
            try checkDimensions(width, height)
            guard let backing = WireBacking(rawValue: rawBacking) else {
                throw WireError(.invalidField, "SURFACE: backing \(rawBacking)")
            }
            try check(
                descriptorCount >= 1 && Int(descriptorCount) <= WireProtocol.maximumDescriptorCount,
                "descriptor count \(descriptorCount)"
            )
            try check(Int(planeCount) <= WireProtocol.maximumPlaneCount, "plane count \(planeCount)")
            try check(modifier != WireSurface.invalidModifier, "modifier DRM_FORMAT_MOD_INVALID")
            try check(backing == .dmaBuf || modifier == WireSurface.linearModifier, "a memfd surface is linear")
            try check(planeCount > 0 || descriptorCount == 1, "an opaque surface has one descriptor")
            var byteCounts: [UInt64] = []
            for index in 0..<WireProtocol.maximumDescriptorCount {
                let byteCount: UInt64 = try reader.read()
                if index < Int(descriptorCount) {
                    try check(
                        byteCount >= 1 && byteCount <= WireProtocol.maximumByteCount,
                        "descriptor \(index) byte count \(byteCount)"
                    )
                    byteCounts.append(byteCount)
                } else {
                    try check(byteCount == 0, "unused descriptor byte count \(index) is not zero")
                }
            }
            var planes: [WireSurfacePlane] = []
            var used = [Bool](repeating: false, count: Int(descriptorCount))
            for index in 0..<WireProtocol.maximumPlaneCount {
                let descriptorIndex: UInt32 = try reader.read()
                try reader.readReserved(UInt32.self, "SURFACE plane \(index) reserved")
                let plane = WireSurfacePlane(
                    descriptorIndex: descriptorIndex,
                    offset: try reader.read(),
                    bytesPerRow: try reader.read(),
                    width: try reader.read(),
                    height: try reader.read(),
                    bytesPerElement: try reader.read()
                )
                if index < Int(planeCount) {
                    try check(descriptorIndex < UInt32(descriptorCount), "plane \(index) descriptor \(descriptorIndex)")
                    try checkPlane(
                        index,
                        offset: plane.offset,
                        bytesPerRow: plane.bytesPerRow,
                        width: plane.width,
                        height: plane.height,
                        bytesPerElement: plane.bytesPerElement,
                        within: byteCounts[Int(descriptorIndex)]
                    )
                    used[Int(descriptorIndex)] = true
                    planes.append(plane)
                } else {
                    try check(plane == .zero, "unused plane record \(index) is not zero")
                }
            }
            try check(planeCount == 0 || !used.contains(false), "a descriptor no plane uses")
            return WireSurface(
                surfaceID: surfaceID,
                pixelFormat: pixelFormat,
                width: width,
                height: height,
                backing: backing,
                modifier: modifier,
                descriptorByteCounts: byteCounts,
                planes: planes
            )
        }

        func checkDimensions(_ width: UInt32, _ height: UInt32) throws(WireError) {
            try check(
                width >= 1 && width <= WireProtocol.maximumDimension && height >= 1
                    && height <= WireProtocol.maximumDimension,
                "size \(width)×\(height)"
            )
        }

        /// A plane's rows lie inside its memory object and each row holds its elements. Every operand is at most
        /// 2³², so the products fit in 64 bits; the sum is checked for overflow anyway.
        func checkPlane(
            _ index: Int,
            offset: UInt64,
            bytesPerRow: UInt32,
            width: UInt32,
            height: UInt32,
            bytesPerElement: UInt32,
            within byteCount: UInt64
        ) throws(WireError) {
            try check(
                width >= 1 && height >= 1 && bytesPerElement >= 1 && bytesPerElement <= 16,
                "plane \(index) geometry \(width)×\(height)×\(bytesPerElement)"
            )
            let rowBytes = UInt64(width).multipliedReportingOverflow(by: UInt64(bytesPerElement))
            try check(!rowBytes.overflow && rowBytes.partialValue <= UInt64(bytesPerRow), "plane \(index) row")
            let planeBytes = UInt64(bytesPerRow).multipliedReportingOverflow(by: UInt64(height))
            let end = offset.addingReportingOverflow(planeBytes.partialValue)
            try check(
                !planeBytes.overflow && !end.overflow && end.partialValue <= byteCount,
                "plane \(index) ends past its \(byteCount)-byte memory"
            )
        }

        mutating func decodeFrame() throws(WireError) -> WireFrame {
            try expectSize(WireProtocol.frameSize)
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
            let attachments: (UInt8, UInt8, UInt8, UInt8) = (
                try reader.read(), try reader.read(), try reader.read(), try reader.read()
            )
            try check(surfaceID != 0, "surface id 0")
            // §7.1: sequence numbers never wrap, and 2⁶⁴ − 1 is never a frame's (a DROP may still name it).
            try check(sequence != .max, "sequence 2^64-1")
            try checkTime(presentation, "presentation time")
            try checkTime(duration, "duration")
            try check(bytesUsed <= WireProtocol.maximumByteCount, "bytes used \(bytesUsed)")
            try check(
                flags & ~(WireFrame.discontinuityFlag | WireFrame.attachmentsChangedFlag) == 0,
                "flags 0x\(String(flags, radix: 16))"
            )
            return WireFrame(
                sequence: sequence,
                surfaceID: surfaceID,
                presentationTime: presentation,
                duration: duration,
                publishTime: publishTime,
                bytesUsed: bytesUsed,
                flags: flags,
                attachments: attachments
            )
        }

        func checkTime(_ time: WireTime, _ field: String) throws(WireError) {
            try check(time.flags & ~WireTime.knownFlags == 0, "\(field) flags 0x\(String(time.flags, radix: 16))")
            try check(
                time.flags & WireTime.validFlag == 0 || time.timescale > 0,
                "\(field) timescale \(time.timescale)"
            )
        }

        mutating func decodeMonitorReport() throws(WireError) -> WireMonitorReport {
            guard size >= WireProtocol.monitorReportFixedSize else {
                throw WireError(
                    .wrongLength,
                    "MONITOR_REPORT shorter than \(WireProtocol.monitorReportFixedSize) bytes"
                )
            }
            let time: UInt64 = try reader.read()
            let published: UInt64 = try reader.read()
            let subscriberCount: UInt16 = try reader.read()
            let recordCount: UInt16 = try reader.read()
            try reader.readReserved(UInt32.self, "MONITOR_REPORT reserved")
            let droppedAtSource: UInt64 = try reader.read()
            try check(Int(recordCount) <= WireProtocol.maximumMonitorRecords, "record count \(recordCount)")
            try check(recordCount <= subscriberCount, "\(recordCount) records for \(subscriberCount) subscribers")
            try expectSize(WireProtocol.monitorReportFixedSize + WireProtocol.monitorRecordSize * Int(recordCount))
            var records: [WireMonitorReport.Record] = []
            records.reserveCapacity(Int(recordCount))
            for index in 0..<Int(recordCount) {
                var record = WireMonitorReport.Record(
                    subscriberID: try reader.read(),
                    processID: try reader.read(),
                    userID: try reader.read(),
                    format: try reader.read(),
                    deliveryMode: try reader.read(),
                    queueDepth: try reader.read(),
                    delivered: try reader.read(),
                    bytesDelivered: try reader.read(),
                    droppedLate: try reader.read(),
                    droppedOutOfBuffers: try reader.read(),
                    droppedDiscontinuity: try reader.read(),
                    held: try reader.read(),
                    queued: try reader.read(),
                    holdTimeP50: try reader.read(),
                    holdTimeP99: try reader.read(),
                    version: try reader.read()
                )
                try reader.readReserved(UInt16.self, "record \(index) reserved")
                // +92: `droppedUnsupportedSurface` for a monitor that set `knowsUnsupportedSurface` (this decoder's
                // monitors do), reserved 0 for others (§5.12).
                record.droppedUnsupportedSurface = try reader.read()
                try check(record.deliveryMode <= 1, "record \(index) delivery mode \(record.deliveryMode)")
                try check(
                    record.version >= 1 && record.version <= WireProtocol.supportedVersions.upperBound,
                    "record \(index) version \(record.version)"
                )
                // §5.12: records are in increasing subscriber id order, so each id appears once.
                try check(
                    records.last.map { $0.subscriberID < record.subscriberID } ?? true,
                    "record \(index) subscriber id \(record.subscriberID) not above the previous record's"
                )
                records.append(record)
            }
            return WireMonitorReport(
                time: time,
                published: published,
                droppedAtSource: droppedAtSource,
                subscriberCount: subscriberCount,
                records: records
            )
        }
    }
}
