import Foundation
import Logging
import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces
import Synchronization
import SystemPackage

/// Publishes frames to subscribers in other processes, zero-copy: AVCaptureVideoDataOutput's producer side.
///
/// A publisher listens on a Unix `SOCK_SEQPACKET` socket at a path. Each subscriber receives a surface's
/// descriptors once, then a small fixed-size descriptor per frame (docs/PROTOCOL.md). The publisher keeps a
/// reference to every buffer a subscriber holds, so a pool buffer returns to its pool only when no subscriber
/// holds it; when a subscriber goes away (even by `kill -9`), everything it held is released at once. A
/// subscriber that never releases (a hoarder) holds at most what the ``HoldingPolicy`` granted it, so everyone else
/// keeps the full frame rate (docs/PROTOCOL.md §7.3).
///
/// ```swift
/// let pool = try PixelBufferPool(attributes: .init(width: 1920, height: 1080,
///                                                  pixelFormat: .yuv420BiPlanarVideoRange8, allocationThreshold: 34))
/// let path = try SocketPath.default()                 // $XDG_RUNTIME_DIR/framebus.sock
/// let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
/// let buffer = try await publisher.nextPixelBuffer(from: pool)   // waits while subscribers hold every buffer
/// // ... fill buffer ...
/// try publisher.publish(buffer, timing: SampleTimingInfo(presentationTimeStamp: HostClock.now))
/// ```
///
/// The protocol logic is ``PublisherStateMachine``; this class is its IO layer: `publish` fans out on the
/// caller's thread, and one thread accepts connections, reads releases and keeps time.
public final class Publisher: Sendable {
    /// How a publisher listens and what it allows. The limits are those of docs/PROTOCOL.md §8.1.
    public struct Configuration: Sendable {
        /// The socket path (see ``SocketPath/default(name:)``).
        public var path: String
        /// The formats offered to subscribers. Each frame is published in one format; a subscriber granted the
        /// compressed variant of it (or the base of a compressed frame) gets a converted copy, made once per frame
        /// and shared by every subscriber that wants it.
        public var formats: [PixelFormat]
        /// Mode of the socket file (default `0o600`).
        public var socketMode: UInt32 = 0o600
        /// User ids allowed to connect (`SO_PEERCRED`); default: only our own.
        public var allowedUserIDs: Set<UInt32>
        /// Most subscribers at once (1…65535).
        public var maximumSubscribers = 16
        /// Most monitors (`framebus top`) at once (0…65535).
        public var maximumMonitors = 4
        /// Most accepted connections waiting for their HELLO (1…65535); more wait in the listen backlog.
        public var maximumPendingHandshakes = 64
        /// How many frames each subscriber may hold: the admission budget over every pool a subscriber can pin
        /// (docs/PROTOCOL.md §7.3).
        public var holdingPolicy = HoldingPolicy()
        /// ``HoldingPolicy/extraHeldFrames`` of ``holdingPolicy``: frames a subscriber may hold beyond its queue
        /// depth (0…65535), within the budget.
        public var extraHeldFramesPerSubscriber: Int {
            get { holdingPolicy.extraHeldFrames }
            set { holdingPolicy.extraHeldFrames = newValue }
        }
        /// ``HoldingPolicy/budget`` of ``holdingPolicy``: frames all subscribers together may hold; nil: the
        /// producer's pool's allocation threshold minus ``producerReserve``, learnt from
        /// ``Publisher/makePixelBuffer(from:)``. Set it when subscribers may connect before the first buffer is
        /// made: until the budget is known a WELCOME grants what was asked for, and the publisher later holds such a
        /// subscriber to its share of the budget, which may be less than its WELCOME said.
        public var heldFrameBudget: Int? {
            get { holdingPolicy.budget }
            set { holdingPolicy.budget = newValue }
        }
        /// ``HoldingPolicy/producerReserve`` of ``holdingPolicy``: pool buffers never counted in the held-frame
        /// budget (0…65535).
        public var producerReserve: Int {
            get { holdingPolicy.producerReserve }
            set { holdingPolicy.producerReserve = newValue }
        }
        /// Most surfaces announced to one subscriber before the oldest idle one is retired (2…65535).
        public var maximumAnnouncedSurfaces = 64
        /// Most messages waiting for one subscriber that stopped reading before it is disconnected (1…1_000_000).
        public var maximumQueuedMessages = 256
        /// A connection that sends no HELLO within this time is closed.
        public var handshakeTimeout: Duration = .seconds(5)
        /// How often monitors get a report.
        public var monitorInterval: Duration = .seconds(1)
        /// A pending DROP range is sent at the latest this long after it started (docs/PROTOCOL.md §5.8).
        public var dropFlushInterval: Duration = .milliseconds(100)
        /// A closing connection whose last ERROR cannot be sent is closed without it after this time.
        public var closeGracePeriod: Duration = .seconds(1)
        /// Most converted (compressed or decompressed) buffers of one format alive at once (1…65535); nil (the
        /// default): every frame subscribers may hold together (the held-frame budget; without one, 255 ×
        /// ``maximumSubscribers``), plus the one being converted. A limit below that is a budget of its own:
        /// subscribers of that format are admitted against it as against the producer's pool (``HoldingPolicy``), so
        /// hoarders of a converted format cannot starve its other subscribers.
        public var conversionBufferLimit: Int?
        /// Threads that encode (or decode) each frame for subscribers of another format (1…64): 1 converts on the
        /// thread that calls ``Publisher/publish(_:timing:)``; more split each frame across that many threads, which
        /// the publisher keeps for its lifetime. Conversion allocates nothing per frame either way.
        public var conversionThreadCount = 1
        /// Where diagnostics go (closed connections and their reasons, rate-limited).
        public var logger: Logger

