import Foundation
import Logging
import PixelBuffers
import SampleBuffers
import Surfaces
import Synchronization
import SystemPackage

/// Receives frames from a ``Publisher`` in another process, zero-copy: AVCaptureVideoDataOutput's consumer side.
///
/// Frames arrive as ``SampleBuffer``s whose image buffers map the publisher's memory read-only. A frame is held
/// (its surface pinned in the publisher's pool) until the sample buffer is deallocated or invalidated
/// (`sampleBuffer.invalidate()` is the explicit release).
///
/// ```swift
/// let subscriber = try Subscriber(configuration: .init(path: "/tmp/camera.sock",
///                                                      acceptedFormats: [.yuv420BiPlanarVideoRange8]))
/// for try await frame in subscriber.frames {
///     try frame.imageBuffer!.lock(.readOnly)
///     // ... read the planes ...
///     try frame.imageBuffer!.unlock(.readOnly)
/// }   // each frame is released when the loop drops it
/// ```
///
/// Or set a ``SubscriberDelegate`` with ``setDelegate(_:queue:)`` to be called on a queue you choose.
public final class Subscriber: Sendable {
    /// How frames wait for the consumer.
    public enum Delivery: Hashable, Sendable {
        /// At most one frame waits; a newer one replaces it and the replaced one is dropped with
        /// `frameWasLate` (`alwaysDiscardsLateVideoFrames = true`). The default.
        case latestOnly
        /// Up to `depth` frames (1…64) wait; none is dropped while there is room.
        case queue(depth: Int)

        var wireMode: UInt16 { if case .queue = self { 1 } else { 0 } }
        var depth: Int { if case .queue(let depth) = self { depth } else { 1 } }
    }

    /// Where to connect and what to ask for.
    public struct Configuration: Sendable {
        /// The publisher's socket path.
        public var path: String
        /// Formats this subscriber accepts, in order of preference.
        public var acceptedFormats: [PixelFormat]
        /// Latest-only (default) or a queue.
        public var delivery: Delivery = .latestOnly
        /// How long connecting and the handshake may take.
        public var connectTimeout: Duration = .seconds(5)
        /// After the stream ends, keep trying to reconnect (every ``reconnectInterval``) until cancelled.
        public var reconnects = false
        /// Pause between reconnection attempts.
        public var reconnectInterval: Duration = .milliseconds(100)
        /// Where diagnostics go.
        public var logger: Logger

        /// Creates a configuration.
        public init(
            path: String,
            acceptedFormats: [PixelFormat],
            delivery: Delivery = .latestOnly,
            logger: Logger = Logger(label: "framebus.subscriber")
        ) {
            self.path = path
            self.acceptedFormats = acceptedFormats
            self.delivery = delivery
            self.logger = logger
        }
    }

    /// What the publisher granted.
    public struct Session: Hashable, Sendable {
        /// The format frames arrive in.
        public var format: PixelFormat
        /// The publisher instance; a new value after a restart.
        public var streamID: UInt64
        /// The publisher's number for this subscriber.
        public var subscriberID: UInt64
        /// Frames this subscriber may hold at once before the publisher drops frames for it (`outOfBuffers`).
        public var maximumHeldFrames: Int
    }

    let core: SubscriberCore

    /// Connects, performs the handshake, and starts receiving.
    ///
    /// - Throws: ``FrameBusError/Code-swift.struct/refused`` with the publisher's reason (version, no common
    ///   format, too many subscribers), ``FrameBusError/Code-swift.struct/permissionDenied`` (our uid is not
    ///   allowed), ``FrameBusError/Code-swift.struct/timedOut``, ``FrameBusError/Code-swift.struct/systemCall``
    ///   (for example no publisher at the path), ``FrameBusError/Code-swift.struct/invalidArgument``.
    public init(configuration: Configuration) throws(FrameBusError) {
        guard !configuration.acceptedFormats.isEmpty,
            configuration.acceptedFormats.count <= WireProtocol.maximumFormatCount,
            (1...Int(WireProtocol.maximumQueueDepth)).contains(configuration.delivery.depth)
        else {
            throw FrameBusError(.invalidArgument, "Subscriber.init", message: "1…16 formats and a queue depth of 1…64")
        }
        core = try SubscriberCore(configuration: configuration)
        core.start(owner: self)
    }

