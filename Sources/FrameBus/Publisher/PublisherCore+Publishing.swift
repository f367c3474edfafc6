import Foundation
import Logging
import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces
import Synchronization
import SystemPackage

// Publishing: frames fanned out to subscribers (each representation made once), surfaces described once.

extension PublisherCore {
    // MARK: Publishing

    /// The work of ``Publisher``'s `reportDroppedFrames` (documented there).
    @discardableResult
    func reportDroppedFrames(reason: DroppedFrameReason, count: Int = 1) -> ClosedRange<UInt64>? {
        let reason = WireDropReason(rawValue: UInt32(reason.rawValue)) ?? .discontinuity
        let count = UInt64(max(1, count))
        // Buffers the machine lets go of are dropped once both locks are released (``withState(_:)``).
        var released: [PixelBuffer] = []
        defer { released.removeAll() }
        return publishing.withLock { _ in
            withState(releasingInto: &released) { state in
                let now = ProcessInfoShim.monotonicNanoseconds()
                // Subscribers served by the conversion worker hear of the loss after the frames it still has for them.
                let converted = state.machine.convertedSessionFormats
                guard
                    let (range, actions) = state.machine.reportDropped(
                        reason: reason,
                        count: count,
                        now: now,
                        deferring: converted
                    )
                else { return nil }
                perform(actions, &state)
                if !converted.isEmpty && !conversionWorker.deferDrop(range, reason, formats: converted) {
                    perform(state.machine.deferredDrop(range, reason: reason, formats: converted, now: now), &state)
                }
                return range
            }
        }
    }

    /// The work of ``Publisher``'s `publish` (documented there).
    @discardableResult
    func publish(
        _ buffer: PixelBuffer,
        timing: SampleTimingInfo = .invalid,
        discontinuity: Bool = false
    ) throws(FrameBusError) -> UInt64 {
        let source = buffer.pixelFormat
        let servable = configuration.formats.contains { format in
            format == source || format == source.compressedVariant || (source.isCompressed && format == source.base)
        }
        guard servable else {
            throw FrameBusError(
                .invalidArgument,
                "Publisher.publish",
                message: "\(source) cannot serve \(configuration.formats)"
            )
        }
        // Buffers the machine lets go of (releases reaped on the way) are dropped once both locks are released: their
        // pools' observers may call `publish` (``withState(_:)``).
        var released: [PixelBuffer] = []
        defer { released.removeAll() }
        // Deferred subscribers whose start is due start with this frame; the producer hears of it before and after.
        let deferredStarted = startDeferredSubscribersIfDue()
        defer {
            if deferredStarted > 0 { configuration.deferredStartHandler?(.didRun(subscriberCount: deferredStarted)) }
        }
        return try publishing.withLock { _ throws(FrameBusError) -> UInt64 in
            try publishSerially(
                buffer,
                source: source,
                timing: timing,
                discontinuity: discontinuity,
                releasingInto: &released
            )
        }
    }

