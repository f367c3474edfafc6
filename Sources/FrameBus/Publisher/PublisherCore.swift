import Foundation
import Logging
import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces
import Synchronization
import SystemPackage

/// A publisher's IO layer: the state machine under its lock, the sockets, the rings and the loop thread's work.
///
/// The loop thread holds the core, never the ``Publisher`` (which only forwards to it), so dropping the last user
/// reference stops the core at once instead of after the loop's next turn (a `poll` of up to a second).
///
/// Locks: `state` is held around the machine and non-blocking socket calls only. Log lines and anything that may
/// block (a logger's handler, opening `/proc/self/fd/N` for a surface's read-only descriptor) happen outside it:
/// log lines are collected in `State.deferredLogs` and written by ``withState(_:)`` after unlocking.
final class PublisherCore: Sendable {
    let configuration: Publisher.Configuration
    let streamID: UInt64
    typealias Machine = PublisherStateMachine<PixelBuffer>
    typealias ConnectionID = Machine.ConnectionID

    struct State {
        var machine: Machine
        var sockets: [ConnectionID: Socket] = [:]
        /// Version-3 subscribers' rings (docs/PROTOCOL.md §9).
        var rings: [ConnectionID: PublisherRings] = [:]
        var conversionPools: [PixelFormat: PixelBufferPool] = [:]
        /// What each surface sent so far looks like on the wire (from its handle, made once).
        var surfaceDescriptions: [UInt64: SurfaceDescription] = [:]
        /// Frames' uses of descriptions so far: each use stamps its description (``SurfaceDescription/lastUsed``).
        var descriptionUses: UInt64 = 0
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
        /// The actions of a frame's delivery, kept between frames (empty, its capacity kept) so that delivering a
        /// frame allocates no array for them.
        var deliveryActions: [Machine.Action] = []
        /// Log lines written under the lock, emitted by ``PublisherCore/withState(_:)`` once it is released: a log
        /// handler may block (a full stderr pipe, a slow journald), and must not stall `publish` or the loop.
        var deferredLogs: [(level: Logger.Level, message: String)] = []

        mutating func log(_ level: Logger.Level, _ message: String) {
            deferredLogs.append((level, message))
        }
    }

    /// Runs `body` under the state lock, then writes the log lines it produced and drops the buffers the machine let
    /// go of, after unlocking (docs/ARCHITECTURE.md §2: locks are held around non-blocking system calls only). Every
    /// access to `state` goes through here.
    ///
    /// A buffer whose last reference the machine held (a frame a subscriber released, or held when it left, after the
    /// producer dropped the buffer and its pool went away) runs application code when it goes: its pool's
    /// surface-freed observers (the application's handler, other publishers' observers) or its release handler.
    /// That code may call back into this publisher, so it runs here, never under the lock.
    func withState<Result>(_ body: (inout sending State) -> sending Result) -> sending Result {
        var released: [PixelBuffer] = []
        let result = withState(releasingInto: &released, body)
        released.removeAll()  // the buffers' last references may go here, outside the lock
        return result
    }

    /// ``withState(_:)``, handing the buffers the machine let go of to the caller (appended to `released`) instead
    /// of dropping them: `publish` drops them once it has also left its own lock.
    func withState<Result>(
        releasingInto released: inout [PixelBuffer],
        _ body: (inout sending State) -> sending Result
    ) -> sending Result {
        typealias Lines = [(level: Logger.Level, message: String)]
        let (result, logs, freed) = state.withLock { state -> (Result, Lines, [PixelBuffer]) in
            let result = body(&state)
            let freed = state.machine.takeReleased()
            guard !state.deferredLogs.isEmpty else { return (result, [], freed) }
            var logs: Lines = []
            swap(&logs, &state.deferredLogs)
            return (result, logs, freed)
        }
        for line in logs { configuration.logger.log(level: line.level, "\(line.message)") }
        if released.isEmpty { released = freed } else { released += freed }
        return result
    }