    deinit { core.cancel() }

    /// What the publisher granted on the current connection.
    public var session: Session? { core.session }

    /// Sets the delegate and the queue it is called on; frames that already wait are delivered to it.
    public func setDelegate(_ delegate: (any SubscriberDelegate)?, queue: DispatchQueue) {
        core.setDelegate(delegate, queue: queue, owner: self)
    }

    /// The frames, as an asynchronous sequence (one consumer at a time). It finishes after ``cancel()`` and
    /// throws ``FrameBusError/Code-swift.struct/endOfStream`` (or the error that ended the stream) unless
    /// ``Configuration/reconnects`` is set.
    public var frames: Frames { Frames(core: core) }

    /// Counters: delivered, dropped by reason, held now, waiting now, bytes, latency from publish to delivery.
    public var statistics: FrameStatistics { core.statistics }

    /// Says goodbye, closes the connection and stops receiving. Frames still held are released.
    public func cancel() { core.cancel() }

    /// Whether the current connection is up.
    public var isConnected: Bool { core.isConnected }

    /// The frames of a subscriber as an `AsyncSequence`.
    public struct Frames: AsyncSequence, Sendable {
        public typealias Element = SampleBuffer
        public typealias Failure = FrameBusError
        let core: SubscriberCore

        /// Makes the iterator.
        public func makeAsyncIterator() -> Iterator { Iterator(core: core) }

        /// Waits for the next frame.
        public struct Iterator: AsyncIteratorProtocol {
            public typealias Element = SampleBuffer
            public typealias Failure = FrameBusError
            let core: SubscriberCore

            /// The next frame, `nil` after cancellation.
            public mutating func next() async throws(FrameBusError) -> SampleBuffer? {
                try await core.nextFrame()
            }

            /// The next frame, `nil` after cancellation.
            public mutating func next(
                isolation actor: isolated (any Actor)?
            ) async throws(FrameBusError) -> SampleBuffer? {
                try await core.nextFrame()
            }
        }
    }
}

/// Returns one frame to the publisher, once: on `invalidate()` of its sample buffer or when the sample buffer
/// goes away (the token lives in the sample buffer's handlers).
final class ReleaseToken: Sendable {
    let sequence: UInt64
    let surfaceID: UInt64
    let generation: UInt64
    private let claimed = Atomic<Bool>(false)
    private weak let sender: SubscriberSender?

    init(sequence: UInt64, surfaceID: UInt64, generation: UInt64, sender: SubscriberSender) {
        self.sequence = sequence
        self.surfaceID = surfaceID
        self.generation = generation
        self.sender = sender
        sender.heldCount.add(1, ordering: .relaxed)
    }

    /// Releases now (idempotent).
    func release(notDelivered: Bool = false) {
        guard !claimed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        sender?.heldCount.subtract(1, ordering: .relaxed)
        sender?.sendRelease(self, notDelivered: notDelivered)
    }

    /// Marks the token released without sending (the connection is gone).
    func abandon() {
        guard !claimed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        sender?.heldCount.subtract(1, ordering: .relaxed)
    }

    deinit { release() }
}

/// The sending half of a subscriber: RELEASE and GOODBYE. Separate from the receive state so that a sample buffer
/// deallocated anywhere (even while the receive state is locked) can send its release.
final class SubscriberSender: Sendable {
    private struct State {
        var socket: Socket?
        var generation: UInt64 = 0
        var outbound: [[UInt8]] = []
    }
    private let state = Mutex(State())
    let heldCount = Atomic<Int>(0)
    let doorbell: Doorbell

    init(doorbell: Doorbell) { self.doorbell = doorbell }

    func attach(_ socket: Socket, generation: UInt64) {
        state.withLock {
            $0.socket = socket
            $0.generation = generation
            $0.outbound.removeAll()
        }
    }

    func detach() {
        state.withLock {
            $0.socket = nil
            $0.outbound.removeAll()
        }
    }

    func sendRelease(_ token: ReleaseToken, notDelivered: Bool) {
        let message = WireMessage.release(
            WireRelease(
                sequence: token.sequence,
                surfaceID: token.surfaceID,
                flags: notDelivered ? WireRelease.notDeliveredFlag : 0
            )
        ).encoded()
        send(message, generation: token.generation)
    }