        /// Creates a configuration.
        public init(path: String, formats: [PixelFormat], logger: Logger = Logger(label: "framebus.publisher")) {
            self.path = path
            self.formats = formats
            self.allowedUserIDs = [ProcessInfoShim.userID]
            self.logger = logger
        }

        /// Checks every value against the range the protocol can carry.
        ///
        /// - Throws: ``FrameBusError/Code-swift.struct/invalidArgument`` naming the field.
        public func validate() throws(FrameBusError) {
            func check(_ condition: Bool, _ message: String) throws(FrameBusError) {
                guard condition else {
                    throw FrameBusError(.invalidArgument, "Publisher.Configuration", message: message)
                }
            }
            let u16 = 0...Int(UInt16.max)
            try check(!formats.isEmpty, "no formats")
            try check(formats.count <= 64, "\(formats.count) formats (at most 64)")
            try check((1...Int(UInt16.max)).contains(maximumSubscribers), "maximumSubscribers \(maximumSubscribers)")
            try check(u16.contains(maximumMonitors), "maximumMonitors \(maximumMonitors)")
            try check(
                (1...Int(UInt16.max)).contains(maximumPendingHandshakes),
                "maximumPendingHandshakes \(maximumPendingHandshakes)"
            )
            try check(
                u16.contains(extraHeldFramesPerSubscriber),
                "extraHeldFramesPerSubscriber \(extraHeldFramesPerSubscriber)"
            )
            try check(
                heldFrameBudget.map { (1...1_000_000).contains($0) } ?? true,
                "heldFrameBudget \(heldFrameBudget ?? 0)"
            )
            try check(u16.contains(producerReserve), "producerReserve \(producerReserve)")
            try check(
                (1...HoldingPolicy.largestGrant).contains(holdingPolicy.minimumHeldFrames),
                "minimumHeldFrames \(holdingPolicy.minimumHeldFrames)"
            )
            try check(
                (2...Int(UInt16.max)).contains(maximumAnnouncedSurfaces),
                "maximumAnnouncedSurfaces \(maximumAnnouncedSurfaces)"
            )
            try check((1...1_000_000).contains(maximumQueuedMessages), "maximumQueuedMessages \(maximumQueuedMessages)")
            try check(
                conversionBufferLimit.map { (1...Int(UInt16.max)).contains($0) } ?? true,
                "conversionBufferLimit \(conversionBufferLimit ?? 0)"
            )
            try check(
                handshakeTimeout > .zero && handshakeTimeout <= .seconds(3600),
                "handshakeTimeout \(handshakeTimeout)"
            )
            try check(monitorInterval >= .milliseconds(10) && monitorInterval <= .seconds(3600), "monitorInterval")
            try check(
                dropFlushInterval > .zero && dropFlushInterval <= .seconds(60),
                "dropFlushInterval \(dropFlushInterval)"
            )
            try check(
                closeGracePeriod >= .zero && closeGracePeriod <= .seconds(3600),
                "closeGracePeriod \(closeGracePeriod)"
            )
            try check(socketMode <= 0o777, "socketMode 0o\(String(socketMode, radix: 8))")
            try check((1...64).contains(conversionThreadCount), "conversionThreadCount \(conversionThreadCount)")
        }

        var limits: PublisherStateMachine<PixelBuffer>.Limits {
            var limits = PublisherStateMachine<PixelBuffer>.Limits(
                formats: formats.map(\.fourCC),
                allowedUserIDs: allowedUserIDs
            )
            limits.maximumSubscribers = maximumSubscribers
            limits.maximumMonitors = maximumMonitors
            limits.maximumPendingHandshakes = maximumPendingHandshakes
            limits.handshakeTimeout = handshakeTimeout.nanoseconds
            limits.maximumQueuedMessages = maximumQueuedMessages
            limits.monitorInterval = monitorInterval.nanoseconds
            limits.dropFlushInterval = dropFlushInterval.nanoseconds
            limits.closeGracePeriod = closeGracePeriod.nanoseconds
            limits.extraHeldFramesPerSubscriber = extraHeldFramesPerSubscriber
            limits.producerReserve = producerReserve
            limits.maximumAnnouncedSurfaces = maximumAnnouncedSurfaces
            limits.heldFrameBudget = heldFrameBudget
            limits.minimumHeldFrames = holdingPolicy.minimumHeldFrames
            limits.conversionBufferLimit = conversionBufferLimit
            return limits
        }
    }

    typealias Machine = PublisherStateMachine<PixelBuffer>
    typealias ConnectionID = Machine.ConnectionID

    private struct State {
        var machine: Machine
        var sockets: [ConnectionID: Socket] = [:]
        /// Version-3 subscribers' rings (docs/PROTOCOL.md §9).
        var rings: [ConnectionID: PublisherRings] = [:]
        var conversionPools: [PixelFormat: PixelBufferPool] = [:]
        /// What each surface sent so far looks like on the wire (from its handle, made once).
        var surfaceDescriptions: [UInt64: SurfaceDescription] = [:]
        /// When the loop next looks for described surfaces that went away outside any followed pool.
        var nextSurfaceSweep: UInt64 = 0
        /// After `accept` failed (EMFILE), the listener is left alone until then.
        var acceptPausedUntil: UInt64 = 0
        /// When a frame was last published: while frames keep coming, releases are reaped by the next publish and
        /// the loop thread does not ask to be woken for them (docs/PROTOCOL.md §9.5).
        var lastPublishTime: UInt64 = 0
        /// Callers of ``nextPixelBuffer(from:)`` waiting: releases must then wake the loop thread at once.
        var buffersWanted = 0
        var logLimiter = LogLimiter()
    }

