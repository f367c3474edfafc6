import PixelBuffers
import SampleBuffers
import Surfaces
import SystemPackage

/// The IO layer of a subscriber: its one thread connects, waits, and hands what woke it to the one place that reads
/// the socket and the announce ring in order (``dispatch(_:on:)``), which feeds the ``SubscriberStateMachine`` and
/// carries out the actions it returns (imports, deliveries, replies).
///
/// Everything here belongs to the thread whose turn it is (``ConnectionLeadership``); what consumers see goes through
/// ``SubscriberCore``. The jobs live in files of their own:
/// - this file: the loop (``run()``, a caller's turn) and one turn of a live session, ``service(_:)``: wait, then
///   dispatch, with no protocol logic;
/// - `+Connecting`: connecting, checking who listens, retrying;
/// - `+Waiting`: the two ways to wait (`poll`, or `futex_waitv` in a futex-woken session), chosen by ``WakePolicy``;
/// - `+Inbound`: the socket and the announce ring, merged in the publisher's order (docs/PROTOCOL.md §9.4);
/// - `+Actions`: the state machine's actions, and ending a session;
/// - `+Surfaces` and ``ImportedSurface``: importing a SURFACE, and the committed-memory check of its frames;
/// - `+Frames`: a FRAME made into a sample buffer for the consumer;
/// - ``SchedulerSlice`` and ``RepeatedWarnings``: the thread's scheduler slice, and the log's repeat filter.
final class SubscriberConnection {
    let core: SubscriberCore
    let configuration: Subscriber.Configuration
    var machine: SubscriberStateMachine
    var socket: Socket?
    /// The imported surfaces, with what every frame on them needs, worked out once per SURFACE.
    var surfaces: [UInt64: ImportedSurface] = [:]
    /// The attachments of the last FRAME, decoded: frames usually repeat them, so most frames decode nothing.
    var lastAttachments: (codes: WireAttachmentCodes, decoded: PixelBufferAttachments)?
    var generation: UInt64 = 0
    var handshakeDeadline: UInt64 = 0
    var hasConnected = false
    /// Version 3 (docs/PROTOCOL.md §9): our half, sent with HELLO, until WELCOME completes the channel.
    var ringHalf: RingChannel.Half?
    var rings: SubscriberRings?
    /// What each poll waits on (refilled in place every turn).
    var pollSet = PollSet()
    /// The publisher refused version 3: connect again at once with version 2.
    var retryNow = false
    /// The doorbell's ring count when the connection thread last answered it (futex sleeps, §9.8).
    var lastDoorbellRing: UInt32 = 0
    /// How this session sleeps, and the liveness interval of its next futex sleep.
    var wakePolicy = WakePolicy()
    /// Announce ring messages read in the current ``drainRing()`` (added to the wake-up counts once per batch).
    var ringMessagesRead: UInt64 = 0
    /// The scheduler slice this thread asked for.
    var slice = SchedulerSlice()
    var warnings = RepeatedWarnings()

    /// When the connection thread started, and when it may try to connect next.
    var startTime: UInt64 = 0
    var nextAttempt: UInt64 = 0
    /// While no publisher listens at the path: the path's directory, watched for the publisher's socket to appear
    /// (nil before the first failed attempt, or where inotify is unavailable).
    var directoryWatch: DirectoryWatch?
    /// Whether a watch was tried for this wait (made once; where it fails, the reconnect interval rules).
    var triedDirectoryWatch = false
    /// Attempts left at a short interval after the watch saw the path appear: a publisher that binds the path itself
    /// (a short file name) is there a moment before it listens, and refuses until then.
    var quickRetries = 0
    /// A session ended during a caller's turn: the connection thread decides what follows (``sessionEnded()``).
    var sessionEndedDuringCallerTurn = false
    /// A caller runs the loop (``serviceAsCaller(deadline:)``).
    var isCallerTurn = false
    /// During a caller's turn, how long `service` may wait (monotonic nanoseconds; nil: the usual intervals).
    var callerDeadline: UInt64?

