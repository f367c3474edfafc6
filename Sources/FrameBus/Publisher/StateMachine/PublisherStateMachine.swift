import Logging

/// The publisher's side of the protocol as a state machine: events in, actions out, no sockets, no clocks, no
/// threads (docs/PROTOCOL.md is the specification it implements).
///
/// The IO layer (``Publisher``) feeds it what happened — a connection was accepted, a datagram arrived, a
/// connection broke, time passed, the producer published a frame or lost some, the pool freed a surface — and
/// carries out the ``Action``s it returns: send what a connection's outbound queue holds, close a connection,
/// write a log line. Everything a peer can make it do is bounded: pending handshakes, subscribers, monitors,
/// messages queued per connection, frames held per subscriber, surfaces announced per subscriber, log lines.
///
/// `Resource` is what keeps a frame's buffer out of its pool while a subscriber holds it (a ``PixelBuffer`` in
/// the publisher; any value in tests). The machine stores one per held frame and per queued SURFACE; when the frame
/// is released, the SURFACE sent or the connection forgotten, it moves the value to ``released`` instead of dropping
/// it, so the IO layer drops it after unlocking (a buffer's last reference runs its pool's surface-freed observers or
/// its release handler: application code, which must not run under the publisher's lock).
package struct PublisherStateMachine<Resource> {
    // MARK: Types

    /// Identifies one accepted connection.
    package struct ConnectionID: Hashable, Comparable, Sendable, CustomStringConvertible {
        var rawValue: UInt64
        package static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
        package var description: String { "\(rawValue)" }
    }

    /// Who is on the other end (`SO_PEERCRED`).
    package struct Credentials: Hashable, Sendable {
        var processID: Int32
        var userID: UInt32
    }

    /// The limits and timings of docs/PROTOCOL.md §8.1, validated by ``Publisher/Configuration``.
    package struct Limits: Sendable {
        var formats: [UInt32]
        var allowedUserIDs: Set<UInt32>
        var maximumSubscribers = 16
        var maximumMonitors = 4
        var maximumPendingHandshakes = 64
        /// When a silent or failed connection is let go of, and what that releases.
        var reaping = ReapingPolicy()
        /// What a subscriber or monitor that falls behind gets: coalesced drops, eviction.
        var slowSubscribers = SlowSubscriberPolicy()
        var monitorInterval: UInt64 = 1_000_000_000
        var extraHeldFramesPerSubscriber = 2
        var producerReserve = 2
        var maximumAnnouncedSurfaces = 64
        /// Frames all subscribers together may hold (§7.3); nil until known.
        var heldFrameBudget: Int?
        /// The fair minimum kept for each subscriber still to come (``HoldingPolicy/minimumHeldFrames``).
        var minimumHeldFrames = 3
        /// The configured size of each pool of converted frames (`conversionBufferLimit`); nil: as large as the
        /// held-frame budget allows (plus the frame being converted), so it never binds.
        var conversionBufferLimit: Int?
        var logInterval: UInt64 = 10_000_000_000
        /// Deferred start runs by itself (`Publisher.Configuration.automaticallyRunsDeferredStart`).
        var automaticallyRunsDeferredStart = true
        /// How long a deferred subscriber waits for a preview that never comes (`deferredStartTimeout`).
        var deferredStartTimeout: UInt64 = 1_000_000_000

        /// These limits as the public policy value.
        var holding: HoldingPolicy {
            HoldingPolicy(
                budget: heldFrameBudget,
                producerReserve: producerReserve,
                extraHeldFrames: extraHeldFramesPerSubscriber,
                minimumHeldFrames: minimumHeldFrames
            )
        }
    }

    /// What the IO layer must do.
    package enum Action {
        /// Send what ``outbound(of:)`` holds for this connection, then report it with ``sent(_:on:now:)``.
        case flush(ConnectionID)
        /// Shut the connection down and forget its socket; the machine has forgotten it already.
        case close(ConnectionID)
        /// Write a log line (already rate-limited).
        case log(Logger.Level, String)
        /// A new deadline exists (a DROP range started): the IO layer's wait must end by ``nextDeadline()``.
        case deadlineChanged
    }

    /// One datagram waiting to be sent, with what its fds are exported from.
    enum Outbound {
        case message(WireMessage)
        /// A SURFACE or SURFACE_V1: export the fds of `resource`'s surface and send them with it.
        case surface(WireMessage, Resource)

        var message: WireMessage {
            switch self {
            case .message(let message), .surface(let message, _): message
            }
        }
    }

    /// One frame in one format, shared by every subscriber of that format.
    package struct Representation {
        var surfaceID: UInt64
        /// The version-2 description.
        var surface: WireSurface
        /// The version-1 description; nil when version 1 cannot describe the surface (DMA-BUF, several fds).
        var surfaceV1: WireSurfaceV1?
        var bytesUsed: UInt64
        var resource: Resource
    }

    /// What ``beginFrame(format:width:height:discontinuity:)`` decided.
    package struct FramePlan {
        package var sequence: UInt64
        var isDiscontinuity: Bool
        /// Formats some subscriber receives, the published one first.
        var formats: [UInt32]
    }

    /// Counters of subscribers that left, so totals cover the publisher's life.
    struct DepartedTotals {
        var delivered: UInt64 = 0
        var bytesDelivered: UInt64 = 0
        var droppedLate: UInt64 = 0
        var droppedOutOfBuffers: UInt64 = 0
        var droppedDiscontinuity: UInt64 = 0
    }

    // MARK: State

    var limits: Limits
    let streamID: UInt64
    var connections: [ConnectionID: Connection] = [:]
    var nextConnectionID: UInt64 = 1
    var pendingCount = 0
    var subscriberCount = 0
    var monitorCount = 0
    var nextSequence: UInt64 = 0
    var published: UInt64 = 0
    var droppedAtSource: [WireDropReason: UInt64] = [:]
    var departed = DepartedTotals()
    var conversions: UInt64 = 0
    /// Formats frames were converted to (``isConversionTarget(_:)``).
    var convertedFormats: Set<UInt32> = []
    var isStopped = false
    /// Deferred start (PublisherStateMachine+Deferral.swift).
    var deferral = DeferralState()
    /// What STATUS says now (``updateStatus(_:now:)``).
    var status = StatusFields()
    var lastGeometry: (format: UInt32, width: UInt32, height: UInt32)?
    var pendingDiscontinuity = false
    var holdTimes = LatencyRecorder()
    var logLimiter = LogLimiter()
    /// The formats of the last ``FramePlan``, kept so that planning a frame allocates no array.
    var planFormats: [UInt32] = []
    /// What the machine let go of and the IO layer has not taken yet (``takeReleased()``).
    package internal(set) var released: [Resource] = []

    package init(limits: Limits, streamID: UInt64) {
        self.limits = limits
        self.streamID = streamID
        connections.reserveCapacity(
            limits.maximumPendingHandshakes + limits.maximumSubscribers + limits.maximumMonitors
        )
    }
}

extension PublisherStateMachine.Representation: Sendable where Resource: Sendable {}
extension PublisherStateMachine.Outbound: Sendable where Resource: Sendable {}