    /// The configuration it was made with.
    public let configuration: Configuration
    /// Random per publisher instance; subscribers see a new one after a restart.
    public let streamID: UInt64
    private let listener: Socket
    private let doorbell: Doorbell
    private let state: Mutex<State>
    /// Serialises `publish` calls, so sequence numbers reach every subscriber in order.
    private let publishing = Mutex<Void>(())
    /// Surfaces pools freed, waiting for the loop thread to retire them (one entry per freed surface).
    private let freedSurfaces = Mutex<[UInt64]>([])
    /// Pools whose capacity and freed surfaces the publisher follows, by their never-reused id (a pool's address is
    /// reused by the next pool); entries of pools that went away are dropped when a new pool is followed.
    private let followedPools = Mutex<[PixelBufferPool.ID: FollowedPool]>([:])

    private struct FollowedPool {
        weak var pool: PixelBufferPool?
        var observation: PixelBufferPool.SurfaceFreedObservation?
    }
    /// Encodes and decodes frames for subscribers of another format, reusing its workspace (and threads) for every
    /// frame. Its calls are serialised, as `publish` calls are.
    private let codec: SurfaceCodecContext

    /// Starts listening at `configuration.path`, replacing a stale socket file.
    ///
    /// - Throws: ``FrameBusError/Code-swift.struct/invalidArgument`` for a configuration out of range (see
    ///   ``Configuration/validate()``) or a path too long, ``FrameBusError/Code-swift.struct/addressInUse`` if a
    ///   live publisher listens there, ``FrameBusError/Code-swift.struct/systemCall``.
    public init(configuration: Configuration) throws(FrameBusError) {
        try configuration.validate()
        self.configuration = configuration
        self.streamID = UInt64.random(in: 1...UInt64.max)
        self.listener = try Socket.listen(
            path: configuration.path,
            mode: configuration.socketMode,
            backlog: Int32(min(configuration.maximumPendingHandshakes, 4096))
        ).get()
        self.doorbell = try Doorbell()
        self.codec = SurfaceCodecContext(threadCount: configuration.conversionThreadCount)
        self.state = Mutex(State(machine: Machine(limits: configuration.limits, streamID: streamID)))
        // The thread holds the publisher only during one turn (at most a second), so dropping the last reference
        // stops it (deinit sends END_OF_STREAM without waiting for anything).
        let thread = Thread { [weak self] in
            while let publisher = self, publisher.runOnce() {}
        }
        thread.name = "framebus.publisher"
        thread.start()
    }

    deinit {
        stop()
        unfollowPools()  // also the pools followed after stop()
    }

    /// Stops observing the pools still alive (their observers only hold the publisher weakly).
    private func unfollowPools() {
        let followed = followedPools.withLock { pools in
            defer { pools.removeAll() }
            return Array(pools.values)
        }
        for entry in followed {
            if let pool = entry.pool, let observation = entry.observation {
                pool.removeSurfaceFreedObserver(observation)
            }
        }
    }

    // MARK: Buffers

    /// Takes a free buffer from `pool` for the next frame, without waiting.
    ///
    /// A failed request uses no sequence number and tells no subscriber anything: if the producer gives up on the
    /// frame, it says so with ``reportDroppedFrames(reason:count:)``. The publisher learns the pool's capacity
    /// (its held-frame budget, docs/PROTOCOL.md §7.3) and retires the pool's surfaces in every subscriber when the
    /// pool frees them.
    ///
    /// - Throws: ``FrameBusError/Code-swift.struct/outOfBuffers`` when every buffer is in use (wait with
    ///   ``nextPixelBuffer(from:)`` instead); ``FrameBusError/Code-swift.struct/resourceFailure`` if the pool
    ///   cannot make a surface.
    public func makePixelBuffer(from pool: PixelBufferPool) throws(FrameBusError) -> PixelBuffer {
        follow(pool)
        do {
            do {
                return try pool.makePixelBuffer()
            } catch where error.code == .wouldExceedAllocationThreshold {
                // Releases are reaped lazily while frames are published (§9.5): reap them now and try once more.
                state.withLock { serviceRings(&$0) }
                return try pool.makePixelBuffer()
            }
        } catch  where error.code == .wouldExceedAllocationThreshold {
            throw FrameBusError(.outOfBuffers, "Publisher.makePixelBuffer", message: error.description)
        } catch {
            throw FrameBusError(.resourceFailure, "Publisher.makePixelBuffer", message: error.description)
        }
    }

    /// Waits for a free buffer from `pool` (CoreVideo's free-buffer notification, as a suspension).
    ///
    /// Subscribers together hold at most the held-frame budget (``HoldingPolicy``), so a buffer becomes free as soon
    /// as the producer's previous frames are released or superseded. Cancelling the task ends the wait.
    ///
    /// - Throws: ``FrameBusError/Code-swift.struct/closed`` after ``stop()`` or when the task is cancelled (message
    ///   "cancelled"), ``FrameBusError/Code-swift.struct/resourceFailure`` if the pool cannot make a surface.
    public func nextPixelBuffer(from pool: PixelBufferPool) async throws(FrameBusError) -> PixelBuffer {
        follow(pool)
        guard !isStopped else { throw FrameBusError(.closed, "Publisher.nextPixelBuffer") }
        // While we wait, every release wakes the loop thread (§9.5), which reaps it and so frees its buffer.
        state.withLock { state in
            state.buffersWanted += 1
            serviceRings(&state)
        }
        doorbell.ring()
        defer { state.withLock { $0.buffersWanted -= 1 } }
        do {
            return try await pool.nextPixelBuffer()
        } catch  where error.code == .cancelled {
            throw FrameBusError(.closed, "Publisher.nextPixelBuffer", message: "cancelled")
        } catch {
            throw FrameBusError(.resourceFailure, "Publisher.nextPixelBuffer", message: error.description)
        }
    }

