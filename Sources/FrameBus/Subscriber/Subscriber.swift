import Dispatch
import Logging
import PixelBuffers
import SampleBuffers
import Surfaces

/// Receives frames from a ``Publisher`` in another process, zero-copy: AVCaptureVideoDataOutput's consumer side.
///
/// Frames arrive as ``SampleBuffer``s whose image buffers map the publisher's memory read-only. A frame is held
/// (its surface pinned in the publisher's pool) for as long as its sample buffer or its image buffer is
/// referenced.
///
/// Creating a subscriber never blocks: it connects (and waits for the publisher to appear, for up to
/// ``Configuration/connectTimeout``, or for as long as it lives with ``Configuration/reconnects``) on its own
/// thread. Everything that happens arrives, in order, on ``events``:
///
/// ```swift
/// let subscriber = try Subscriber(configuration: .init(path: try SocketPath.default(name: "camera"),
///                                                      acceptedFormats: [.yuv420BiPlanarVideoRange8]))
/// for try await event in subscriber.events {
///     switch event {
///     case .frame(let frame): process(frame.imageBuffer!)   // released when the last reference goes
///     case .dropped(let drop): print("missed \(drop.frameCount) frames: \(drop.reason)")
///     case .ended(let error): print("stream ended: \(error)")
///     case .connected, .reconnected: break
///     }
/// }
/// ```
///
/// ``frames`` is the same sequence with only the frames. Or set a ``SubscriberDelegate`` with ``setDelegate(_:)``:
/// called on the subscriber's own thread as each frame is read, the cheapest way to take frames (one thread wake-up
/// per frame); ``setDelegate(_:queue:)`` calls it on a dispatch queue instead, and a loop over ``events`` resumes on
/// Swift's cooperative pool, each a second wake-up per frame (``executor`` removes it for a loop). One consumer at a
/// time: a second concurrent iteration throws
/// ``FrameBusError/Code-swift.struct/concurrentConsumer``.
public final class Subscriber: Sendable {
    /// How frames wait for the consumer.
    public enum Delivery: Hashable, Sendable {
        /// At most one frame waits; a newer one replaces it and the replaced one is dropped with
        /// `frameWasLate` (`alwaysDiscardsLateVideoFrames = true`). The default.
        case latestOnly
        /// Frames wait in arrival order and none is discarded by the subscriber (docs/PROTOCOL.md §7.2): `depth`
        /// (1…64) is what it asks for, ``Session/grantedQueueDepth`` what the publisher granted, and as many frames
        /// as it may hold (``Session/maximumHeldFrames``) may wait; beyond, the publisher drops the newest frames
        /// (`outOfBuffers`), never the waiting ones.
        case queue(depth: Int)

        var wireMode: UInt16 { if case .queue = self { 1 } else { 0 } }
        var depth: Int { if case .queue(let depth) = self { depth } else { 1 } }
        var wireDepth: UInt16 { UInt16(clamping: depth) }
    }

