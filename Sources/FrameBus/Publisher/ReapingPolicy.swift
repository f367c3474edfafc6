/// When the publisher lets go of a connection that is dead or does not answer, and what that releases: the reaping
/// policy, one value in the state machine's limits, as ``HoldingPolicy`` is the admission policy (docs/PROTOCOL.md
/// §4.1, §4.5, §8.1).
///
/// - **Dead**: a peer whose socket reports end of file or an error is forgotten at once; every frame it held and
///   every SURFACE queued for it is released in the same step, before anything else is published.
/// - **Silent at the handshake**: a connection that sends no HELLO within ``handshakeTimeout`` gets ERROR
///   `handshakeTimeout` and is closed, so half-open connections cannot fill the pending-handshake slots.
/// - **Failed** (a protocol violation, a refusal, eviction as too slow by ``SlowSubscriberPolicy``): forgotten at
///   once (its frames released), then given ``closeGracePeriod`` to read the ERROR that says why; a peer that does
///   not read it is closed without it when the grace ends.
struct ReapingPolicy: Hashable, Sendable {
    /// How long a new connection may take to send HELLO, in nanoseconds (`Publisher.Configuration.handshakeTimeout`).
    var handshakeTimeout: UInt64 = 5_000_000_000
    /// How long a failed connection has to read its last ERROR, in nanoseconds
    /// (`Publisher.Configuration.closeGracePeriod`).
    var closeGracePeriod: UInt64 = 1_000_000_000

    /// When a connection accepted at `now` is reaped if it has sent no HELLO (monotonic nanoseconds; saturating).
    func handshakeDeadline(acceptedAt now: UInt64) -> UInt64 { Self.adding(handshakeTimeout, to: now) }

    /// When a connection failed at `now` is closed even if its ERROR is still unsent (saturating).
    func closingDeadline(failedAt now: UInt64) -> UInt64 { Self.adding(closeGracePeriod, to: now) }

    /// Whether a connection whose deadline is `deadline` is reaped at `now`.
    static func isDue(_ deadline: UInt64, now: UInt64) -> Bool { now >= deadline }

    private static func adding(_ interval: UInt64, to time: UInt64) -> UInt64 {
        let (sum, overflow) = time.addingReportingOverflow(interval)
        return overflow ? .max : sum
    }
}