    /// Follows the surfaces a pool frees (once per pool); for the producer's pool, learns its capacity too.
    private func follow(_ pool: PixelBufferPool, isProducers: Bool = true) {
        let isNew = followedPools.withLock { pools in
            guard pools[pool.id] == nil else { return false }
            // Only pools still alive are kept, so the map is bounded by the pools in use.
            pools = pools.filter { $0.value.pool != nil }
            pools[pool.id] = FollowedPool(pool: pool)
            return true
        }
        guard isNew else { return }
        if isProducers, let threshold = pool.attributes.allocationThreshold {
            state.withLock { $0.machine.learnPoolCapacity(threshold) }
        }
        // An observer of our own (docs/PROTOCOL.md §4.2, retiring): the application's handler and other
        // publishers' observers are called as well.
        let observation = pool.addSurfaceFreedObserver { [weak self] surfaceID in
            self?.surfaceFreed(surfaceID.rawValue)
        }
        followedPools.withLock { $0[pool.id]?.observation = observation }
    }

    /// The pool freed a surface. This can run inside the state lock (a subscriber's release drops the last
    /// reference to a buffer of a pool that went away), so the id is only noted here; the loop thread retires it.
    private func surfaceFreed(_ surfaceID: UInt64) {
        freedSurfaces.withLock { $0.append(surfaceID) }
        doorbell.ring()
    }

    private func retireFreedSurfaces(_ state: inout State) {
        let freed = freedSurfaces.withLock { freed in
            defer { freed.removeAll(keepingCapacity: true) }
            return freed
        }
        for surfaceID in freed {
            state.surfaceDescriptions[surfaceID] = nil
            perform(state.machine.surfaceFreed(surfaceID), &state)
        }
        // A surface from no followed pool (a pool used directly, a lone pixel buffer) is freed when its last
        // reference goes: the publisher holds it only weakly, and retires it once it is gone.
        let now = ProcessInfoShim.monotonicNanoseconds()
        guard now >= state.nextSurfaceSweep else { return }
        state.nextSurfaceSweep = now &+ Self.surfaceSweepInterval
        let gone = state.surfaceDescriptions.filter { $0.value.owner == nil }.map(\.key)
        for surfaceID in gone {
            state.surfaceDescriptions[surfaceID] = nil
            perform(state.machine.surfaceFreed(surfaceID), &state)
        }
    }

    /// How often the loop looks for described surfaces that went away outside followed pools.
    private static let surfaceSweepInterval: UInt64 = 250_000_000

    // MARK: Publishing

    /// Records that `count` frames were lost before they could be published (upstream loss), and tells every
    /// subscriber with one coalesced DROP.
    ///
    /// Uses `count` sequence numbers. For `.discontinuity` the next published frame also carries the
    /// discontinuity flag.
    ///
    /// - Returns: the sequence numbers used, or nil after ``stop()``.
    @discardableResult
    public func reportDroppedFrames(reason: DroppedFrameReason, count: Int = 1) -> ClosedRange<UInt64>? {
        let reason = WireDropReason(rawValue: UInt32(reason.rawValue)) ?? .discontinuity
        let count = UInt64(max(1, count))
        return publishing.withLock { _ in
            state.withLock { state in
                let now = ProcessInfoShim.monotonicNanoseconds()
                guard let (range, actions) = state.machine.reportDropped(reason: reason, count: count, now: now)
                else { return nil }
                perform(actions, &state)
                return range
            }
        }
    }

    /// Publishes a frame to every subscriber.
    ///
    /// Subscribers that hold all they were granted get a DROP with `outOfBuffers` instead. The buffer stays referenced
    /// until every subscriber that received it has released it; do not write into it after publishing (take a
    /// new one from the pool for the next frame).
    ///
    /// - Parameters:
    ///   - buffer: the frame, in one of the configured formats or a format whose compressed variant (or base) is
    ///     configured.
    ///   - timing: presentation time and duration (capture time on `CLOCK_MONOTONIC`, ``HostClock``).
    ///   - discontinuity: the producer lost frames or was reconfigured before this one.
    /// - Returns: the frame's sequence number.
    /// - Throws: ``FrameBusError/Code-swift.struct/closed`` after ``stop()``;
    ///   ``FrameBusError/Code-swift.struct/invalidArgument`` for a format that cannot serve the configured ones.
    @discardableResult
    public func publish(
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
        return try publishing.withLock { _ throws(FrameBusError) -> UInt64 in
            try publishSerially(buffer, source: source, timing: timing, discontinuity: discontinuity)
        }
    }