    func send(_ bytes: [UInt8], generation: UInt64? = nil) {
        let needsPoll = state.withLock { state -> Bool in
            guard let socket = state.socket, generation == nil || generation == state.generation else { return false }
            if state.outbound.isEmpty, case .success(.sent) = socket.send(bytes) { return false }
            state.outbound.append(bytes)
            return true
        }
        if needsPoll { doorbell.ring() }
    }

    var hasOutbound: Bool { state.withLock { !$0.outbound.isEmpty } }

    /// Sends what waited for room; returns false if the socket broke.
    func flush() {
        state.withLock { state in
            guard let socket = state.socket else { return }
            var sent = 0
            while sent < state.outbound.count {
                guard case .success(.sent) = socket.send(state.outbound[sent]) else { break }
                sent += 1
            }
            state.outbound.removeFirst(sent)
        }
    }
}

/// The receive state and thread of a ``Subscriber``.
final class SubscriberCore: Sendable {
    enum Event {
        case frame(SampleBuffer, ReleaseToken, publishTime: UInt64, bytesUsed: Int)
        case drop(SampleBuffer)
        case end(FrameBusError)
    }

    struct State {
        var socket: Socket?
        var session: Subscriber.Session?
        var generation: UInt64 = 0
        var surfaces: [UInt64: Surface] = [:]
        var lastSequence: UInt64?
        var lastGeometry: [UInt32]?
        var previousStreamID: UInt64?
        var markNextDiscontinuity: DiscontinuityFlags = []
        var events: [Event] = []
        var delegate: (any SubscriberDelegate)?
        var delegateQueue: DispatchQueue?
        weak var owner: Subscriber?
        var isDelivering = false
        /// Set by a reader thread's dispatch: that reader delivers the waiting events itself, on the delegate's
        /// queue (`sync`), after handing the socket to the other reader thread.
        var deliverInline = false
        /// The slowest recent delegate callback, in ns, decaying by 1/8 per callback; starts high so the first
        /// callbacks hand the socket over.
        var slowestRecentCallback: UInt64 = 10_000_000
        var waiter: CheckedContinuation<Result<SampleBuffer?, FrameBusError>, Never>?
        var isCancelled = false
        var endError: FrameBusError?
        var statistics = FrameStatistics()
        var latency = LatencyRecorder()
    }

    let configuration: Subscriber.Configuration
    let state = Mutex(State())
    let doorbell: Doorbell
    let sender: SubscriberSender
    private let loopDone = DispatchSemaphore(value: 0)
    private let readerLock = NSLock()
    /// Most surfaces a subscriber keeps mapped for one connection (docs/PROTOCOL.md §8).
    static let maximumSurfaces = 256
    /// Callbacks slower than this (recently) make the delivering thread hand the socket to the other reader.
    static let handOffThreshold: UInt64 = 500_000

    init(configuration: Subscriber.Configuration) throws(FrameBusError) {
        self.configuration = configuration
        self.doorbell = try Doorbell()
        self.sender = SubscriberSender(doorbell: doorbell)
        try connect()
    }

    /// Two reader threads take turns (leader/follower): the one holding `readerLock` polls the socket; when a
    /// frame arrives and the delegate is idle, it hands the lock to the other and calls the delegate itself, on
    /// the delegate's queue with `queue.sync` (which runs the block on the calling thread). So a frame reaches
    /// `didOutput` after one wake-up, not two, while the other thread keeps receiving (and replacing late frames)
    /// during a slow callback.
    func start(owner: Subscriber) {
        state.withLock { $0.owner = owner }
        for index in 0..<2 {
            let thread = Thread { [self] in
                self.runLoop()
                self.loopDone.signal()
            }
            thread.name = "framebus.subscriber"
            thread.stackSize = 1 << 20
            _ = index
            thread.start()
        }
    }

    var session: Subscriber.Session? { state.withLock { $0.session } }
    var isConnected: Bool { state.withLock { $0.socket != nil } }

    var statistics: FrameStatistics {
        let held = sender.heldCount.load(ordering: .relaxed)
        return state.withLock { state in
            var statistics = state.statistics
            statistics.heldNow = held
            statistics.queueDepth = state.events.filter { if case .frame = $0 { true } else { false } }.count
            statistics.latency = state.latency.summary
            return statistics
        }
    }

