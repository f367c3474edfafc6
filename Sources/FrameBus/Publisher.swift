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
/// descriptor once, then a small fixed-size descriptor per frame (docs/PROTOCOL.md). The publisher keeps a
/// reference to every buffer a subscriber holds, so a pool buffer returns to its pool only when no subscriber
/// holds it; when a subscriber goes away (even by `kill -9`), everything it held is released at once.
///
/// ```swift
/// let pool = try PixelBufferPool(attributes: .init(width: 1920, height: 1080,
///                                                  pixelFormat: .yuv420BiPlanarVideoRange8, allocationThreshold: 8))
/// let publisher = try Publisher(configuration: .init(path: "/tmp/camera.sock",
///                                                    formats: [.yuv420BiPlanarVideoRange8]))
/// let buffer = try publisher.makePixelBuffer(from: pool)   // throws .outOfBuffers when frames pin the pool
/// // ... fill buffer ...
/// try publisher.publish(buffer, timing: SampleTimingInfo(presentationTimeStamp: HostClock.now))
/// ```
///
/// `publish` sends on the caller's thread; a dedicated thread accepts subscribers and reads their releases.
public final class Publisher: Sendable {
    /// How a publisher listens and what it allows.
    public struct Configuration: Sendable {
        /// The socket path.
        public var path: String
        /// The formats offered to subscribers. Each frame is published in one format; a subscriber granted the
        /// compressed variant of it (or the base of a compressed frame) gets a converted copy, made once per frame
        /// and shared by every subscriber that wants it.
        public var formats: [PixelFormat]
        /// Mode of the socket file (default `0o600`).
        public var socketMode: UInt32 = 0o600
        /// User ids allowed to subscribe (`SO_PEERCRED`); default: only our own.
        public var allowedUserIDs: Set<UInt32>
        /// Most subscribers at once.
        public var maximumSubscribers = 16
        /// Frames a subscriber may hold beyond its queue depth (what a slow consumer can pin).
        public var extraHeldFramesPerSubscriber = 4
        /// Most surfaces announced to one subscriber before the oldest idle one is retired.
        public var maximumAnnouncedSurfaces = 64
        /// A connection that sends no HELLO within this time is closed.
        public var handshakeTimeout: Duration = .seconds(5)
        /// Most converted (compressed or decompressed) buffers alive at once.
        public var conversionBufferLimit = 16
        /// Where diagnostics go (closed connections and their reasons).
        public var logger: Logger

        /// Creates a configuration.
        public init(path: String, formats: [PixelFormat], logger: Logger = Logger(label: "framebus.publisher")) {
            self.path = path
            self.formats = formats
            self.allowedUserIDs = [ProcessInfoShim.userID]
            self.logger = logger
        }
    }

    private struct State {
        var connections: [UInt64: PublisherConnection] = [:]
        var nextConnectionID: UInt64 = 1
        var nextSequence: UInt64 = 0
        var isStopped = false
        var lastGeometry: [UInt32]? = nil
        var pendingDiscontinuity = true
        var statistics = PublisherStatistics()
        var departed = FrameStatistics()
        var holdTimes = LatencyRecorder()
        var conversionPools: [PixelFormat: PixelBufferPool] = [:]
    }

    /// The configuration it was made with.
    public let configuration: Configuration
    /// Random per publisher instance; subscribers see a new one after a restart.
    public let streamID: UInt64
    private let listener: Socket
    private let doorbell: Doorbell
    private let state: Mutex<State>
    private let publishing = Mutex<Void>(())
    private let loopDone = DispatchSemaphore(value: 0)