    private func publishSerially(
        _ buffer: PixelBuffer,
        source: PixelFormat,
        timing: SampleTimingInfo,
        discontinuity: Bool
    ) throws(FrameBusError) -> UInt64 {
        do {
            let plan: Machine.FramePlan? = state.withLock { state in
                state.machine.beginFrame(
                    format: buffer.surface.layout.pixelFormat,
                    width: UInt32(clamping: buffer.width),
                    height: UInt32(clamping: buffer.height),
                    discontinuity: discontinuity
                )
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
            // Each representation is made once (outside the state lock: encoding takes milliseconds) and fanned
            // out as soon as it exists, the published format first.
            for fourCC in plan.formats {
                guard let format = try? PixelFormat(fourCC: fourCC) else { continue }
                let converted: PixelBuffer?
                let bytesUsed: Int
                if format == source {
                    converted = buffer
                    bytesUsed = Self.bytesUsed(of: buffer)
                } else if let (destination, used) = convert(buffer, to: format) {
                    converted = destination
                    bytesUsed = used
                } else {
                    converted = nil
                    bytesUsed = 0
                }
                state.withLock { state in
                    reapBeforePublishing(&state)
                    let described = converted.flatMap { representation(of: $0, bytesUsed: bytesUsed, &state) }
                    let actions = state.machine.deliver(
                        template,
                        format: fourCC,
                        representation: described,
                        isConversion: format != source,
                        now: ProcessInfoShim.monotonicNanoseconds()
                    )
                    perform(actions, &state)
                }
            }
            return plan.sequence
        }
    }

    /// What a surface looks like on the wire, from its handle (computed once per surface and cached).
    private func representation(
        of buffer: PixelBuffer,
        bytesUsed: Int,
        _ state: inout State
    ) -> Machine.Representation? {
        let surface = buffer.surface
        let key = surface.id.rawValue
        var description = state.surfaceDescriptions[key]
        if description == nil {
            // Once per surface: a handle (a reopen per memfd) tells how its descriptors and planes are laid out.
            do {
                let handle = try surface.makeHandle()
                description = Self.describe(handle)
                description?.owner = surface
            } catch {
                configuration.logger.error("cannot export surface \(surface.id): \(error)")
                return nil
            }
            // Surfaces from pools are forgotten when their pool frees them; the cap bounds the rest.
            if state.surfaceDescriptions.count >= Self.maximumSurfaceDescriptions {
                state.surfaceDescriptions.removeAll(keepingCapacity: true)
            }
            state.surfaceDescriptions[key] = description
        }
        guard let description else { return nil }
        return Machine.Representation(
            surfaceID: key,
            surface: description.surface,
            surfaceV1: description.surfaceV1,
            bytesUsed: UInt64(clamping: bytesUsed),
            resource: buffer
        )
    }

    private static let maximumSurfaceDescriptions = 1024

    struct SurfaceDescription {
        var surface: WireSurface
        var surfaceV1: WireSurfaceV1?
        /// The surface itself, held weakly: once it is gone, nobody (publisher, producer or pool) can use it again.
        weak var owner: Surface?
    }

    /// The SURFACE (and, for one memfd, the SURFACE_V1) describing a handle: backing, modifier, descriptors, and
    /// which descriptor holds each plane.
    static func describe(_ handle: borrowing SurfaceHandle) -> SurfaceDescription {
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
        return SurfaceDescription(surface: surface, surfaceV1: surfaceV1)
    }

    /// Encodes or decodes `buffer` into `format` with a buffer from a per-format pool; nil when that fails.
    private func convert(_ buffer: PixelBuffer, to format: PixelFormat) -> (PixelBuffer, Int)? {
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

    private func conversionPool(for format: PixelFormat, width: Int, height: Int) throws -> PixelBufferPool {
        // The pool can hold every frame its subscribers may be granted (HoldingPolicy), plus the one being made.
        let (existing, limit) = state.withLock { ($0.conversionPools[format], $0.machine.conversionPoolCapacity) }
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
        state.withLock { $0.conversionPools[format] = pool }
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

    /// The version-1 SURFACE_V1 of a single-memfd surface (tests build hostile variants of it).
    static func wireSurfaceV1(_ surface: Surface) -> WireSurfaceV1 {
        let handle = try! surface.makeHandle()
        return describe(handle).surfaceV1!
    }

    // MARK: Statistics and lifetime

    /// A snapshot of the counters.
    public var statistics: PublisherStatistics {
        state.withLock { state in
            let machine = state.machine
            var statistics = PublisherStatistics()
            statistics.published = Int(clamping: machine.published)
            for (reason, count) in machine.droppedAtSource {
                if let reason = DroppedFrameReason(rawValue: UInt8(reason.rawValue)) {
                    statistics.droppedAtSource[reason] = Int(clamping: count)
                }
            }
            statistics.conversions = Int(clamping: machine.conversions)
            var delivered = machine.departed.delivered
            var bytes = machine.departed.bytesDelivered
            var late = machine.departed.droppedLate
            var outOfBuffers = machine.departed.droppedOutOfBuffers
            var discontinuity = machine.departed.droppedDiscontinuity
            var total = FrameStatistics()
            for subscriber in machine.subscribers {
                var frames = FrameStatistics()
                frames.delivered = Int(clamping: subscriber.delivered)
                frames.bytesDelivered = Int(clamping: subscriber.bytesDelivered)
                frames.dropped = Self.dropped(
                    subscriber.droppedLate,
                    subscriber.droppedOutOfBuffers,
                    subscriber.droppedDiscontinuity
                )
                frames.heldNow = subscriber.held
                frames.queueDepth = subscriber.queued
                frames.latency = subscriber.holdTimes
                delivered.saturatingAdd(subscriber.delivered)
                bytes.saturatingAdd(subscriber.bytesDelivered)
                late.saturatingAdd(subscriber.droppedLate)
                outOfBuffers.saturatingAdd(subscriber.droppedOutOfBuffers)
                discontinuity.saturatingAdd(subscriber.droppedDiscontinuity)
                total.heldNow += subscriber.held
                total.queueDepth += subscriber.queued
                statistics.subscribers.append(
                    SubscriberRecord(
                        id: subscriber.id.rawValue,
                        processID: subscriber.credentials.processID,
                        userID: subscriber.credentials.userID,
                        format: try? PixelFormat(fourCC: subscriber.format),
                        queueDepth: subscriber.queueDepth,
                        isLatestOnly: subscriber.isLatestOnly,
                        maximumHeldFrames: subscriber.maximumHeldFrames,
                        statistics: frames
                    )
                )
            }
            total.delivered = Int(clamping: delivered)
            total.bytesDelivered = Int(clamping: bytes)
            total.dropped = Self.dropped(late, outOfBuffers, discontinuity)
            total.latency = machine.holdTimeSummary
            statistics.total = total
            return statistics
        }
    }

    private static func dropped(
        _ late: UInt64,
        _ outOfBuffers: UInt64,
        _ discontinuity: UInt64
    )
        -> [DroppedFrameReason: Int]
    {
        var dropped: [DroppedFrameReason: Int] = [:]
        if late > 0 { dropped[.frameWasLate] = Int(clamping: late) }
        if outOfBuffers > 0 { dropped[.outOfBuffers] = Int(clamping: outOfBuffers) }
        if discontinuity > 0 { dropped[.discontinuity] = Int(clamping: discontinuity) }
        return dropped
    }

    /// How many subscribers have completed their handshake.
    public var subscriberCount: Int { state.withLock { $0.machine.subscriberCount } }

    /// Connections accepted and waiting for their HELLO.
    public var pendingHandshakeCount: Int { state.withLock { $0.machine.pendingCount } }

    /// Frames held by subscribers now.
    public var heldFrameCount: Int { state.withLock { $0.machine.heldFrameCount } }

    private var isStopped: Bool { state.withLock { $0.machine.isStopped } }

    /// Sends END_OF_STREAM to every subscriber, closes every connection, stops listening and removes the socket
    /// file. Idempotent, and never waits: the loop thread ends on its own at its next wake-up.
    public func stop() {
        let wasRunning = state.withLock { state -> Bool in
            guard !state.machine.isStopped else { return false }
            perform(state.machine.stop(now: ProcessInfoShim.monotonicNanoseconds()), &state)
            for (_, socket) in state.sockets { socket.shutdown() }
            state.sockets.removeAll()
            state.rings.removeAll()
            return true
        }
        if wasRunning {
            unfollowPools()
            _ = Syscall.unlink(configuration.path)
            listener.shutdown()
            doorbell.ring()
        }
    }

    // MARK: Carrying out actions (always under the state lock)

    private func perform(_ actions: [Machine.Action], _ state: inout State) {
        for action in actions {
            switch action {
            case .flush(let id):
                flush(id, &state)
            case .close(let id):
                state.sockets.removeValue(forKey: id)?.shutdown()
                state.rings[id] = nil
                state.machine.closedAfterStop(id)
            case .log(let level, let line):
                configuration.logger.log(level: level, "\(line)")
            case .deadlineChanged:
                doorbell.ring()
            }
        }
    }

    /// Sends what the machine queued for `id` until the socket is full.
    private func flush(_ id: ConnectionID, _ state: inout State) {
        guard let socket = state.sockets[id] else { return }
        let rings = state.rings[id]
        var sent = 0
        var failure: String?
        var ringFailure: String?
        // The slice must be gone before `sent` changes the queue, or that change copies it.
        do {
            let items = state.machine.outbound(of: id)
            sending: for item in items {
                // Version 3: FRAME and DROP go into the announce ring, in order with the socket's messages.
                if let rings, rings.carries(item.message) {
                    switch rings.append(item.message) {
                    case .appended:
                        sent += 1
                        continue sending
                    case .full:
                        break sending
                    case .violation(let reason):
                        ringFailure = reason
                        break sending
                    }
                }
                // Slots written before this datagram must be visible before it can be read (PROTOCOL.md §9.4).
                if let rings, let reason = rings.commit() {
                    ringFailure = reason
                    break sending
                }
                let outcome: Result<Socket.SendOutcome, SendFailure>
                if let rings, case .welcome = item.message {
                    outcome = socket.send(item.message.encoded(), descriptors: rings.welcomeDescriptors)
                        .mapError { SendFailure(reason: "send failed: \($0)") }
                } else {
                    outcome = Self.send(item, on: socket)
                }
                switch outcome {
                case .success(.sent):
                    sent += 1
                    rings?.sentOnSocket(item.message)
                case .success(.wouldBlock):
                    break sending
                case .failure(let error):
                    failure = error.reason
                    break sending
                }
            }
        }
        if let rings, ringFailure == nil { ringFailure = rings.commit() }
        let now = ProcessInfoShim.monotonicNanoseconds()
        perform(state.machine.sent(sent, on: id, now: now), &state)
        if let failure {
            perform(state.machine.connectionClosed(id, reason: failure, now: now), &state)
            state.sockets.removeValue(forKey: id)?.shutdown()
            state.rings[id] = nil
        } else if let ringFailure {
            state.rings[id] = nil
            perform(state.machine.ringViolation(ringFailure, from: id, now: now), &state)
        } else if state.machine.hasOutbound(id) && !(rings?.isBlockedOnRing ?? false) {
            doorbell.ring()  // the loop must poll this socket for room to write
        }
    }

    private static func send(_ item: Machine.Outbound, on socket: Socket) -> Result<Socket.SendOutcome, SendFailure> {
        let outcome: Result<Socket.SendOutcome, Errno>
        switch item {
        case .message(let message):
            outcome = socket.send(message.encoded())
        case .surface(let message, let buffer):
            let handle: SurfaceHandle
            do { handle = try buffer.surface.makeHandle() } catch {
                return .failure(SendFailure(reason: "cannot export surface \(buffer.surface.id): \(error)"))
            }
            outcome = socket.send(message.encoded(), descriptors: handle.borrowedDescriptors.map(\.rawValue))
        }
        return outcome.mapError { SendFailure(reason: "send failed: \($0)") }
    }

    private struct SendFailure: Error {
        var reason: String
    }

    // MARK: The event loop

    /// Most datagrams read from one connection per turn, so one busy peer cannot starve the others.
    private static let readsPerTurn = 64

    /// How long the listener is left alone after `accept` failed (out of descriptors).
    private static let acceptPause: UInt64 = 100_000_000

    /// One turn of the event loop; false when the publisher stopped.
    private func runOnce() -> Bool {
        var interests: [(descriptor: Int32, events: Int16)] = [(doorbell.descriptor, PollEvents.readable)]
        var polled: [(ConnectionID, Socket)] = []
        var ringPolled: [ConnectionID] = []
        let (stopped, listening, timeout) = state.withLock { state -> (Bool, Bool, Int32) in
            let machine = state.machine
            let now = ProcessInfoShim.monotonicNanoseconds()
            let paused = now < state.acceptPausedUntil
            let listening = machine.canAcceptConnection && !paused
            if listening { interests.append((listener.descriptor, PollEvents.readable)) }
            polled.reserveCapacity(state.sockets.count)
            var ringsWaiting = false
            // Releases wake this thread only when someone waits for a buffer or nothing was published for a while
            // (§9.5); otherwise the next publish reaps them, and a subscriber wakes us past its threshold.
            let wantsReleases =
                state.buffersWanted > 0 || now &- state.lastPublishTime >= Self.lazyReapingPeriod
            for (id, socket) in state.sockets {
                polled.append((id, socket))
                let blockedOnRing = state.rings[id]?.isBlockedOnRing ?? false
                let events =
                    PollEvents.readable | (machine.hasOutbound(id) && !blockedOnRing ? PollEvents.writable : 0)
                interests.append((socket.descriptor, events))
            }
            // Version 3: each subscriber's wake-up socket, after saying we sleep and looking at its release ring again.
            for (id, rings) in state.rings {
                ringPolled.append(id)
                interests.append((rings.channel.ownWake.descriptor, PollEvents.readable))
                guard wantsReleases else { continue }
                // A ring stays armed until its wake-up socket fires: a release written since then saw `sleeping` set.
                if !rings.isArmed { if case .success(true) = rings.prepareToSleep() { rings.isArmed = true } }
                if !rings.isArmed { ringsWaiting = true }
            }
            var timeout: Int32 = ringsWaiting ? 0 : 1000
            var deadline = machine.nextDeadline()
            if paused { deadline = min(deadline ?? .max, state.acceptPausedUntil) }
            if let deadline, timeout > 0 {
                let wait = deadline > now ? (deadline - now) / 1_000_000 + 1 : 0
                timeout = Int32(min(wait, 1000))
            }
            if !wantsReleases && !state.rings.isEmpty && timeout > 0 {
                // Arm the rings once publishing pauses.
                let due = state.lastPublishTime &+ Self.lazyReapingPeriod
                timeout = min(timeout, Int32(min(due > now ? (due - now) / 1_000_000 + 1 : 0, 1000)))
            }
            return (machine.isStopped, listening, timeout)
        }
        if stopped { return false }
        let ready: [Int16]
        switch Syscall.poll(interests, timeout: timeout) {
        case .success(let events): ready = events
        case .failure(.interrupted): return true
        case .failure(let errno):
            configuration.logger.critical("publisher poll failed: \(errno)")
            return false
        }
        if ready[0] != 0 { doorbell.drain() }
        let offset = listening ? 2 : 1
        state.withLock { state in
            if listening && ready[1] != 0 { acceptPending(&state) }
            for (index, (id, socket)) in polled.enumerated() where ready[index + offset] != 0 {
                let events = ready[index + offset]
                if events & PollEvents.writable != 0 { flush(id, &state) }
                if events & ~PollEvents.writable != 0 { readPending(id, socket, &state) }
            }
            let ringOffset = offset + polled.count
            for (index, id) in ringPolled.enumerated() where ready[ringOffset + index] != 0 {
                state.rings[id]?.isArmed = false
                if let reason = state.rings[id]?.wokeUp() {
                    state.rings[id] = nil
                    perform(state.machine.ringViolation(reason, from: id, now: ProcessInfoShim.monotonicNanoseconds()), &state)
                }
            }
            // Only rings that woke us (or could not be armed) can hold releases we have not seen.
            serviceRings(&state, onlyUnarmed: true)
            retireFreedSurfaces(&state)
            let now = ProcessInfoShim.monotonicNanoseconds()
            if let deadline = state.machine.nextDeadline(), deadline <= now {
                perform(state.machine.tick(now: now), &state)
            }
        }
        return true
    }

    private func acceptPending(_ state: inout State) {
        while state.machine.canAcceptConnection {
            let socket: Socket
            switch listener.accept() {
            case .success(.some(let accepted)): socket = accepted
            case .success(.none): return
            case .failure(let errno):
                // EMFILE and friends: the pending connection stays in the backlog and keeps the listener readable,
                // so stop listening for a while instead of spinning, and say so at most once per 10 s.
                let now = ProcessInfoShim.monotonicNanoseconds()
                state.acceptPausedUntil = now &+ Self.acceptPause
                let line = "accept failed: \(errno); not accepting for \(Self.acceptPause / 1_000_000) ms"
                if let line = state.logLimiter.admit(key: "accept", message: line, now: now, interval: 10_000_000_000) {
                    configuration.logger.error("\(line)")
                }
                return
            }
            guard case .success(let credentials) = socket.peerCredentials() else {
                socket.shutdown()
                continue
            }
            guard configuration.allowedUserIDs.contains(credentials.uid) else {
                refuseAtAccept(socket, uid: credentials.uid, &state)
                continue
            }
            let id = state.machine.connectionAccepted(
                .init(processID: credentials.pid, userID: credentials.uid),
                now: ProcessInfoShim.monotonicNanoseconds()
            )
            state.sockets[id] = socket
        }
    }

    /// A uid that may not connect is answered at once and never holds a pending slot (docs/PROTOCOL.md §4.1), so
    /// a flood of silent connections from it cannot keep others waiting. Whatever it sent already is read first:
    /// closing with unread data would reset the connection, and the peer could lose the ERROR.
    private func refuseAtAccept(_ socket: Socket, uid: UInt32, _ state: inout State) {
        let reason = "uid \(uid) is not allowed"
        _ = socket.send(WireMessage.error(WireErrorMessage(.notPermitted, reason)).encoded())
        for _ in 0..<4 {
            guard case .success(.datagram) = socket.receive(maximumSize: WireProtocol.maximumMessageSize) else { break }
        }
        socket.shutdown()
        let now = ProcessInfoShim.monotonicNanoseconds()
        if let line = state.logLimiter.admit(key: "refused-uid", message: reason, now: now, interval: 10_000_000_000) {
            configuration.logger.warning("\(line)")
        }
    }

    private func readPending(_ id: ConnectionID, _ socket: Socket, _ state: inout State) {
        for _ in 0..<Self.readsPerTurn {
            guard state.sockets[id] != nil else { return }
            let result = socket.receive(maximumSize: WireProtocol.maximumMessageSize, maximumDescriptors: 2)
            if case .success(.wouldBlock) = result { return }
            // Version 3: the releases it wrote before this (its GOODBYE, its end of file) come first.
            serviceRing(id, &state)
            guard state.sockets[id] != nil else { return }
            let now = ProcessInfoShim.monotonicNanoseconds()
            switch result {
            case .success(.wouldBlock):
                return
            case .success(.endOfFile):
                perform(state.machine.connectionClosed(id, reason: "end of file", now: now), &state)
                state.sockets.removeValue(forKey: id)?.shutdown()
                state.rings[id] = nil
                return
            case .failure(let errno):
                perform(state.machine.connectionClosed(id, reason: "receive failed: \(errno)", now: now), &state)
                state.sockets.removeValue(forKey: id)?.shutdown()
                state.rings[id] = nil
                return
            case .success(.datagram(let datagram)):
                // Any fds that came with it are closed when `datagram` goes away, except a version-3 HELLO's two,
                // which move into the subscriber's ring channel.
                let (offer, channel) = ringOffer(for: datagram, from: id, &state)
                let actions = state.machine.received(
                    datagram.bytes,
                    descriptorCount: datagram.descriptors.count,
                    isTruncated: datagram.isTruncated,
                    from: id,
                    rings: offer,
                    now: now
                )
                if let channel, state.machine.sessionVersion(of: id) == WireProtocol.ringVersion {
                    state.rings[id] = PublisherRings(channel: channel)
                }
                perform(actions, &state)
            }
        }
    }
}

extension Publisher {
    /// Version 3 (docs/PROTOCOL.md §9): for a version-3 subscriber HELLO with two fds, makes our half (our ring file
    /// and wake-up socket) and checks the subscriber's (its ring file and wake-up socket). `.none` when this is no
    /// such HELLO or our half cannot be made (the subscriber then gets version 2).
    private func ringOffer(
        for datagram: ReceivedDatagram,
        from id: ConnectionID,
        _ state: inout State
    ) -> (Machine.RingOffer, RingChannel?) {
        guard datagram.descriptors.count == 2, !datagram.isTruncated, state.machine.sessionVersion(of: id) == nil,
            case .hello(let hello)? = try? WireMessage.decode(datagram.bytes, descriptorCount: 2),
            hello.version >= WireProtocol.ringVersion, hello.kind == .subscriber
        else { return (.none, nil) }
        let half: RingChannel.Half
        do { half = try RingChannel.Half(role: .announce) } catch {
            configuration.logger.warning("cannot make rings for subscriber \(id), serving version 2: \(error)")
            return (.none, nil)
        }
        guard let ring = datagram.descriptors[0].take(), let wake = datagram.descriptors[1].take() else {
            return (.refused("descriptors missing"), nil)
        }
        do {
            return (.ready, try half.joining(peerRing: ring, peerWake: wake, peerRole: .release))
        } catch {
            return (.refused("\(error)"), nil)
        }
    }

    /// How long after the last publish the loop thread goes back to being woken for every release (§9.5).
    static let lazyReapingPeriod: UInt64 = 100_000_000

    /// Before a frame is published: reaps every release ring, and (unless someone waits for a buffer) stops asking
    /// subscribers to wake the loop thread for releases. If a ring was armed, the loop thread is told, so it sleeps
    /// at most until publishing pauses.
    private func reapBeforePublishing(_ state: inout State) {
        state.lastPublishTime = ProcessInfoShim.monotonicNanoseconds()
        if state.buffersWanted == 0 {
            var disarmed = false
            for rings in state.rings.values where rings.disarm() { disarmed = true }
            if disarmed { doorbell.ring() }
        }
        serviceRings(&state)
    }

    /// Reads every version-3 subscriber's release ring (each slot copied once, fed to the machine as a RELEASE would
    /// be), and flushes those whose announce ring had been full.
    private func serviceRings(_ state: inout State, onlyUnarmed: Bool = false) {
        guard !state.rings.isEmpty else { return }
        for id in Array(state.rings.keys) {
            guard let rings = state.rings[id], !(onlyUnarmed && rings.isArmed) else { continue }
            serviceRing(id, rings, &state)
        }
    }

    /// Reads one subscriber's release ring (see ``serviceRings(_:onlyUnarmed:)``). Also called before anything read
    /// from that subscriber's socket is handled, its end of file included: releases are reaped lazily (§9.5), and
    /// those it wrote before a socket message must reach the machine before that message.
    private func serviceRing(_ id: ConnectionID, _ state: inout State) {
        guard let rings = state.rings[id] else { return }
        serviceRing(id, rings, &state)
    }

    private func serviceRing(_ id: ConnectionID, _ rings: PublisherRings, _ state: inout State) {
        let now = ProcessInfoShim.monotonicNanoseconds()
        var actions: [Machine.Action] = []
        let violation = rings.drainReleases(limit: RingLayout.slotCount) { entry in
            actions += state.machine.receivedFromRing(entry, from: id, now: now)
            return state.machine.sessionVersion(of: id) != nil
        }
        perform(actions, &state)
        if let violation, state.rings[id] != nil {
            state.rings[id] = nil
            perform(state.machine.ringViolation(violation, from: id, now: now), &state)
            return
        }
        if rings.isBlockedOnRing, state.rings[id] != nil { flush(id, &state) }
    }
}

extension Duration {
    /// Whole nanoseconds, saturating at `UInt64.max`; negative durations are 0.
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : whole.addingSaturating(UInt64(max(0, attoseconds) / 1_000_000_000))
    }
}