    // MARK: Connecting

    private static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    /// Connects and performs the handshake; on success the new connection is current.
    func connect() throws(FrameBusError) {
        let operation = "Subscriber.connect"
        let timeout = Self.nanoseconds(configuration.connectTimeout)
        let deadline = ProcessInfoShim.monotonicNanoseconds() + timeout
        let socket = try Socket.connect(path: configuration.path, timeoutNanoseconds: timeout).get()
        let hello = WireMessage.hello(
            WireHello(
                version: 1,
                deliveryMode: configuration.delivery.wireMode,
                queueDepth: UInt16(configuration.delivery.depth),
                formats: configuration.acceptedFormats.map(\.fourCC)
            )
        )
        // A refused peer may find the socket already closed; the ERROR is still there to read.
        _ = socket.send(hello.encoded())
        while true {
            let now = ProcessInfoShim.monotonicNanoseconds()
            guard now < deadline else { throw FrameBusError(.timedOut, operation, message: "no WELCOME") }
            let wait = Int32(min(1000, (deadline - now) / 1_000_000 + 1))
            _ = socket.waitReadable(timeoutMilliseconds: wait)
            switch socket.receive(maximumSize: WireProtocol.maximumMessageSize) {
            case .success(.wouldBlock):
                continue
            case .success(.endOfFile):
                throw FrameBusError(.endOfStream, operation, message: "publisher closed the connection")
            case .failure(let errno):
                throw FrameBusError(.systemCall, operation, errno: errno)
            case .success(.datagram(let datagram)):
                guard !datagram.isTruncated else {
                    throw FrameBusError(.protocolViolation, operation, message: "truncated handshake reply")
                }
                let message: WireMessage
                do {
                    message = try WireMessage.decode(datagram.bytes, descriptorCount: datagram.descriptors.count)
                } catch { throw error.busError(operation) }
                switch message {
                case .welcome(let welcome):
                    guard let format = try? PixelFormat(fourCC: welcome.format),
                        configuration.acceptedFormats.contains(format)
                    else {
                        throw FrameBusError(
                            .protocolViolation,
                            operation,
                            message: "granted a format we did not ask for"
                        )
                    }
                    install(socket, welcome: welcome, format: format)
                    return
                case .error(let error):
                    let code: FrameBusError.Code =
                        error.code == WireErrorCode.notPermitted.rawValue ? .permissionDenied : .refused
                    throw FrameBusError(code, operation, message: error.reason)
                default:
                    throw FrameBusError(.protocolViolation, operation, message: "expected WELCOME, got \(message.type)")
                }
            }
        }
    }

    private func install(_ socket: Socket, welcome: WireWelcome, format: PixelFormat) {
        let generation = state.withLock { state -> UInt64 in
            state.generation += 1
            state.socket = socket
            state.session = Subscriber.Session(
                format: format,
                streamID: welcome.streamID,
                subscriberID: welcome.subscriberID,
                maximumHeldFrames: Int(welcome.maximumHeldFrames)
            )
            state.surfaces.removeAll()
            state.lastSequence = nil
            state.endError = nil
            if let previous = state.previousStreamID {
                state.markNextDiscontinuity.insert(previous == welcome.streamID ? .unknown : .streamDiscontinuity)
            }
            state.previousStreamID = welcome.streamID
            return state.generation
        }
        sender.attach(socket, generation: generation)
    }

    // MARK: Delegate and async delivery

    func setDelegate(_ delegate: (any SubscriberDelegate)?, queue: DispatchQueue, owner: Subscriber) {
        state.withLock { state in
            state.delegate = delegate
            state.delegateQueue = queue
            scheduleDelegate(&state)
        }
    }

    /// Starts a delivery pass on the delegate's queue if there is something to deliver and none is running: inline
    /// on a reader thread (see ``start(owner:)``), else asynchronously.
    private func scheduleDelegate(_ state: inout State, fromReader: Bool = false) {
        guard let queue = state.delegateQueue, state.delegate != nil, !state.isDelivering, !state.events.isEmpty
        else { return }
        state.isDelivering = true
        if fromReader {
            state.deliverInline = true
        } else {
            queue.async { [self] in deliverToDelegate() }
        }
    }