    func publishSerially(
        _ buffer: PixelBuffer,
        source: PixelFormat,
        timing: SampleTimingInfo,
        discontinuity: Bool,
        releasingInto released: inout [PixelBuffer]
    ) throws(FrameBusError) -> UInt64 {
        do {
            let started = ProcessInfoShim.monotonicNanoseconds()
            // One lock for the plan and for whether the published surface is described already (it usually is: a
            // pool's surfaces come back), so a frame in the published format takes the lock twice, not three times.
            let (plan, sourceIsDescribed): (Machine.FramePlan?, Bool) = withState(releasingInto: &released) { state in
                let plan = state.machine.beginFrame(
                    format: buffer.surface.layout.pixelFormat,
                    width: UInt32(clamping: buffer.width),
                    height: UInt32(clamping: buffer.height),
                    discontinuity: discontinuity
                )
                // A new frame duration (a producer adapting its rate) is news for the subscribers that asked.
                let duration = Self.wireTime(timing.duration)
                if duration != state.machine.status.frameDuration {
                    var fields = state.machine.status
                    fields.frameDuration = duration
                    perform(state.machine.updateStatus(fields, now: ProcessInfoShim.monotonicNanoseconds()), &state)
                }
                return (plan, state.surfaceDescriptions[buffer.surface.id.rawValue] != nil)
            }
            guard let plan else { throw FrameBusError(.closed, "Publisher.publish") }
            let template = WireFrame(
                sequence: plan.sequence,
                surfaceID: 0,
                presentationTime: Self.wireTime(timing.presentationTimeStamp),
                duration: Self.wireTime(timing.duration),
                publishTime: ProcessInfoShim.monotonicNanoseconds(),
                bytesUsed: 0,
                flags: plan.isDiscontinuity ? WireFrame.discontinuityFlag : 0,
                attachments: WireAttachments.encode(buffer.attachments).tuple
            )
            // The published format is fanned out here, on the producer's thread; every other representation is made
            // by the conversion worker on its own thread, so encoding never holds the producer or its raw subscribers
            // back (docs/ARCHITECTURE.md, "Sustained performance").
            var conversions: [UInt32] = []
            for fourCC in plan.formats {
                guard let format = try? PixelFormat(fourCC: fourCC) else { continue }
                guard format == source else {
                    conversions.append(fourCC)
                    continue
                }
                deliverRepresentation(
                    template,
                    fourCC: fourCC,
                    converted: buffer,
                    bytesUsed: Self.bytesUsed(of: buffer),
                    isConversion: false,
                    knownDescribed: sourceIsDescribed,
                    releasingInto: &released
                )
            }
            if !conversions.isEmpty {
                let job = ConversionWorker.Job(buffer: buffer, template: template, formats: conversions)
                if let replaced = conversionWorker.submit(job, core: self) { released.append(replaced) }
            }
            let (windowEnded, line, cost) = costMeter.withLock { meter in
                let (ended, line) = meter.published(
                    fanOutNanoseconds: ProcessInfoShim.monotonicNanoseconds() &- started,
                    duration: timing.duration,
                    at: started
                )
                return (ended, line, meter.current)
            }
            if let line { logCost(line) }
            if windowEnded { costChanged(cost) }
            return plan.sequence
        }
    }

    /// Fans out one representation of frame `template.sequence` to every subscriber of `fourCC`: `converted` nil means
    /// it could not be made (those subscribers get a DROP). Runs on the producer's thread for the published format and
    /// on the conversion worker's for the others.
    func deliverRepresentation(
        _ template: WireFrame,
        fourCC: UInt32,
        converted: PixelBuffer?,
        bytesUsed: Int,
        isConversion: Bool,
        knownDescribed: Bool,
        releasingInto released: inout [PixelBuffer]
    ) {
        // A surface published for the first time is exported (its read-only handle opened) before locking.
        var fresh = knownDescribed ? nil : converted.flatMap { describeIfNew($0.surface) }
        for attempt in 0..<2 {
            // A description evicted at the cap is closed after the lock is released, not under it.
            var evicted: SurfaceDescription?
            defer { evicted = nil }
            let delivered = withState(releasingInto: &released) { state -> Bool in
                // One clock read for the reaping, the delivery and the sends.
                let now = ProcessInfoShim.monotonicNanoseconds()
                let described = converted.flatMap {
                    representation(of: $0, bytesUsed: bytesUsed, fresh: fresh, evicted: &evicted, &state)
                }
                // A description the caller knew of was dropped at the cap meanwhile (the conversion worker adds
                // descriptions of its own pool's surfaces on its thread): describe it again, outside the lock.
                if described == nil, converted != nil, fresh == nil, attempt == 0 { return false }
                // The releases waiting in the subscribers' rings are reaped before the frame is handed to the
                // machine only when they could change what it admits; otherwise after its wake-ups, which then come
                // sooner (docs/PROTOCOL.md §9.5).
                let reapsFirst = !state.machine.admitsRegardlessOfReleases(
                    sequence: template.sequence,
                    format: fourCC,
                    surfaceID: described?.surfaceID,
                    isConversion: isConversion
                )
                reapBeforePublishing(&state, now: now, reaping: reapsFirst)
                // The kept action array is taken out of the state while it is filled and carried out.
                var actions: [Machine.Action] = []
                swap(&actions, &state.deliveryActions)
                state.machine.deliver(
                    template,
                    format: fourCC,
                    representation: described,
                    isConversion: isConversion,
                    now: now,
                    into: &actions
                )
                perform(actions, &state, now: now)
                actions.removeAll(keepingCapacity: true)
                swap(&actions, &state.deliveryActions)
                if !reapsFirst { serviceRings(&state, now: now) }
                return true
            }
            if delivered { return }
            fresh = converted.flatMap { describeIfNew($0.surface) }
        }
    }