    init(core: SubscriberCore) {
        self.core = core
        self.configuration = core.configuration
        self.machine = SubscriberStateMachine(
            acceptedFormats: core.configuration.acceptedFormats,
            delivery: core.configuration.delivery
        )
        machine.acceptsDMABuf = core.configuration.acceptsDMABuf
        machine.isDeferred = core.configuration.isDeferred
        machine.largestFrame = core.configuration.largestFrame
        machine.receivesStatus = core.configuration.receivesStatus
    }

    var now: UInt64 { ProcessInfoShim.monotonicNanoseconds() }

    /// The connection thread's loop: one pass per turn (``ConnectionLeadership``), so that a waiting caller can run
    /// the loop between passes.
    func run() {
        let leadership = core.leadership
        leadership.attach(self)
        defer { core.connectionThreadFinished() }
        startTime = now
        nextAttempt = startTime
        while true {
            leadership.connectionThreadTurn(isCancelled: { core.isCancelled })
            guard pass() else {
                leadership.finish()
                return
            }
            leadership.endConnectionThreadTurn()
        }
    }

    /// One pass of the connection thread's loop: connects, or services the session once. Returns false when the
    /// thread is done (the subscriber was cancelled, or the stream ended for good).
    private func pass() -> Bool {
        if sessionEndedDuringCallerTurn {
            sessionEndedDuringCallerTurn = false
            guard sessionEnded() else { return false }
        }
        guard !core.isCancelled else {
            if let socket { socket.shutdown() }
            return false
        }
        guard let socket else { return connectOrWait() }
        return service(socket) || sessionEnded()
    }

    /// Runs the loop once on a caller's thread, during its turn (``ConnectionLeadership``): reads and handles what
    /// waits, or sleeps until something comes or `deadline` (monotonic nanoseconds; nil: the usual intervals).
    /// Returns whether the session is still live; when it is not, the connection thread must take the loop back.
    func serviceAsCaller(deadline: UInt64?) -> Bool {
        guard let socket, !sessionEndedDuringCallerTurn else { return false }
        isCallerTurn = true
        callerDeadline = deadline
        defer {
            isCallerTurn = false
            callerDeadline = nil
        }
        if service(socket) { return self.socket != nil }
        sessionEndedDuringCallerTurn = true
        return false
    }

    /// One turn of a live session: waits the way ``WakePolicy`` says, then dispatches what woke it. Returns false
    /// when the connection ended.
    func service(_ socket: Socket) -> Bool {
        // A caller's thread keeps the slice its owner chose.
        if !isCallerTurn { slice.adjust(configuration) }
        let hasOutbound = core.sender.hasOutbound
        let outcome: WaitOutcome
        switch wakePolicy.wait(rings: rings, isAwaitingWelcome: isAwaitingWelcome, hasOutbound: hasOutbound) {
        case .futex(let rings): outcome = waitOnFutex(rings)
        case .poll(let ringCap): outcome = waitOnPoll(socket, hasOutbound: hasOutbound, ringCapMilliseconds: ringCap)
        }
        switch outcome {
        case .woke(let wake): return dispatch(wake, on: socket)
        case .turnEnded(let isLive): return isLive
        }
    }

    var isAwaitingWelcome: Bool {
        if case .awaitingWelcome = machine.state { return true }
        return false
    }

    /// `timeout`, shortened to what is left before a caller's deadline (at least 0).
    func cappedByCallerDeadline(nanoseconds timeout: Int64) -> Int64 {
        guard let callerDeadline else { return timeout }
        let time = now
        return callerDeadline > time ? min(timeout, Int64(clamping: callerDeadline - time)) : 0
    }

    /// Logs a warning, unless it repeats the previous one shortly after (``RepeatedWarnings``).
    func warn(_ text: String) {
        warnings.warn(text, now: now, logger: configuration.logger)
    }
}