    private func deliverToDelegate() {
        while true {
            let next: (Event, any SubscriberDelegate, Subscriber)? = state.withLock { state in
                guard let delegate = state.delegate, let owner = state.owner, !state.events.isEmpty else {
                    state.isDelivering = false
                    return nil
                }
                let event = state.events.removeFirst()
                if case .frame(_, _, let publishTime, let bytesUsed) = event {
                    recordDelivery(&state, publishTime: publishTime, bytesUsed: bytesUsed)
                }
                return (event, delegate, owner)
            }
            guard let (event, delegate, owner) = next else { return }
            let start = ProcessInfoShim.monotonicNanoseconds()
            switch event {
            case .frame(let sample, _, _, _): delegate.subscriber(owner, didOutput: sample)
            case .drop(let marker): delegate.subscriber(owner, didDrop: marker)
            case .end(let error): delegate.subscriber(owner, didEndWith: error)
            }
            let duration = ProcessInfoShim.monotonicNanoseconds() &- start
            state.withLock {
                $0.slowestRecentCallback = max(duration, $0.slowestRecentCallback - $0.slowestRecentCallback / 8)
            }
        }
    }

    private func recordDelivery(_ state: inout State, publishTime: UInt64, bytesUsed: Int) {
        let now = ProcessInfoShim.monotonicNanoseconds()
        state.latency.record(nanoseconds: now &- publishTime)
        state.statistics.delivered += 1
        state.statistics.bytesDelivered += bytesUsed
    }

    /// Takes the first waiting frame for the async sequence, dropping drop/end events (they are counted).
    private func takeFrame(_ state: inout State) -> SampleBuffer? {
        while !state.events.isEmpty {
            let event = state.events.removeFirst()
            if case .frame(let sample, _, let publishTime, let bytesUsed) = event {
                recordDelivery(&state, publishTime: publishTime, bytesUsed: bytesUsed)
                return sample
            }
        }
        return nil
    }

    func nextFrame() async throws(FrameBusError) -> SampleBuffer? {
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation {
                (continuation: CheckedContinuation<Result<SampleBuffer?, FrameBusError>, Never>) in
                let immediate: Result<SampleBuffer?, FrameBusError>? = state.withLock { state in
                    if state.delegate == nil, let sample = takeFrame(&state) { return .success(sample) }
                    if state.isCancelled { return .success(nil) }
                    if let error = state.endError, !configuration.reconnects { return .failure(error) }
                    if let previous = state.waiter {
                        previous.resume(returning: .success(nil))
                    }
                    state.waiter = continuation
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: .success(nil))
        }
        return try result.get()
    }

    /// Hands waiting events to whoever consumes them (delegate or async waiter).
    private func dispatch(_ state: inout State) {
        if state.delegate != nil {
            scheduleDelegate(&state, fromReader: true)
        } else if let waiter = state.waiter {
            if let sample = takeFrame(&state) {
                state.waiter = nil
                waiter.resume(returning: .success(sample))
            } else if let error = state.endError, !configuration.reconnects {
                state.waiter = nil
                waiter.resume(returning: .failure(error))
            }
        }
    }

    // MARK: Receiving

    private func runLoop() {
        while true {
            readerLock.lock()
            let next = readerTurn()
            guard next == .deliver else {
                readerLock.unlock()
                return
            }
            // Hand the socket over only when callbacks have lately been slow: waking the other thread costs tens
            // of microseconds here, while a fast callback delays the next read by less than a frame interval
            // (and a datagram that waits meanwhile is still replaced by a newer one, as latest-only requires).
            let (queue, handOff) = state.withLock {
                ($0.delegateQueue, $0.slowestRecentCallback > Self.handOffThreshold)
            }
            if handOff { readerLock.unlock() }
            if let queue {
                queue.sync { deliverToDelegate() }
            } else {
                state.withLock { $0.isDelivering = false }
            }
            if !handOff { readerLock.unlock() }
        }
    }

    private enum TurnEnd { case stop, deliver }

