extension WireMessage {
    /// The datagram for this message, laid out as docs/PROTOCOL.md §5 says.
    ///
    /// The encoder writes what the value holds without checking it (so tests and hostile test peers can write bad
    /// messages); counts are written from the arrays, truncated to their field width. HELLO and WELCOME use the
    /// layout of their `version` (1: the version-1 layout and magic; anything else: version 2).
    public func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        encode(into: &bytes)
        return bytes
    }

    /// ``encoded()`` into `bytes`, replacing what it held and keeping its capacity: a ring writer encodes every
    /// FRAME or RELEASE into the same buffer, without allocating.
    func encode(into bytes: inout [UInt8]) {
        var writer = WireWriter(reusing: &bytes)
        defer { bytes = writer.finish() }
        writer.writeHeader(type)
        switch self {
        case .hello(let hello):
            if hello.version == 1 {
                writer.write(WireProtocol.magicV1)
                writer.write(hello.version)
                writer.write(hello.deliveryMode)
                writer.write(hello.queueDepth)
                writer.write(UInt16(truncatingIfNeeded: hello.formats.count))
                writer.write(UInt32(0))
            } else {
                writer.write(WireProtocol.magic)
                writer.write(hello.version)
                writer.write(hello.deliveryMode)
                writer.write(hello.queueDepth)
                writer.write(UInt16(truncatingIfNeeded: hello.formats.count))
                writer.write(hello.kind.rawValue)
                writer.write(hello.flags)
            }
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
            if welcome.version != 1 {
                writer.write(welcome.maximumAnnouncedSurfaces)
                writer.write(welcome.kind.rawValue)
                writer.write(UInt32(0))
            }
        case .error(let error):
            let reason = Array(error.reason.utf8.prefix(WireProtocol.maximumReasonLength))
            writer.write(error.code)
            writer.write(UInt16(reason.count))
            writer.write(bytes: reason)
        case .surfaceV1(let surface):
            writer.write(surface.surfaceID)
            writer.write(surface.allocationSize)
            writer.write(surface.pixelFormat)
            writer.write(surface.width)
            writer.write(surface.height)
            writer.write(UInt32(truncatingIfNeeded: surface.planes.count))
            for index in 0..<WireProtocol.maximumPlaneCount {
                let plane = index < surface.planes.count ? surface.planes[index] : .zero
                writer.write(plane.offset)
                writer.write(plane.bytesPerRow)
                writer.write(plane.width)
                writer.write(plane.height)
                writer.write(plane.bytesPerElement)
            }
        case .surface(let surface):
            writer.write(surface.surfaceID)
            writer.write(surface.pixelFormat)
            writer.write(surface.width)
            writer.write(surface.height)
            writer.write(surface.backing.rawValue)
            writer.write(UInt8(truncatingIfNeeded: surface.descriptorByteCounts.count))
            writer.write(UInt8(truncatingIfNeeded: surface.planes.count))
            writer.write(surface.modifier)
            for index in 0..<WireProtocol.maximumDescriptorCount {
                writer.write(index < surface.descriptorByteCounts.count ? surface.descriptorByteCounts[index] : 0)
            }
            for index in 0..<WireProtocol.maximumPlaneCount {
                let plane = index < surface.planes.count ? surface.planes[index] : .zero
                writer.write(plane.descriptorIndex)
                writer.write(UInt32(0))
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
            writer.write(frame.attachments.colorPrimaries)
            writer.write(frame.attachments.transferFunction)
            writer.write(frame.attachments.yCbCrMatrix)
            writer.write(frame.attachments.chromaLocation)
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
        case .status(let status):
            writer.write(status.level)
            writer.write(status.factors)
            writer.write(status.cost)
            writer.write(status.frameDuration.value)
            writer.write(status.frameDuration.timescale)
            writer.write(status.frameDuration.flags)
            writer.write(status.time)
            writer.write(status.framesShed)
        case .monitorReport(let report):
            let records = report.records.prefix(WireProtocol.maximumMonitorRecords)
            writer.write(report.time)
            writer.write(report.published)
            writer.write(report.subscriberCount)
            writer.write(UInt16(records.count))
            writer.write(UInt32(0))
            writer.write(report.droppedAtSource)
            for record in records {
                writer.write(record.subscriberID)
                writer.write(record.processID)
                writer.write(record.userID)
                writer.write(record.format)
                writer.write(record.deliveryMode)
                writer.write(record.queueDepth)
                writer.write(record.delivered)
                writer.write(record.bytesDelivered)
                writer.write(record.droppedLate)
                writer.write(record.droppedOutOfBuffers)
                writer.write(record.droppedDiscontinuity)
                writer.write(record.held)
                writer.write(record.queued)
                writer.write(record.holdTimeP50)
                writer.write(record.holdTimeP99)
                writer.write(record.version)
                writer.write(UInt16(0))
                writer.write(record.droppedUnsupportedSurface)
            }
        }
    }
}
