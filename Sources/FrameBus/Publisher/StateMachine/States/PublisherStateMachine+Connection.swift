// The states a connection goes through: pending (before HELLO), subscriber or monitor, closing.

extension PublisherStateMachine {
    struct MonitorSession {
        var credentials: Credentials
        var nextReport: UInt64
        /// It set `knowsUnsupportedSurface`: its reports carry `droppedUnsupportedSurface` (else 0 there).
        var knowsUnsupportedSurface = false
        /// Its HELLO set `wantsStatus`: a STATUS follows each MONITOR_REPORT (PROTOCOL.md §5.13).
        var wantsStatus = false
        var outbound: [Outbound] = []
    }

    enum Connection {
        /// Accepted, waiting for HELLO: a fixed-size record, nothing allocated.
        case pending(Credentials, deadline: UInt64)
        case subscriber(SubscriberSession)
        case monitor(MonitorSession)
        /// Sending its last message (an ERROR or END_OF_STREAM), then closed; nothing else is sent or read.
        case closing(deadline: UInt64, outbound: [Outbound])
    }
}