    /// Receives until cancelled or until this thread should deliver inline (it then gives up the socket).
    private func readerTurn() -> TurnEnd {
        let logger = configuration.logger
        while true {
            let (cancelled, socket) = state.withLock { ($0.isCancelled, $0.socket) }
            if cancelled { return .stop }
            guard let socket else {
                guard configuration.reconnects else { return .stop }
                let interval = Self.nanoseconds(configuration.reconnectInterval)
                _ = Syscall.poll([(doorbell.descriptor, PollEvents.readable)], timeout: Int32(interval / 1_000_000))
                doorbell.drain()
                if state.withLock({ $0.isCancelled }) { return .stop }
                do { try connect() } catch {
                    logger.debug("reconnect to \(configuration.path) failed: \(error)")
                }
                continue
            }
            let writable = sender.hasOutbound ? PollEvents.writable : 0
            let ready: [Int16]
            switch Syscall.poll(
                [(doorbell.descriptor, PollEvents.readable), (socket.descriptor, PollEvents.readable | writable)],
                timeout: 1000
            )
            {
            case .success(let events): ready = events
            case .failure(let errno):
                logger.critical("subscriber poll failed: \(errno)")
                endSession(FrameBusError(.systemCall, "poll", errno: errno))
                continue
            }
            if ready[0] != 0 { doorbell.drain() }
            if ready[1] & PollEvents.writable != 0 { sender.flush() }
            if ready[1] & ~PollEvents.writable != 0 { readPending(socket) }
            let inline = state.withLock { state in
                defer { state.deliverInline = false }
                return state.deliverInline
            }
            if inline { return .deliver }
        }
    }

    private func readPending(_ socket: Socket) {
        while true {
            switch socket.receive(maximumSize: WireProtocol.maximumMessageSize) {
            case .success(.wouldBlock):
                return
            case .success(.endOfFile):
                endSession(FrameBusError(.endOfStream, "Subscriber", message: "the publisher closed the connection"))
                return
            case .failure(let errno):
                endSession(FrameBusError(.endOfStream, "Subscriber", errno: errno, message: "receive failed"))
                return
            case .success(.datagram(let datagram)):
                if let error = handle(datagram) {
                    endSession(error)
                    return
                }
                if state.withLock({ $0.deliverInline }) { return }
            }
        }
    }

    /// Handles one datagram; returns the error that ends the session, if any.
    private func handle(_ datagram: ReceivedDatagram) -> FrameBusError? {
        let operation = "Subscriber.receive"
        guard !datagram.isTruncated else {
            return violation(.malformedMessage, "oversized or truncated datagram")
        }
        let message: WireMessage
        do {
            message = try WireMessage.decode(datagram.bytes, descriptorCount: datagram.descriptors.count)
        } catch {
            return violation(.malformedMessage, error.description)
        }
        switch message {
        case .surfaceV1(let announcement):
            return importSurface(announcement, descriptor: datagram.descriptors[0])
        case .retireSurface(let id):
            let known = state.withLock { $0.surfaces.removeValue(forKey: id) != nil }
            return known ? nil : violation(.malformedMessage, "RETIRE_SURFACE of unknown surface \(id)")
        case .frame(let frame):
            return receive(frame)
        case .drop(let drop):
            guard let reason = DroppedFrameReason(rawValue: UInt8(drop.reason)) else {
                return violation(.malformedMessage, "DROP reason \(drop.reason)")
            }
            let count = drop.lastSequence - drop.firstSequence + 1
            var attachments = SampleAttachments()
            attachments[.busSequenceNumber] = .integer(Int64(bitPattern: drop.firstSequence))
            attachments[.busDroppedFrameCount] = .integer(Int64(clamping: count))
            let marker = SampleBuffer(
                droppedFrameReason: reason,
                info: reason == .discontinuity ? .upstreamLoss : nil,
                timing: .invalid,
                attachments: attachments
            )
            state.withLock { state in
                state.statistics.dropped[reason, default: 0] += Int(clamping: count)
                if reason == .discontinuity { state.markNextDiscontinuity.insert(.samplesDropped) }
                state.events.append(.drop(marker))
                dispatch(&state)
            }
            return nil
        case .endOfStream:
            return FrameBusError(.endOfStream, operation, message: "the publisher stopped")
        case .error(let error):
            return FrameBusError(
                .protocolViolation,
                operation,
                message: "publisher error \(error.code): \(error.reason)"
            )
        default:
            return violation(.malformedMessage, "unexpected \(message.type) message")
        }
    }