    /// Where to connect and what to ask for.
    public struct Configuration: Sendable {
        /// The publisher's socket path; ``SocketPath/default(name:)`` gives the conventional one.
        public var path: String
        /// Formats this subscriber accepts, in order of preference.
        public var acceptedFormats: [PixelFormat]
        /// Latest-only (default) or a queue.
        public var delivery: Delivery = .latestOnly
        /// How long the first connection waits for a publisher to appear at ``path`` and answer the handshake; the
        /// stream then ends with ``FrameBusError/Code-swift.struct/timedOut``. With ``reconnects`` it waits until
        /// cancelled (this bounds each handshake only).
        public var connectTimeout: Duration = .seconds(5)
        /// After the stream ends, keep trying to reconnect (every ``reconnectInterval``) until cancelled.
        public var reconnects = false
        /// Pause between connection attempts.
        public var reconnectInterval: Duration = .milliseconds(100)
        /// Whether to ask for protocol version 3, where frames are announced and released through shared-memory
        /// rings with wake-up sockets instead of datagrams (docs/PROTOCOL.md §9). A publisher that does not speak
        /// it refuses the HELLO with `unsupportedVersion` and the subscriber connects again with version 2 at once.
        public var usesSharedMemoryRings = true
        /// Whether a version-3 session may wake this subscriber with a futex on the publisher's ring file instead of
        /// a datagram (docs/PROTOCOL.md §9.8): offered in the release ring's header where the kernel has
        /// `futex_waitv` (Linux 5.16+), used if the publisher accepts. Off: wake-up datagrams, as §9.5 describes.
        public var usesFutexWakeUps = true
        /// The scheduler slice the connection thread asks for while frames are consumed on it (a delegate set with
        /// ``Subscriber/setDelegate(_:)``, or ``Subscriber/events`` iterated under
        /// ``Subscriber/executor``); nil: never asked.
        ///
        /// Linux 6.12's scheduler (EEVDF) lets a woken thread that asked for a shorter slice than the running one's
        /// preempt it. The publisher's wake-up usually lands the connection thread on the publisher's own CPU, where
        /// it would otherwise wait until the publisher's thread sleeps: with the short slice the frame is handled
        /// as soon as the wake-up arrives. The thread's share of the CPU does not change, only how soon it runs;
        /// no privilege is needed, and older kernels ignore it. The kernel clamps it to 100 µs…100 ms.
        ///
        /// While frames go on to another thread (a delegate's queue, a poller's consumer, an iteration on Swift's
        /// cooperative pool) the thread keeps the kernel's default: preempting the publisher there only moves the
        /// wait, and measured it made those paths slower (docs/BENCHMARKS.md, "A short scheduler slice").
        public var connectionThreadSlice: Duration? = .microseconds(100)
        /// User ids allowed to be the publisher, checked with `SO_PEERCRED` right after connecting: whoever can
        /// bind the path could otherwise pose as the publisher. Default: only our own user id.
        public var allowedPublisherUserIDs: Set<UInt32> = [ProcessInfoShim.userID]
        /// Whether DMA-BUF surfaces are accepted (the HELLO's `acceptsDMABuf`, docs/PROTOCOL.md §5.1). Turn it off
        /// for a consumer that must see only sealed memfds (a sandboxed one, say): the publisher then sends it no
        /// DMA-BUF frame (DROP `outOfBuffers` instead), and a DMA-BUF SURFACE ends the session.
        public var acceptsDMABuf = true
        /// Whether this subscriber is deferred (the HELLO's `deferred`, docs/PROTOCOL.md §5.1.1): the publisher
        /// connects it at once but sends frames only from its deferred start on, once its subscribers that are not
        /// deferred have their first frame (or its producer calls ``Publisher/runDeferredStartWhenNeeded()``). For
        /// consumers that can start late (a recorder, an analysis, a compressed consumer), so that a preview's first
        /// frame does not wait for them: like `AVCaptureOutput.isDeferredStartEnabled`. A publisher older than the
        /// flag refuses it; the subscriber then connects again at once without it and is served as before.
        public var isDeferred = false
        /// The largest frame accepted (docs/PROTOCOL.md §8.2): a publisher's larger SURFACE ends the subscription
        /// before anything is mapped or decoded (ERROR `frameTooLarge` to the publisher; the stream ends with
        /// ``FrameBusError/Code-swift.struct/surfaceRejected``), so a hostile publisher's small compressed frame
        /// cannot make a decoding consumer fill a huge image. Default ``FrameSizeLimit/default`` (8192 × 8192, at
        /// most 8192 × 4352 pixels); nil accepts any size the protocol allows.
        public var largestFrame: FrameSizeLimit? = .default
        /// Whether to ask the publisher for its status (the HELLO's `wantsStatus`, docs/PROTOCOL.md §5.13): system
        /// pressure, arriving as ``SubscriberEvent/systemPressureChanged(_:)`` and in ``Subscriber/publisherStatus``,
        /// and drops of frames the publisher's encoder skipped as ``DroppedFrameReason/workFellBehind`` (without it,
        /// those are `outOfBuffers`).
        public var receivesStatus = true
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
        /// The session's protocol version: 3 when frames travel through shared-memory rings (docs/PROTOCOL.md §9),
        /// 2 when they travel on the socket (a publisher that does not speak version 3, or
        /// ``Configuration/usesSharedMemoryRings`` off).
        public var protocolVersion: Int = 2
        /// The queue depth the publisher granted (WELCOME's `queueDepth`): 1 for latest-only; for
        /// ``Delivery/queue(depth:)`` at most the depth asked for and at most ``maximumHeldFrames``, so it may be less.
        public var grantedQueueDepth: Int = 1
        /// Whether the publisher wakes this subscriber with a futex (docs/PROTOCOL.md §9.8) rather than a datagram.
        public var usesFutexWakeUps = false
    }

