/// The scheduler slice a subscriber's connection thread asks for (``Subscriber/Configuration/connectionThreadSlice``):
/// that slice while frames are consumed on this thread, the kernel's default again when they go elsewhere; one
/// `sched_setattr` per change, none per frame.
struct SchedulerSlice {
    /// Whether the last frame's consumer ran on this thread (``SubscriberCore/deliver(_:sequence:)``): only then does
    /// the thread ask for the configured slice.
    var lastFrameConsumedHere = false
    /// The slice asked for last, in nanoseconds (0: the kernel's default, as every thread starts).
    private var requested: UInt64 = 0
    /// The kernel refused a slice once: not asked again.
    private var isRefused = false

    /// Asks for the slice the last frame's consumer calls for, if it changed.
    mutating func adjust(_ configuration: Subscriber.Configuration) {
        guard !isRefused, let slice = configuration.connectionThreadSlice else { return }
        let wanted = lastFrameConsumedHere ? UInt64(clamping: max(slice.nanoseconds, 1)) : 0
        guard wanted != requested else { return }
        requested = wanted
        if case .failure(let errno) = Syscall.setSchedulerSlice(nanoseconds: wanted) {
            isRefused = true
            configuration.logger.debug("cannot ask for a scheduler slice of \(wanted) ns: \(errno)")
        }
    }
}