    /// Starts listening at `configuration.path`, replacing a stale socket file.
    ///
    /// - Throws: ``FrameBusError/Code-swift.struct/addressInUse`` if a live publisher listens there,
    ///   ``FrameBusError/Code-swift.struct/invalidArgument`` for no formats or a path too long,
    ///   ``FrameBusError/Code-swift.struct/systemCall``.
    public init(configuration: Configuration) throws(FrameBusError) {
        guard !configuration.formats.isEmpty, configuration.maximumSubscribers > 0 else {
            throw FrameBusError(.invalidArgument, "Publisher.init", message: "no formats or no subscribers allowed")
        }
        self.configuration = configuration
        self.streamID = UInt64.random(in: 1...UInt64.max)
        self.listener = try Socket.listen(path: configuration.path, mode: configuration.socketMode).get()
        self.doorbell = try Doorbell()
        self.state = Mutex(State())
        // The thread holds the publisher only during one poll (at most a second), so dropping the last
        // reference stops it (deinit sends END_OF_STREAM).
        let done = loopDone
        let thread = Thread { [weak self] in
            while let publisher = self, publisher.runOnce() {}
            done.signal()
        }
        thread.name = "framebus.publisher"
        thread.start()
    }

    deinit {
        stopLocked()
    }

    // MARK: Publishing

    /// Takes a buffer from `pool` for the next frame.
    ///
    /// When the pool is exhausted because subscribers hold its buffers, the frame is dropped: its sequence number
    /// is used, every subscriber gets a DROP with `outOfBuffers`, the drop is counted, and this throws.
    ///
    /// - Throws: ``FrameBusError/Code-swift.struct/outOfBuffers``; ``FrameBusError/Code-swift.struct/resourceFailure``
    ///   if the pool cannot make a surface.
    public func makePixelBuffer(from pool: PixelBufferPool) throws(FrameBusError) -> PixelBuffer {
        do {
            return try pool.makePixelBuffer()
        } catch  where error.code == .wouldExceedAllocationThreshold {
            reportDroppedFrames(reason: .outOfBuffers)
            throw FrameBusError(.outOfBuffers, "Publisher.makePixelBuffer", message: error.description)
        } catch {
            throw FrameBusError(.resourceFailure, "Publisher.makePixelBuffer", message: error.description)
        }
    }

    /// Records that `count` frames were lost before they could be published, and tells every subscriber.
    ///
    /// Uses `count` sequence numbers. For `.discontinuity` (upstream loss) the next published frame also carries
    /// the discontinuity flag.
    ///
    /// - Returns: the sequence numbers used.
    @discardableResult
    public func reportDroppedFrames(reason: DroppedFrameReason, count: Int = 1) -> ClosedRange<UInt64> {
        let count = UInt64(max(1, count))
        return publishing.withLock { _ in
            state.withLock { state in
                let first = state.nextSequence
                state.nextSequence += count
                let range = first...(first + count - 1)
                state.statistics.published += Int(count)
                state.statistics.droppedAtSource[reason, default: 0] += Int(count)
                if reason == .discontinuity { state.pendingDiscontinuity = true }
                let drop = WireMessage.drop(
                    WireDrop(
                        firstSequence: range.lowerBound,
                        lastSequence: range.upperBound,
                        reason: UInt32(reason.rawValue)
                    )
                )
                for connection in state.connections.values where connection.phase == .active {
                    connection.statistics.dropped[reason, default: 0] += Int(count)
                    connection.enqueue(drop)
                    flushOrClose(connection, &state)
                }
                return range
            }
        }
    }

    /// A representation of one frame in one format, shared by every subscriber that receives that format.
    private struct Representation {
        let buffer: PixelBuffer
        let bytesUsed: Int
    }

    /// Publishes a frame to every subscriber.
    ///
    /// Subscribers that hold their maximum number of frames get a DROP with `outOfBuffers` instead. The buffer
    /// stays referenced until every subscriber that received it has released it; do not write into it after
    /// publishing (take a new one from the pool for the next frame).
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
        let publishTime = ProcessInfoShim.monotonicNanoseconds()
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
            // 1. A sequence number, the discontinuity flag, and which representations someone needs.
            let geometry = [buffer.surface.layout.pixelFormat, UInt32(buffer.width), UInt32(buffer.height)]
            let prepared: (UInt64, Bool, [PixelFormat])? = state.withLock { state in
                guard !state.isStopped else { return nil }
                let sequence = state.nextSequence
                state.nextSequence += 1
                state.statistics.published += 1
                var flag = discontinuity || state.pendingDiscontinuity
                if let last = state.lastGeometry, last != geometry { flag = true }
                state.lastGeometry = geometry
                state.pendingDiscontinuity = false
                // The published format first, so its subscribers do not wait for any conversion.
                var needed: [PixelFormat] = []
                for connection in state.connections.values where connection.phase == .active {
                    if let format = connection.format, !needed.contains(format) {
                        if format == source { needed.insert(format, at: 0) } else { needed.append(format) }
                    }
                }
                return (sequence, flag, needed)
            }
            guard let (sequence, isDiscontinuity, needed) = prepared else {
                throw FrameBusError(.closed, "Publisher.publish")
            }