    let core: SubscriberCore

    /// Starts subscribing: returns at once, connecting on the subscriber's own thread.
    ///
    /// Failures to connect (no publisher in time, a refusal, a publisher of a user not allowed) arrive as
    /// ``SubscriberEvent/ended(_:)``, ``SubscriberDelegate/subscriber(_:didEndWith:)``, or as the error
    /// ``frames`` throws.
    ///
    /// - Throws: ``FrameBusError/Code-swift.struct/invalidArgument`` for no formats or more than 16, a queue depth
    ///   outside 1…64, or no allowed publisher user id; ``FrameBusError/Code-swift.struct/systemCall`` if the
    ///   thread's wake-up socket cannot be made.
    public init(configuration: Configuration) throws(FrameBusError) {
        guard !configuration.acceptedFormats.isEmpty,
            configuration.acceptedFormats.count <= WireProtocol.maximumFormatCount,
            (1...Int(WireProtocol.maximumQueueDepth)).contains(configuration.delivery.depth),
            !configuration.allowedPublisherUserIDs.isEmpty
        else {
            throw FrameBusError(
                .invalidArgument,
                "Subscriber.init",
                message: "1…16 formats, a queue depth of 1…64 and at least one allowed publisher uid"
            )
        }
        core = try SubscriberCore(configuration: configuration)
        core.start(owner: self)
    }

    deinit { core.cancel() }

    /// What the publisher granted on the current (or last) connection; `nil` before the first handshake.
    public var session: Session? { core.session }

    /// The publisher's last status: system pressure, frame cost, frame duration, frames shed for us
    /// (docs/PROTOCOL.md §5.13); nil before the first STATUS, from a publisher that sends none, or with
    /// ``Configuration/receivesStatus`` off.
    public var publisherStatus: PublisherStatus? { core.publisherStatus }

    /// Sets the delegate, called on the subscriber's own connection thread as soon as each event is read: the
    /// default way to take frames, and the cheapest (one thread wake-up per frame, like PipeWire's process callback or
    /// a GStreamer streaming thread; README's "Which consumer costs what"). Events that already wait are delivered
    /// to it. The delegate is held weakly. While a delegate is set, ``events`` and ``frames`` throw
    /// ``FrameBusError/Code-swift.struct/concurrentConsumer``; set `nil` to iterate them instead.
    ///
    /// A callback must return quickly and must not wait for anything: while it runs, the subscriber reads nothing
    /// from the publisher, so late frames are not replaced meanwhile, and a callback that blocks for long gets this
    /// subscriber disconnected as too slow. Hand heavy work to another thread (keeping the sample buffer holds the
    /// frame), or use ``setDelegate(_:queue:)``. Calling ``cancel()`` or either `setDelegate` from a callback is fine.
    /// Callbacks never overlap: a delegate set while a callback of the previous one runs gets the following events
    /// after that callback has returned. Once the connection thread has ended, waiting events are delivered on the
    /// thread that calls this method.
    public func setDelegate(_ delegate: (any SubscriberDelegate)?) {
        core.setDelegate(delegate, target: .connectionThread)
    }