    /// Tells the publisher why we hang up, logs it, and returns the error for ``endSession(_:)``.
    private func violation(_ code: WireErrorCode, _ reason: String) -> FrameBusError {
        configuration.logger.warning("closing connection to \(configuration.path): \(reason)")
        sender.send(WireMessage.error(WireErrorMessage(code: code.rawValue, reason: reason)).encoded())
        return FrameBusError(
            code == .invalidSurface ? .surfaceRejected : .protocolViolation,
            "Subscriber.receive",
            message: reason
        )
    }

    private func importSurface(_ announcement: WireSurfaceV1, descriptor: OwnedDescriptor) -> FrameBusError? {
        let (session, known, count) = state.withLock {
            ($0.session, $0.surfaces[announcement.surfaceID] != nil, $0.surfaces.count)
        }
        guard let session else { return violation(.malformedMessage, "SURFACE before WELCOME") }
        // A publisher retires surfaces long before this; more is a publisher trying to exhaust our memory map.
        guard count < Self.maximumSurfaces else {
            return violation(.invalidSurface, "more than \(Self.maximumSurfaces) surfaces announced")
        }
        guard !known, announcement.surfaceID != 0 else {
            return violation(.malformedMessage, "SURFACE \(announcement.surfaceID) announced twice")
        }
        guard announcement.pixelFormat == session.format.fourCC else {
            return violation(.invalidSurface, "SURFACE format differs from the granted \(session.format)")
        }
        guard announcement.allocationSize <= UInt64(SurfaceLayout.maximumAllocationSize) else {
            return violation(.invalidSurface, "SURFACE allocation size \(announcement.allocationSize)")
        }
        let layout = SurfaceLayout(
            pixelFormat: announcement.pixelFormat,
            width: Int(announcement.width),
            height: Int(announcement.height),
            planes: announcement.planes.map {
                PlaneLayout(
                    offset: Int(clamping: $0.offset),
                    bytesPerRow: Int($0.bytesPerRow),
                    width: Int($0.width),
                    height: Int($0.height),
                    bytesPerElement: Int($0.bytesPerElement)
                )
            },
            allocationSize: Int(announcement.allocationSize)
        )
        guard let fd = descriptor.take() else { return violation(.invalidSurface, "SURFACE without descriptor") }
        let surface: Surface
        do {
            surface = try Surface.importing(
                SurfaceHandle(id: SurfaceID(rawValue: announcement.surfaceID), layout: layout, descriptor: fd)
            )
        } catch {
            return violation(.invalidSurface, "surface \(announcement.surfaceID) refused: \(error)")
        }
        do {
            _ = try PixelBuffer(surface: surface)
        } catch {
            return violation(.invalidSurface, "surface \(announcement.surfaceID) does not fit its format: \(error)")
        }
        state.withLock { $0.surfaces[announcement.surfaceID] = surface }
        return nil
    }

