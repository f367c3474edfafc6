import Logging
import PixelBuffers

extension Publisher {
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
        /// Threads that encode (or decode) each frame for subscribers of another format (1…64). Conversion never runs
        /// on the thread that calls ``Publisher/publish(_:timing:)``: the publisher's conversion worker makes each
        /// converted frame (1: alone), or splits it across this many threads, which the publisher keeps for its
        /// lifetime; a frame it cannot start before the next arrives is shed for those subscribers
        /// (``PublisherCost``). Conversion allocates nothing per frame either way.
        public var conversionThreadCount = 1
        /// How hard the conversion worker's encoder searches when it makes a compressed variant
        /// (``SurfaceCodec/Effort``): ``SurfaceCodec/Effort/fast`` (the default) for a live stream, whose every frame
        /// must encode within its interval; ``SurfaceCodec/Effort/best`` when the compressed subscribers are
        /// recorders and the interval leaves the time (a frame that cannot start in time is shed for them either
        /// way). The surfaces decode the same whatever the effort.
        public var compressionEffort: SurfaceCodec.Effort = .fast
        /// Whether a version-3 subscriber that offers futex wake-ups (docs/PROTOCOL.md §9.8) is woken by a
        /// `FUTEX_WAKE` on its announce ring instead of a datagram. Off: every subscriber gets wake-up datagrams
        /// (§9.5).
        public var usesFutexWakeUps = true
        /// Whether the publisher runs deferred start by itself (the default): deferred subscribers receive frames
        /// once every subscriber that is not deferred has had its first frame (or after ``deferredStartTimeout``
        /// when none is connected). Off: only once the producer calls ``Publisher/runDeferredStartWhenNeeded()``.
        /// Like `AVCaptureSession.automaticallyRunsDeferredStart`.
        public var automaticallyRunsDeferredStart = true
        /// How long a deferred subscriber waits, with automatic deferred start, while no subscriber that is not
        /// deferred has had a frame and none is on its way (a recorder alone is served after this). 0…1 hour.
        public var deferredStartTimeout: Duration = .seconds(1)
        /// Told before and after each deferred start (``Publisher/DeferredStart``), on the publishing thread.
        public var deferredStartHandler: (@Sendable (Publisher.DeferredStart) -> Void)?
        /// The thresholds and hysteresis of ``Publisher/systemPressureState`` (``SystemPressurePolicy``); nil: the
        /// publisher does not measure system pressure (no thread, no PSI trigger), and its state stays nominal.
        public var systemPressurePolicy: SystemPressurePolicy? = SystemPressurePolicy()
        /// Called on the publisher's pressure thread whenever ``Publisher/systemPressureState`` changes (not for the
        /// initial nominal state). It must not block: lower the frame rate, or hand the state to your own queue.
        public var systemPressureHandler: (@Sendable (SystemPressureState) -> Void)?
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
            try check(
                deferredStartTimeout >= .zero && deferredStartTimeout <= .seconds(3600),
                "deferredStartTimeout \(deferredStartTimeout)"
            )
            try systemPressurePolicy?.validate()
        }

        var limits: PublisherStateMachine<PixelBuffer>.Limits {
            var limits = PublisherStateMachine<PixelBuffer>.Limits(
                formats: formats.map(\.fourCC),
                allowedUserIDs: allowedUserIDs
            )
            limits.maximumSubscribers = maximumSubscribers
            limits.maximumMonitors = maximumMonitors
            limits.maximumPendingHandshakes = maximumPendingHandshakes
            limits.reaping.handshakeTimeout = handshakeTimeout.nanoseconds
            limits.slowSubscribers.maximumQueuedMessages = maximumQueuedMessages
            limits.monitorInterval = monitorInterval.nanoseconds
            limits.slowSubscribers.dropFlushInterval = dropFlushInterval.nanoseconds
            limits.reaping.closeGracePeriod = closeGracePeriod.nanoseconds
            limits.extraHeldFramesPerSubscriber = extraHeldFramesPerSubscriber
            limits.producerReserve = producerReserve
            limits.maximumAnnouncedSurfaces = maximumAnnouncedSurfaces
            limits.heldFrameBudget = heldFrameBudget
            limits.minimumHeldFrames = holdingPolicy.minimumHeldFrames
            limits.conversionBufferLimit = conversionBufferLimit
            limits.automaticallyRunsDeferredStart = automaticallyRunsDeferredStart
            limits.deferredStartTimeout = deferredStartTimeout.nanoseconds
            return limits
        }
    }
}
