import Logging

// Monitor reports and snapshots for ``Publisher/statistics``.

extension PublisherStateMachine {
    // MARK: Statistics

    /// The MONITOR_REPORT for now, for `monitor` (nil: as for one that did not set `knowsUnsupportedSurface`).
    func monitorReport(now: UInt64, for monitor: MonitorSession? = nil) -> WireMonitorReport {
        let explains = monitor?.knowsUnsupportedSurface ?? false
        var records: [WireMonitorReport.Record] = []
        for id in connections.keys.sorted() {
            guard case .subscriber(let session) = connections[id] else { continue }
            guard records.count < WireProtocol.maximumMonitorRecords else { break }
            let summary = session.holdTimes.summary
            records.append(
                WireMonitorReport.Record(
                    subscriberID: id.rawValue,
                    processID: session.credentials.processID,
                    userID: session.credentials.userID,
                    format: session.format,
                    deliveryMode: session.deliveryMode,
                    queueDepth: session.queueDepth,
                    delivered: session.delivered,
                    bytesDelivered: session.bytesDelivered,
                    droppedLate: session.droppedLate,
                    droppedOutOfBuffers: session.droppedOutOfBuffers,
                    droppedDiscontinuity: session.droppedDiscontinuity,
                    held: UInt32(clamping: session.held.count),
                    queued: UInt32(clamping: session.outbound.count),
                    holdTimeP50: summary.p50,
                    holdTimeP99: summary.p99,
                    version: session.version,
                    droppedUnsupportedSurface: explains ? UInt32(clamping: session.droppedUnsupportedSurface) : 0
                )
            )
        }
        return WireMonitorReport(
            time: now,
            published: published,
            droppedAtSource: droppedAtSource.values.reduce(0) { $0.addingSaturating($1) },
            subscriberCount: UInt16(clamping: subscriberCount),
            records: records
        )
    }

    /// One subscriber's numbers for ``PublisherStatistics``.
    struct SubscriberSnapshot {
        var id: ConnectionID
        var credentials: Credentials
        var format: UInt32
        var queueDepth: Int
        var isLatestOnly: Bool
        var maximumHeldFrames: Int
        /// What it may hold now (``maximumHeldFrames``, or less if welcomed before the budget was known).
        var heldLimit: Int
        var delivered: UInt64
        var bytesDelivered: UInt64
        var droppedLate: UInt64
        var droppedOutOfBuffers: UInt64
        var droppedDiscontinuity: UInt64
        var held: Int
        var queued: Int
        var holdTimes: LatencySummary
        var announcedSurfaces: Set<UInt64>
    }

    /// Every subscriber now, by id.
    var subscribers: [SubscriberSnapshot] {
        connections.keys.sorted().compactMap { id in
            guard case .subscriber(let session) = connections[id] else { return nil }
            return SubscriberSnapshot(
                id: id,
                credentials: session.credentials,
                format: session.format,
                queueDepth: Int(session.queueDepth),
                isLatestOnly: session.deliveryMode == 0,
                maximumHeldFrames: session.maximumHeldFrames,
                heldLimit: session.heldLimit,
                delivered: session.delivered,
                bytesDelivered: session.bytesDelivered,
                droppedLate: session.droppedLate,
                droppedOutOfBuffers: session.droppedOutOfBuffers,
                droppedDiscontinuity: session.droppedDiscontinuity,
                held: session.held.count,
                queued: session.outbound.count,
                holdTimes: session.holdTimes.summary,
                announcedSurfaces: Set(session.announced.keys)
            )
        }
    }

    /// Hold times over every subscriber.
    var holdTimeSummary: LatencySummary { holdTimes.summary }

    /// Frames held by subscribers now.
    package var heldFrameCount: Int {
        connections.values.reduce(0) { total, connection in
            if case .subscriber(let session) = connection { return total + session.held.count }
            return total
        }
    }

    /// Every connection the machine knows, for the IO layer's bookkeeping.
    var connectionIDs: [ConnectionID] { connections.keys.sorted() }
}