    private func receive(_ frame: WireFrame) -> FrameBusError? {
        let lookup: (Surface?, UInt64?, UInt64) = state.withLock {
            ($0.surfaces[frame.surfaceID], $0.lastSequence, $0.generation)
        }
        guard let surface = lookup.0 else {
            return violation(.malformedMessage, "FRAME \(frame.sequence) on unknown surface \(frame.surfaceID)")
        }
        if let last = lookup.1, frame.sequence <= last {
            return violation(.malformedMessage, "FRAME sequence \(frame.sequence) after \(last)")
        }
        guard frame.bytesUsed <= UInt64(surface.allocationSize) else {
            return violation(.malformedMessage, "FRAME bytesUsed \(frame.bytesUsed) > \(surface.allocationSize)")
        }
        // From here the frame is held: the token releases it whatever happens.
        let token = ReleaseToken(
            sequence: frame.sequence,
            surfaceID: frame.surfaceID,
            generation: lookup.2,
            sender: sender
        )
        let pixelBuffer: PixelBuffer
        do {
            pixelBuffer = try PixelBuffer(surface: surface, attachments: WireAttachments.decode(frame.attachments))
        } catch {
            token.release()
            return violation(.invalidSurface, "surface \(frame.surfaceID): \(error)")
        }
        let geometry = [surface.layout.pixelFormat, UInt32(surface.layout.width), UInt32(surface.layout.height)]
        var discontinuity: DiscontinuityFlags = state.withLock { state in
            defer {
                state.markNextDiscontinuity = []
                state.lastSequence = frame.sequence
                state.lastGeometry = geometry
            }
            var flags = state.markNextDiscontinuity
            if let last = state.lastGeometry, last != geometry { flags.insert(.formatChange) }
            return flags
        }
        if frame.flags & WireFrame.discontinuityFlag != 0 && discontinuity.isEmpty { discontinuity.insert(.unknown) }
        var attachments = SampleAttachments(discontinuity: discontinuity)
        attachments[.busSequenceNumber] = .integer(Int64(bitPattern: frame.sequence))
        attachments[.busBytesUsed] = .integer(Int64(clamping: frame.bytesUsed))
        attachments[.busPublishTime] = .integer(Int64(bitPattern: frame.publishTime))
        let timing = SampleTimingInfo(
            presentationTimeStamp: Self.mediaTime(frame.presentationTime),
            duration: Self.mediaTime(frame.duration)
        )
        let sample: SampleBuffer
        do {
            sample = try SampleBuffer(
                imageBuffer: pixelBuffer,
                timing: timing,
                attachments: attachments,
                invalidationHandler: { _ in token.release() },
                dataIsReady: true,
                makeDataReadyHandler: { _ throws(SampleBufferError) in _ = token }
            )
        } catch {
            token.release()
            return violation(.invalidSurface, "sample buffer: \(error)")
        }
        state.withLock { state in
            let depth = configuration.delivery.depth
            var waiting = state.events.indices.filter { if case .frame = state.events[$0] { true } else { false } }
            while waiting.count >= depth, let oldest = waiting.first {
                // Replace the oldest waiting frame with its drop marker, in place, and return it unseen.
                guard case .frame(let replaced, let replacedToken, _, _) = state.events[oldest] else { break }
                var markerAttachments = SampleAttachments()
                markerAttachments[.busSequenceNumber] = replaced.attachments[.busSequenceNumber]
                state.events[oldest] = .drop(
                    SampleBuffer(
                        droppedFrameReason: .frameWasLate,
                        timing: replaced.timing,
                        attachments: markerAttachments
                    )
                )
                state.statistics.dropped[.frameWasLate, default: 0] += 1
                replacedToken.release(notDelivered: true)
                waiting.removeFirst()
            }
            state.events.append(.frame(sample, token, publishTime: frame.publishTime, bytesUsed: Int(frame.bytesUsed)))
            dispatch(&state)
        }
        return nil
    }

    static func mediaTime(_ time: WireTime) -> MediaTime {
        let flags = MediaTime.Flags(rawValue: time.flags).intersection(.all)
        guard flags.contains(.valid) else { return .invalid }
        return MediaTime(value: time.value, timescale: time.timescale, flags: flags)
    }

    /// Ends the current connection: frames that wait are dropped unseen, surfaces are forgotten (held frames keep
    /// theirs mapped), and consumers are told.
    private func endSession(_ error: FrameBusError) {
        sender.detach()
        let abandoned: [ReleaseToken] = state.withLock { state in
            state.socket?.shutdown()
            state.socket = nil
            state.surfaces.removeAll()
            state.endError = error
            var tokens: [ReleaseToken] = []
            state.events.removeAll { event in
                if case .frame(_, let token, _, _) = event {
                    tokens.append(token)
                    return true
                }
                return false
            }
            if !state.isCancelled {
                state.events.append(.end(error))
                dispatch(&state)
            }
            return tokens
        }
        for token in abandoned { token.abandon() }
        if error.code != .endOfStream {
            configuration.logger.warning("subscription to \(configuration.path) ended: \(error)")
        }
    }

    func cancel() {
        let (socket, waiter) = state.withLock {
            state -> (Socket?, CheckedContinuation<Result<SampleBuffer?, FrameBusError>, Never>?) in
            if state.isCancelled { return (nil, nil) }
            state.isCancelled = true
            defer { state.waiter = nil }
            return (state.socket, state.waiter)
        }
        waiter?.resume(returning: .success(nil))
        if let socket {
            _ = socket.send(WireMessage.goodbye(reason: 0).encoded())
            socket.shutdown()
        }
        doorbell.ring()
        if Thread.current.name != "framebus.subscriber" {
            _ = loopDone.wait(timeout: .now() + 2)
            _ = loopDone.wait(timeout: .now() + 2)
        }
    }
}