            // 2. Fan out each needed representation as soon as it exists: the frame as published first, then
            // each conversion (made once, outside the state lock, since encoding takes milliseconds, and shared by
            // every subscriber of that format).
            let frameBase = WireFrame(
                sequence: sequence,
                surfaceID: 0,
                presentationTime: Self.wireTime(timing.presentationTimeStamp),
                duration: Self.wireTime(timing.duration),
                publishTime: publishTime,
                bytesUsed: 0,
                flags: isDiscontinuity ? WireFrame.discontinuityFlag : 0,
                attachments: WireAttachments.encode(buffer.attachments).tuple
            )
            for format in needed {
                let representation: Representation?
                if format == source {
                    representation = Representation(buffer: buffer, bytesUsed: Self.bytesUsed(of: buffer))
                } else {
                    representation = convert(buffer, to: format)
                }
                state.withLock { state in
                    if representation != nil && format != source { state.statistics.conversions += 1 }
                    for connection in state.connections.values
                    where connection.phase == .active && connection.firstSequence <= sequence
                        && connection.format == format
                    {
                        guard let representation else {
                            // The conversion failed (its pool is exhausted): this subscriber loses the frame.
                            dropOutOfBuffers(sequence, for: connection, &state)
                            continue
                        }
                        deliver(representation, frame: frameBase, to: connection, &state)
                    }
                }
            }
            return sequence
        }
    }

    /// Tells one subscriber it will not get frame `sequence` because buffers ran out (DROP `outOfBuffers`).
    private func dropOutOfBuffers(_ sequence: UInt64, for connection: PublisherConnection, _ state: inout State) {
        connection.statistics.dropped[.outOfBuffers, default: 0] += 1
        let reason = UInt32(DroppedFrameReason.outOfBuffers.rawValue)
        connection.enqueue(.drop(WireDrop(firstSequence: sequence, lastSequence: sequence, reason: reason)))
        flushOrClose(connection, &state)
    }

    private func deliver(
        _ representation: Representation,
        frame base: WireFrame,
        to connection: PublisherConnection,
        _ state: inout State
    ) {
        let sequence = base.sequence
        guard connection.held.count < connection.maximumHeldFrames else {
            dropOutOfBuffers(sequence, for: connection, &state)
            return
        }
        let surface = representation.buffer.surface
        let surfaceID = surface.id.rawValue
        if !connection.announced.contains(surfaceID) {
            let descriptor: OwnedDescriptor
            do {
                let handle = try surface.makeHandle()
                descriptor = OwnedDescriptor(handle.takeDescriptor().rawValue)
            } catch {
                configuration.logger.error("cannot export \(surface.id) to subscriber \(connection.id): \(error)")
                dropOutOfBuffers(sequence, for: connection, &state)
                return
            }
            connection.enqueue(
                connection.version == 1 ? .surfaceV1(Self.wireSurfaceV1(surface)) : .surface(Self.wireSurface(surface)),
                descriptor: descriptor
            )
            connection.announced.insert(surfaceID)
            connection.announcedOrder.append(surfaceID)
            retireOldSurfaces(of: connection)
        }
        var frame = base
        frame.surfaceID = surfaceID
        frame.bytesUsed = UInt64(representation.bytesUsed)
        if connection.lastAttachments.map({ $0 != frame.attachments }) ?? true {
            frame.flags |= WireFrame.attachmentsChangedFlag
            connection.lastAttachments = frame.attachments
        }
        connection.enqueue(.frame(frame))
        connection.held[sequence] = PublisherConnection.HeldFrame(
            surfaceID: surfaceID,
            buffer: representation.buffer,
            sentAt: base.publishTime
        )
        connection.statistics.delivered += 1
        connection.statistics.bytesDelivered += representation.bytesUsed
        flushOrClose(connection, &state)
    }

    private func retireOldSurfaces(of connection: PublisherConnection) {
        guard connection.announcedOrder.count > configuration.maximumAnnouncedSurfaces else { return }
        let inUse = Set(connection.held.values.map(\.surfaceID))
        if let index = connection.announcedOrder.firstIndex(where: { !inUse.contains($0) }) {
            let retired = connection.announcedOrder.remove(at: index)
            connection.announced.remove(retired)
            connection.enqueue(.retireSurface(surfaceID: retired))
        }
    }

    /// Encodes or decodes `buffer` into `format` with a buffer from a per-format pool; nil when that fails.
    private func convert(_ buffer: PixelBuffer, to format: PixelFormat) -> Representation? {
        let pool: PixelBufferPool
        do {
            pool = try conversionPool(for: format, width: buffer.width, height: buffer.height)
        } catch {
            configuration.logger.error("no pool for \(format): \(error)")
            return nil
        }
        let destination: PixelBuffer
        do { destination = try pool.makePixelBuffer() } catch {
            configuration.logger.debug("conversion pool for \(format) exhausted: \(error)")
            return nil
        }
        buffer.propagateAttachments(to: destination)
        do {
            if format.isCompressed {
                let statistics = try SurfaceCodec.compress(buffer, into: destination)
                return Representation(buffer: destination, bytesUsed: statistics.compressedByteCount)
            } else {
                try SurfaceCodec.decompress(buffer, into: destination)
                return Representation(buffer: destination, bytesUsed: Self.bytesUsed(of: destination))
            }
        } catch {
            configuration.logger.error("converting \(buffer.pixelFormat) to \(format) failed: \(error)")
            return nil
        }
    }

    private func conversionPool(for format: PixelFormat, width: Int, height: Int) throws -> PixelBufferPool {
        let existing = state.withLock { $0.conversionPools[format] }
        if let existing, existing.attributes.width == width, existing.attributes.height == height { return existing }
        let limit = configuration.conversionBufferLimit
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

    static func wireSurface(_ surface: Surface) -> WireSurface {
        let layout = surface.layout
        return WireSurface(
            surfaceID: surface.id.rawValue,
            pixelFormat: layout.pixelFormat,
            width: UInt32(layout.width),
            height: UInt32(layout.height),
            descriptorByteCounts: [UInt64(layout.allocationSize)],
            planes: layout.planes.map {
                WireSurfacePlane(
                    offset: UInt64($0.offset),
                    bytesPerRow: UInt32($0.bytesPerRow),
                    width: UInt32($0.width),
                    height: UInt32($0.height),
                    bytesPerElement: UInt32($0.bytesPerElement)
                )
            }
        )
    }

    static func wireSurfaceV1(_ surface: Surface) -> WireSurfaceV1 {
        let layout = surface.layout
        return WireSurfaceV1(
            surfaceID: surface.id.rawValue,
            allocationSize: UInt64(layout.allocationSize),
            pixelFormat: layout.pixelFormat,
            width: UInt32(layout.width),
            height: UInt32(layout.height),
            planes: layout.planes.map {
                WirePlane(
                    offset: UInt64($0.offset),
                    bytesPerRow: UInt32($0.bytesPerRow),
                    width: UInt32($0.width),
                    height: UInt32($0.height),
                    bytesPerElement: UInt32($0.bytesPerElement)
                )
            }
        )
    }

    // MARK: Statistics and lifetime

    /// A snapshot of the counters.
    public var statistics: PublisherStatistics {
        state.withLock { state in
            var statistics = state.statistics
            var total = state.departed
            for connection in state.connections.values.sorted(by: { $0.id < $1.id }) {
                let record = connection.snapshot
                statistics.subscribers.append(record)
                total.delivered += record.statistics.delivered
                total.bytesDelivered += record.statistics.bytesDelivered
                total.heldNow += record.statistics.heldNow
                total.queueDepth += record.statistics.queueDepth
                for (reason, count) in record.statistics.dropped { total.dropped[reason, default: 0] += count }
            }
            total.latency = state.holdTimes.summary
            statistics.total = total
            return statistics
        }
    }

    /// How many subscribers have completed their handshake.
    public var subscriberCount: Int {
        state.withLock { $0.connections.values.filter { $0.phase == .active }.count }
    }

    /// Frames held by subscribers now.
    public var heldFrameCount: Int {
        state.withLock { $0.connections.values.reduce(0) { $0 + $1.held.count } }
    }

    /// Sends END_OF_STREAM to every subscriber, closes them, stops listening and removes the socket file.
    /// Idempotent.
    public func stop() {
        stopLocked()
        _ = loopDone.wait(timeout: .now() + 2)
    }

    private func stopLocked() {
        let wasRunning = state.withLock { state -> Bool in
            guard !state.isStopped else { return false }
            state.isStopped = true
            let last = state.nextSequence == 0 ? UInt64.max : state.nextSequence - 1
            for connection in state.connections.values {
                if connection.phase == .active {
                    connection.enqueue(.endOfStream(WireEndOfStream(lastSequence: last, reason: 0)))
                } else {
                    connection.enqueue(
                        .error(
                            WireErrorMessage(
                                code: WireErrorCode.shuttingDown.rawValue,
                                reason: "publisher shutting down"
                            )
                        )
                    )
                }
                _ = connection.flush()
                connection.socket.shutdown()
                retire(connection, &state)
            }
            state.connections.removeAll()
            return true
        }
        if wasRunning {
            _ = Syscall.unlink(configuration.path)
            doorbell.ring()
        }
    }

    // MARK: The event loop

    /// One turn of the event loop; false when the publisher stopped.
    private func runOnce() -> Bool {
        let logger = configuration.logger
        do {
            // One lock for the whole poll set: which sockets, and which of them wait for room to write.
            var interests: [(descriptor: Int32, events: Int16)] = [
                (doorbell.descriptor, PollEvents.readable), (listener.descriptor, PollEvents.readable),
            ]
            let (stopped, connections, handshaking) = state.withLock { state in
                var connections: [PublisherConnection] = []
                var handshaking = false
                connections.reserveCapacity(state.connections.count)
                for connection in state.connections.values {
                    connections.append(connection)
                    handshaking = handshaking || connection.phase == .awaitingHello
                    let wantsWrite = !connection.outbound.isEmpty
                    interests.append(
                        (connection.socket.descriptor, PollEvents.readable | (wantsWrite ? PollEvents.writable : 0))
                    )
                }
                return (state.isStopped, connections, handshaking)
            }
            if stopped { return false }
            let timeout: Int32 = handshaking ? 100 : 1000
            let ready: [Int16]
            switch Syscall.poll(interests, timeout: timeout) {
            case .success(let events): ready = events
            case .failure(let errno):
                logger.critical("publisher poll failed: \(errno)")
                return false
            }
            if ready[0] != 0 { doorbell.drain() }
            if ready[1] != 0 { acceptPending() }
            for (index, connection) in connections.enumerated() where ready[index + 2] != 0 {
                if ready[index + 2] & PollEvents.writable != 0 {
                    state.withLock { state in flushOrClose(connection, &state) }
                }
                if ready[index + 2] & ~PollEvents.writable != 0 { readPending(connection) }
            }
            if handshaking { expireHandshakes() }
        }
        return true
    }

    private func expireHandshakes() {
        let now = ProcessInfoShim.monotonicNanoseconds()
        let limit =
            UInt64(configuration.handshakeTimeout.components.seconds) * 1_000_000_000
            + UInt64(configuration.handshakeTimeout.components.attoseconds / 1_000_000_000)
        state.withLock { state in
            for connection in state.connections.values
            where connection.phase == .awaitingHello && now - connection.connectedAt > limit {
                close(connection, code: .malformedMessage, reason: "no HELLO within the handshake timeout", &state)
            }
        }
    }

    private func acceptPending() {
        let logger = configuration.logger
        while true {
            let accepted: Socket?
            switch listener.accept() {
            case .success(let socket): accepted = socket
            case .failure(let errno):
                // EMFILE and friends: log and let the next poll retry.
                logger.error("accept failed: \(errno)")
                return
            }
            guard let socket = accepted else { return }
            guard case .success(let credentials) = socket.peerCredentials() else {
                logger.warning("rejected a subscriber: no peer credentials")
                socket.shutdown()
                continue
            }
            guard configuration.allowedUserIDs.contains(credentials.uid) else {
                logger.warning("refused subscriber pid \(credentials.pid): uid \(credentials.uid) is not allowed")
                _ = socket.send(
                    WireMessage.error(
                        WireErrorMessage(
                            code: WireErrorCode.notPermitted.rawValue,
                            reason: "uid \(credentials.uid) is not allowed"
                        )
                    ).encoded()
                )
                socket.shutdown()
                continue
            }
            state.withLock { state in
                guard !state.isStopped else {
                    socket.shutdown()
                    return
                }
                let id = state.nextConnectionID
                state.nextConnectionID += 1
                state.connections[id] = PublisherConnection(
                    id: id,
                    socket: socket,
                    peerProcessID: credentials.pid,
                    peerUserID: credentials.uid,
                    now: ProcessInfoShim.monotonicNanoseconds()
                )
            }
        }
    }

    private func readPending(_ connection: PublisherConnection) {
        // A connection closed meanwhile was shut down: its receive ends at once, and `handle`/`close` ignore it.
        while true {
            switch connection.socket.receive(maximumSize: WireProtocol.maximumMessageSize) {
            case .success(.wouldBlock):
                return
            case .success(.endOfFile):
                state.withLock { state in close(connection, code: nil, reason: "subscriber disconnected", &state) }
                return
            case .failure(let errno):
                state.withLock { state in close(connection, code: nil, reason: "receive failed: \(errno)", &state) }
                return
            case .success(.datagram(let datagram)):
                state.withLock { state in handle(datagram, from: connection, &state) }
            }
        }
    }

    private func handle(_ datagram: ReceivedDatagram, from connection: PublisherConnection, _ state: inout State) {
        guard state.connections[connection.id] != nil else { return }
        guard !datagram.isTruncated else {
            close(connection, code: .malformedMessage, reason: "oversized or truncated datagram", &state)
            return
        }
        let message: WireMessage
        do {
            message = try WireMessage.decode(datagram.bytes, descriptorCount: datagram.descriptors.count)
        } catch {
            let code: WireErrorCode =
                error.kind == .unsupportedVersion || error.kind == .badMagic ? .unsupportedVersion : .malformedMessage
            close(connection, code: code, reason: error.description, &state)
            return
        }
        switch (connection.phase, message) {
        case (.awaitingHello, .hello(let hello)):
            welcome(connection, hello, &state)
        case (.active, .release(let release)):
            guard let held = connection.held[release.sequence], held.surfaceID == release.surfaceID else {
                close(
                    connection,
                    code: .invalidRequest,
                    reason:
                        "RELEASE of frame \(release.sequence) (surface \(release.surfaceID)), which it does not hold",
                    &state
                )
                return
            }
            connection.held[release.sequence] = nil
            let now = ProcessInfoShim.monotonicNanoseconds()
            connection.holdTimes.record(nanoseconds: now &- held.sentAt)
            state.holdTimes.record(nanoseconds: now &- held.sentAt)
            if release.flags & WireRelease.notDeliveredFlag != 0 {
                connection.statistics.dropped[.frameWasLate, default: 0] += 1
                connection.statistics.delivered -= 1
            }
        case (.active, .goodbye):
            close(connection, code: nil, reason: "goodbye", &state)
        default:
            close(connection, code: .malformedMessage, reason: "unexpected \(message.type) message", &state)
        }
    }

    private func welcome(_ connection: PublisherConnection, _ hello: WireHello, _ state: inout State) {
        let active = state.connections.values.filter { $0.phase == .active }.count
        guard active < configuration.maximumSubscribers else {
            close(
                connection,
                code: .tooManySubscribers,
                reason: "\(configuration.maximumSubscribers) subscribers already connected",
                &state
            )
            return
        }
        guard
            let format = hello.formats.lazy.compactMap({ try? PixelFormat(fourCC: $0) })
                .first(where: configuration.formats.contains)
        else {
            let wanted = hello.formats.map { (try? PixelFormat(fourCC: $0).name) ?? "0x" + String($0, radix: 16) }
            close(
                connection,
                code: .noCommonFormat,
                reason: "no common format: subscriber accepts \(wanted), publisher offers \(configuration.formats)",
                &state
            )
            return
        }
        connection.phase = .active
        connection.version = hello.version
        connection.format = format
        connection.deliveryMode = hello.deliveryMode
        connection.queueDepth = hello.queueDepth
        connection.maximumHeldFrames = Int(hello.queueDepth) + configuration.extraHeldFramesPerSubscriber
        connection.firstSequence = state.nextSequence
        connection.enqueue(
            .welcome(
                WireWelcome(
                    version: hello.version,
                    deliveryMode: hello.deliveryMode,
                    queueDepth: hello.queueDepth,
                    maximumHeldFrames: UInt16(connection.maximumHeldFrames),
                    format: format.fourCC,
                    maximumMessageSize: UInt32(WireProtocol.maximumMessageSize),
                    streamID: streamID,
                    subscriberID: connection.id,
                    nextSequence: state.nextSequence,
                    maximumAnnouncedSurfaces: UInt16(clamping: configuration.maximumAnnouncedSurfaces)
                )
            )
        )
        configuration.logger.debug(
            "subscriber \(connection.id) (pid \(connection.peerProcessID)) gets \(format), \(hello.deliveryMode == 0 ? "latest-only" : "queue \(hello.queueDepth)")"
        )
        flushOrClose(connection, &state)
    }

    /// Most messages queued for one subscriber whose socket buffer is full before it is disconnected.
    static let maximumOutboundMessages = 1024

    private func flushOrClose(_ connection: PublisherConnection, _ state: inout State) {
        guard state.connections[connection.id] != nil else { return }
        if let errno = connection.flush() {
            close(connection, code: nil, reason: "send failed: \(errno)", &state)
        } else if connection.outbound.count > Self.maximumOutboundMessages {
            // Held frames bound the FRAMEs waiting here, but not DROPs: a subscriber that stopped reading would
            // make this queue grow without end.
            close(
                connection,
                code: nil,
                reason: "subscriber stopped reading (\(connection.outbound.count) messages queued)",
                &state
            )
        } else if !connection.outbound.isEmpty {
            doorbell.ring()  // the loop must poll for POLLOUT
        }
    }

    /// Closes one connection: a best-effort ERROR, then shutdown; everything it held is released at once.
    private func close(
        _ connection: PublisherConnection,
        code: WireErrorCode?,
        reason: String,
        _ state: inout State
    ) {
        guard state.connections.removeValue(forKey: connection.id) != nil else { return }
        if let code {
            connection.outbound.removeAll()
            connection.enqueue(.error(WireErrorMessage(code: code.rawValue, reason: reason)))
            _ = connection.flush()
            configuration.logger.warning(
                "closed subscriber \(connection.id) (pid \(connection.peerProcessID)): \(reason)"
            )
        } else {
            configuration.logger.debug(
                "subscriber \(connection.id) (pid \(connection.peerProcessID)) left: \(reason); released \(connection.held.count) frames"
            )
        }
        connection.socket.shutdown()
        retire(connection, &state)
    }

    private func retire(_ connection: PublisherConnection, _ state: inout State) {
        let record = connection.snapshot.statistics
        state.departed.delivered += record.delivered
        state.departed.bytesDelivered += record.bytesDelivered
        for (reason, count) in record.dropped { state.departed.dropped[reason, default: 0] += count }
        connection.held.removeAll()  // the buffers go back to their pools here
        connection.outbound.removeAll()
    }
}