    /// Sets the delegate and the queue it is called on (asynchronously; `.main` is fine); events that already wait
    /// are delivered to it. Otherwise as ``setDelegate(_:)``.
    ///
    /// The explicit choice for a delegate that must run on a queue of its own (the UI, work that may block): it costs
    /// a second thread wake-up per frame, the queue's, after the connection thread's (on Linux a `DispatchSource`
    /// would cost the same: libdispatch's event thread waits and then wakes a worker), about twice the subscriber's
    /// CPU per frame and twice the latency of ``setDelegate(_:)`` (README's "Which consumer costs what").
    ///
    /// Callbacks never overlap: a delegate set while a callback of the previous one runs gets the following events
    /// after that callback has returned, each on the queue it was set with.
    public func setDelegate(_ delegate: (any SubscriberDelegate)?, queue: DispatchQueue) {
        core.setDelegate(delegate, target: .queue(queue))
    }

    /// ``setDelegate(_:)``: the delegate is called on the subscriber's connection thread (the name this had before
    /// it became the default).
    @available(*, deprecated, renamed: "setDelegate(_:)", message: "the connection thread is setDelegate(_:)'s default")
    public func setDelegateOnConnectionThread(_ delegate: (any SubscriberDelegate)?) {
        setDelegate(delegate)
    }

    /// Takes events on a thread that is neither a task nor a dispatch queue (the C interface's
    /// `fb_subscriber_next_event`): ``Poller/next()`` takes the next waiting event without waiting, and `wake` is
    /// called, on the subscriber's connection thread or on the thread that cancels, whenever an event may be
    /// waiting. `wake` must only signal the polling thread (lock a mutex, signal a condition): the connection thread
    /// reads nothing while it runs. Events wait in the subscriber's queue until taken, so latest-only replacement
    /// and the queue depth apply as for ``events``. One consumer at a time, as for ``events``.
    ///
    /// - Throws: ``FrameBusError/Code-swift.struct/concurrentConsumer`` if an iteration or a delegate consumes the
    ///   events.
    /// How the connection thread has slept and woken so far (every session of this subscriber), for tests and
    /// benchmarks: counts the code keeps, not timings.
    package var wakeUpCounts: WakeUpCounts { core.wakeUpCounts.snapshot }

    package func makePoller(wake: @escaping @Sendable () -> Void) throws(FrameBusError) -> Poller {
        Poller(core: core, claim: try core.claimPoller(wake: wake))
    }

    /// See ``makePoller(wake:)``. Releasing the last reference gives the events back (to an iteration or a
    /// delegate set later).
    package final class Poller: Sendable {
        let core: SubscriberCore
        let claim: SubscriberCore.ConsumerClaim

        init(core: SubscriberCore, claim: SubscriberCore.ConsumerClaim) {
            self.core = core
            self.claim = claim
        }

        /// What ``next()`` found.
        package enum Result {
            case event(SubscriberEvent)
            /// Nothing waits now; `wake` will be called when something may.
            case empty
            /// No event will come: the stream ended for good (after its final `.ended` event) or the subscriber was
            /// cancelled.
            case finished
        }

        /// Takes the next waiting event; never waits.
        package func next() -> Result {
            switch core.poll(claim: claim) {
            case .event(let event): .event(event)
            case .empty: .empty
            case .finished: .finished
            }
        }
    }

    /// A `TaskExecutor` that runs on this subscriber's connection thread: a loop over ``events`` or ``frames`` under
    /// `withTaskExecutorPreference(subscriber.executor)` (or in `Task(executorPreference: subscriber.executor)`)
    /// resumes on the thread that read each frame, as soon as it is read: one thread wake-up per frame, as with
    /// ``setDelegate(_:)``. Without it, each event resumes the loop on Swift's cooperative pool, a
    /// second thread woken per frame.
    ///
    /// ```swift
    /// await withTaskExecutorPreference(subscriber.executor) {
    ///     for try await frame in subscriber.frames { preview.show(frame) }   // on the connection thread
    /// }
    /// ```
    ///
    /// The loop's body then runs on the connection thread, with the rules of a connection-thread delegate: it must not
    /// block or wait synchronously for anything (a lock held elsewhere, a semaphore, I/O, `Thread.sleep`, heavy work
    /// for longer than a frame period): while it runs, the subscriber reads nothing, late frames are not replaced, and
    /// a body that blocks for long gets the subscriber disconnected as too slow. Awaiting is fine (the thread goes
    /// back to reading meanwhile); hand heavy work to another task. After ``cancel()`` or the stream's end for good,
    /// jobs run on the global concurrent executor instead. A loop in an actor's code runs on that actor's executor,
    /// as any isolated code does: the preference applies to nonisolated code.
    public var executor: any TaskExecutor { core.executor }