    /// The description of a surface not described yet, made outside the state lock: exporting it opens
    /// `/proc/self/fd/N` once per memfd (a read-only reopen), which must not happen under the lock. Nil when the
    /// surface is described already or cannot be exported (said in the log).
    func describeIfNew(_ surface: Surface) -> SurfaceDescription? {
        let key = surface.id.rawValue
        guard withState({ $0.surfaceDescriptions[key] == nil }) else { return nil }
        do {
            let handle = try surface.makeHandle()
            let (wire, wireV1) = Self.describe(handle)
            return SurfaceDescription(surface: wire, surfaceV1: wireV1, owner: surface, handle: handle)
        } catch {
            configuration.logger.error("cannot export surface \(surface.id): \(error)")
            return nil
        }
    }

    /// What a surface looks like on the wire: its cached description, or `fresh` (``describeIfNew(_:)``), cached.
    ///
    /// Surfaces from pools are forgotten when their pool frees them; `limit` bounds the rest. At the limit the least
    /// recently used description makes room (one: the 1025th surface does not evict the other 1024, whose SURFACEs
    /// may still wait in a subscriber's outbound and would then be exported again under the lock), handed out in
    /// `evicted` so that its descriptor is closed after the lock is released.
    func representation(
        of buffer: PixelBuffer,
        bytesUsed: Int,
        fresh: SurfaceDescription?,
        limit: Int = PublisherCore.maximumSurfaceDescriptions,
        evicted: inout SurfaceDescription?,
        _ state: inout State
    ) -> Machine.Representation? {
        let key = buffer.surface.id.rawValue
        var description = state.surfaceDescriptions[key]  // a reference: looking it up copies nothing
        if description == nil, let fresh {
            if state.surfaceDescriptions.count >= max(limit, 1),
                let oldest = state.surfaceDescriptions.min(by: { $0.value.lastUsed < $1.value.lastUsed })?.key
            {
                evicted = state.surfaceDescriptions.removeValue(forKey: oldest)
            }
            state.surfaceDescriptions[key] = fresh
            description = fresh
        }
        guard let description else { return nil }
        state.descriptionUses &+= 1
        description.lastUsed = state.descriptionUses
        return Machine.Representation(
            surfaceID: key,
            surface: description.surface,
            surfaceV1: description.surfaceV1,
            bytesUsed: UInt64(clamping: bytesUsed),
            resource: buffer
        )
    }

    static let maximumSurfaceDescriptions = 1024

    /// A described surface: what it looks like on the wire and its read-only descriptors. A class, so that every
    /// frame's lookup under the state lock is one retain rather than a copy of its arrays and weak reference.
    final class SurfaceDescription: @unchecked Sendable {
        // `@unchecked Sendable`: every property but `lastUsed` is set in `init` and never changed (a weak reference
        // is read atomically by the runtime); `lastUsed` is read and written only under the state lock; the handle's
        // descriptors are only borrowed to be sent.
        let surface: WireSurface
        let surfaceV1: WireSurfaceV1?
        /// The surface itself, held weakly: once it is gone, nobody (publisher, producer or pool) can use it again.
        private(set) weak var owner: Surface?
        /// Its read-only descriptors, sent with every SURFACE (one open descriptor per described surface; closed
        /// with the description when the surface is freed).
        let handle: SurfaceHandle
        /// When a frame last used it (``State/descriptionUses``), to evict the least recently used at the cap.
        var lastUsed: UInt64 = 0

        init(surface: WireSurface, surfaceV1: WireSurfaceV1?, owner: Surface, handle: consuming SurfaceHandle) {
            self.surface = surface
            self.surfaceV1 = surfaceV1
            self.owner = owner
            self.handle = handle
        }
    }