    let listener: Socket
    let doorbell: Doorbell
    let state: Mutex<State>
    /// Serialises `publish` calls, so sequence numbers reach every subscriber in order.
    let publishing = Mutex<Void>(())
    /// Surfaces pools freed, waiting for the loop thread to retire them (one entry per freed surface).
    let freedSurfaces = Mutex<[UInt64]>([])
    /// Pools whose capacity and freed surfaces the publisher follows, by their never-reused id (a pool's address is
    /// reused by the next pool); entries of pools that went away are dropped when a new pool is followed.
    let followedPools = Mutex<[PixelBufferPool.ID: FollowedPool]>([:])

    /// The id of the pool ``follow(_:isProducers:)`` saw last (0: none), so following the producer's pool on every
    /// ``Publisher/makePixelBuffer(from:)`` costs one relaxed load.
    let lastFollowedPool = Atomic<UInt64>(0)

    /// A deferred subscriber may be waiting for its start: `publish` asks the machine before each frame
    /// (``startDeferredSubscribersIfDue()``). Raised by the loop thread, lowered by `publish`.
    let deferredStartPending = Atomic<Bool>(false)

    struct FollowedPool {
        weak var pool: PixelBufferPool?
        var observation: PixelBufferPool.SurfaceFreedObservation?
    }
    /// Encodes and decodes frames for subscribers of another format, reusing its workspace (and threads) for every
    /// frame. Its calls are serialised, as `publish` calls are.
    let codec: SurfaceCodecContext
    /// Makes every representation but the published one, on its own thread (started on first use).
    let conversionWorker = ConversionWorker()
    /// Each window's frame costs (``PublisherCost``).
    let costMeter = Mutex(CostMeter())
    /// Measures system pressure (nil: not configured, or stopped); started by ``startPressureMonitor()``.
    let pressureMonitor = Mutex<SystemPressureMonitor?>(nil)
    /// The last system pressure state (``Publisher/systemPressureState``).
    let systemPressure = Mutex(SystemPressureState.nominal)

    init(configuration: Publisher.Configuration, streamID: UInt64) throws(FrameBusError) {
        self.configuration = configuration
        self.streamID = streamID
        self.listener = try Socket.listen(
            path: configuration.path,
            mode: configuration.socketMode,
            backlog: Int32(min(configuration.maximumPendingHandshakes, 4096))
        ).get()
        self.doorbell = try Doorbell()
        self.codec = SurfaceCodecContext(
            threadCount: configuration.conversionThreadCount,
            effort: configuration.compressionEffort
        )
        self.state = Mutex(State(machine: Machine(limits: configuration.limits, streamID: streamID)))
    }

    /// The work of ``Publisher``'s `stop` (documented there).
    func stop() {
        let (wasRunning, unconverted) = withState { state -> (Bool, [ConversionWorker.Item]) in
            guard !state.machine.isStopped else { return (false, conversionWorker.stop()) }
            let now = ProcessInfoShim.monotonicNanoseconds()
            // Frames the conversion worker still had are shed for their subscribers before END_OF_STREAM, so every
            // sequence number reaches each of them as a FRAME or a DROP (a frame it delivers meanwhile is not shed
            // again: the machine sheds only what it has not sent).
            let unconverted = conversionWorker.stop()
            for item in unconverted {
                switch item {
                case .convert(let job):
                    let sequence = job.template.sequence
                    for format in job.formats {
                        perform(state.machine.shed(sequence...sequence, format: format, now: now).actions, &state)
                    }
                case .shed(let range, let formats):
                    for format in formats {
                        perform(state.machine.shed(range, format: format, now: now).actions, &state)
                    }
                case .drop(let range, let reason, let formats):
                    perform(state.machine.deferredDrop(range, reason: reason, formats: formats, now: now), &state)
                }
            }
            perform(state.machine.stop(now: now), &state)
            for (_, socket) in state.sockets { socket.shutdown() }
            state.sockets.removeAll()
            state.rings.removeAll()
            return (true, unconverted)
        }
        withExtendedLifetime(unconverted) {}  // their buffers go here, unlocked
        pressureMonitor.withLock { monitor in
            monitor?.stop()
            monitor = nil
        }
        if wasRunning {
            unfollowPools()
            _ = Syscall.unlink(configuration.path)
            listener.shutdown()
            doorbell.ring()
        }
    }
}