    /// Everything that happens to the subscription, in order (one consumer at a time). Finishes after ``cancel()``
    /// or after the stream ended for good (without ``Configuration/reconnects``).
    public var events: Events { Events(core: core) }

    /// Only the frames: ``events`` without the other events. It finishes after ``cancel()`` and throws the error
    /// that ended the stream (``FrameBusError/Code-swift.struct/endOfStream`` when the publisher stopped) unless
    /// ``Configuration/reconnects`` is set.
    public var frames: Frames { Frames(core: core) }

    /// Counters: delivered, dropped by reason, held now, waiting now, bytes, latency from publish to delivery.
    public var statistics: FrameStatistics { core.statistics }

    /// Says goodbye, closes the connection and stops receiving; frames that wait are released unseen, frames still
    /// referenced keep their memory. Idempotent, and never blocks.
    public func cancel() { core.cancel() }

    /// Whether the current connection is up.
    public var isConnected: Bool { core.isConnected }

    /// The events of a subscriber as an `AsyncSequence`.
    public struct Events: AsyncSequence, Sendable {
        public typealias Element = SubscriberEvent
        public typealias Failure = FrameBusError
        let core: SubscriberCore

        /// Makes the iterator.
        public func makeAsyncIterator() -> Iterator { Iterator(core: core) }

        /// Waits for the next event.
        public struct Iterator: AsyncIteratorProtocol {
            public typealias Element = SubscriberEvent
            public typealias Failure = FrameBusError
            let core: SubscriberCore
            var claim: SubscriberCore.ConsumerClaim?

            init(core: SubscriberCore) { self.core = core }

            /// The next event; `nil` after cancellation (also of the calling task) or the final end.
            ///
            /// - Throws: ``FrameBusError/Code-swift.struct/concurrentConsumer`` if another iteration or a delegate
            ///   consumes this subscriber's events.
            public mutating func next() async throws(FrameBusError) -> SubscriberEvent? {
                try await next(isolation: nil)
            }

            /// The next event; `nil` after cancellation (also of the calling task) or the final end.
            public mutating func next(
                isolation actor: isolated (any Actor)?
            ) async throws(FrameBusError) -> SubscriberEvent? {
                if claim == nil { claim = try core.claim() }
                guard let claim else { return nil }
                return await core.nextEvent(claim: claim)
            }
        }
    }

    /// The frames of a subscriber as an `AsyncSequence`.
    public struct Frames: AsyncSequence, Sendable {
        public typealias Element = SampleBuffer
        public typealias Failure = FrameBusError
        let core: SubscriberCore

        /// Makes the iterator.
        public func makeAsyncIterator() -> Iterator { Iterator(events: Events(core: core).makeAsyncIterator()) }

        /// Waits for the next frame.
        public struct Iterator: AsyncIteratorProtocol {
            public typealias Element = SampleBuffer
            public typealias Failure = FrameBusError
            var events: Events.Iterator

            /// The next frame, `nil` after cancellation (also of the calling task).
            ///
            /// - Throws: the error that ended the stream (unless the subscriber reconnects), or
            ///   ``FrameBusError/Code-swift.struct/concurrentConsumer``.
            public mutating func next() async throws(FrameBusError) -> SampleBuffer? {
                try await next(isolation: nil)
            }

            /// The next frame, `nil` after cancellation (also of the calling task).
            public mutating func next(
                isolation actor: isolated (any Actor)?
            ) async throws(FrameBusError) -> SampleBuffer? {
                while let event = try await events.next(isolation: actor) {
                    switch event {
                    case .frame(let sample): return sample
                    case .ended(let error) where !events.core.configuration.reconnects: throw error
                    case .ended, .connected, .reconnected, .dropped, .systemPressureChanged: continue
                    }
                }
                return nil
            }
        }
    }
}