    /// The SURFACE (and, for one memfd, the SURFACE_V1) describing a handle: backing, modifier, descriptors, and
    /// which descriptor holds each plane.
    static func describe(_ handle: borrowing SurfaceHandle) -> (surface: WireSurface, surfaceV1: WireSurfaceV1?) {
        let layout = handle.layout
        let backing: WireBacking
        let modifier: UInt64
        switch handle.backing {
        case .memfd:
            backing = .memfd
            modifier = WireSurface.linearModifier
        case .dmaBuf(let value):
            backing = .dmaBuf
            modifier = value
        }
        var planes: [WireSurfacePlane] = []
        for (index, plane) in layout.planes.enumerated() {
            planes.append(
                WireSurfacePlane(
                    descriptorIndex: UInt32(clamping: handle.planeDescriptorIndices[index]),
                    offset: UInt64(clamping: plane.offset),
                    bytesPerRow: UInt32(clamping: plane.bytesPerRow),
                    width: UInt32(clamping: plane.width),
                    height: UInt32(clamping: plane.height),
                    bytesPerElement: UInt32(clamping: plane.bytesPerElement)
                )
            )
        }
        let surface = WireSurface(
            surfaceID: handle.id.rawValue,
            pixelFormat: layout.pixelFormat,
            width: UInt32(clamping: layout.width),
            height: UInt32(clamping: layout.height),
            backing: backing,
            modifier: modifier,
            descriptorByteCounts: handle.descriptorByteCounts.map { UInt64(clamping: $0) },
            planes: planes
        )
        var surfaceV1: WireSurfaceV1?
        if backing == .memfd && handle.descriptorCount == 1 {
            surfaceV1 = WireSurfaceV1(
                surfaceID: handle.id.rawValue,
                allocationSize: UInt64(clamping: layout.allocationSize),
                pixelFormat: layout.pixelFormat,
                width: UInt32(clamping: layout.width),
                height: UInt32(clamping: layout.height),
                planes: planes.map {
                    WirePlane(
                        offset: $0.offset,
                        bytesPerRow: $0.bytesPerRow,
                        width: $0.width,
                        height: $0.height,
                        bytesPerElement: $0.bytesPerElement
                    )
                }
            )
        }
        return (surface, surfaceV1)
    }

    /// Encodes or decodes `buffer` into `format` with a buffer from a per-format pool; nil when that fails.
    func convert(_ buffer: PixelBuffer, to format: PixelFormat) -> (PixelBuffer, Int)? {
        let pool: PixelBufferPool
        do {
            pool = try conversionPool(for: format, width: buffer.width, height: buffer.height)
        } catch {
            configuration.logger.error("no pool for \(format): \(error)")
            return nil
        }
        guard let destination = try? pool.makePixelBuffer() else { return nil }
        buffer.propagateAttachments(to: destination)
        do {
            if format.isCompressed {
                let statistics = try codec.compress(buffer, into: destination)
                return (destination, statistics.compressedByteCount)
            } else {
                try codec.decompress(buffer, into: destination)
                return (destination, Self.bytesUsed(of: destination))
            }
        } catch {
            configuration.logger.error("converting \(buffer.pixelFormat) to \(format) failed: \(error)")
            return nil
        }
    }

    func conversionPool(for format: PixelFormat, width: Int, height: Int) throws -> PixelBufferPool {
        // The pool can hold every frame its subscribers may be granted (HoldingPolicy), plus the one being made.
        let (existing, limit) = withState { ($0.conversionPools[format], $0.machine.conversionPoolCapacity) }
        if let existing, existing.attributes.width == width, existing.attributes.height == height,
            existing.attributes.allocationThreshold == limit
        {
            return existing
        }
        let pool =
            format.isCompressed
            ? try SurfaceCodec.makeCompressedPool(
                width: width,
                height: height,
                format: format,
                allocationThreshold: limit
            )
            : try PixelBufferPool(
                attributes: .init(width: width, height: height, pixelFormat: format, allocationThreshold: limit)
            )
        // The pool replaced goes away after unlocking: its idle surfaces are freed, and their observers run then.
        let replaced = withState { $0.conversionPools.updateValue(pool, forKey: format) }
        withExtendedLifetime(replaced) {}
        follow(pool, isProducers: false)
        return pool
    }

    static func bytesUsed(of buffer: PixelBuffer) -> Int {
        if buffer.pixelFormat.isCompressed {
            return (try? SurfaceCodec.bytesUsed(of: buffer)) ?? buffer.allocationSize
        }
        return buffer.surface.layout.planes.reduce(0) { $0 + $1.byteCount }
    }

    static func wireTime(_ time: MediaTime) -> WireTime {
        WireTime(value: time.value, timescale: time.timescale, flags: time.flags.rawValue)
    }
}
