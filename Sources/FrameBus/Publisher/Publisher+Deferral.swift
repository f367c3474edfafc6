// Deferred start on the producer's side: Apple's `AVCaptureSession.automaticallyRunsDeferredStart`,
// `runDeferredStartWhenNeeded()` and its deferred-start delegate, for consumers in other processes.

extension Publisher {
    /// What the producer is told around a deferred start (``Configuration/deferredStartHandler``).
    ///
    /// Subscribers that said they are deferred (``Subscriber/Configuration/isDeferred``, HELLO flag `deferred`,
    /// docs/PROTOCOL.md §5.1.1) are welcomed at once, but the publisher makes and sends nothing for them (no surface,
    /// no conversion, no compressed encoding, no frame) until their deferred start runs. ``willRun(subscriberCount:)``
    /// comes before that work starts, ``didRun(subscriberCount:)`` after the first frame that includes them was
    /// published; both on the thread that calls ``Publisher/publish(_:timing:discontinuity:)``, outside the
    /// publisher's locks (the handler may publish, though the frame it was called for waits for it).
    public enum DeferredStart: Hashable, Sendable {
        /// Deferred start is about to run for this many subscribers.
        case willRun(subscriberCount: Int)
        /// Deferred start ran: this many subscribers receive frames from the frame just published on.
        case didRun(subscriberCount: Int)
    }

    /// Runs deferred start with the next frame: every deferred subscriber waiting now, and every one that comes later,
    /// receives frames from the next ``publish(_:timing:discontinuity:)`` on.
    ///
    /// Needed only when ``Configuration/automaticallyRunsDeferredStart`` is false (call it once the preview shows);
    /// otherwise the publisher runs deferred start itself, once every subscriber that is not deferred has had its
    /// first frame. Like `AVCaptureSession.runDeferredStartWhenNeeded()`. Thread-safe; idempotent.
    public func runDeferredStartWhenNeeded() {
        core.requestDeferredStart()
    }
}
