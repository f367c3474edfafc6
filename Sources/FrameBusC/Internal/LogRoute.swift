import CFrameBusABI
import Glibc
import Logging
import Synchronization

/// Where the C library's log messages go: a C caller's `fb_log_function` (`fb_set_log_handler`), or standard error,
/// above a minimum level (`fb_set_log_level`).
///
/// Every publisher and subscriber the C ABI makes logs through ``ABILogHandler``, which consults this route on each
/// message, so a change applies at once to handles made before it. Messages are emitted under the route's lock: they
/// are serialised, and once `fb_set_log_handler` has returned the previous function is neither running nor called
/// again (its `user_data` may be freed).
enum LogRoute {
    /// The C caller's function and its user data; `nil` function: standard error.
    @safe struct Destination: @unchecked Sendable {
        var function: fb_log_function?
        var userData: UnsafeMutableRawPointer?
    }

    private static let destination = unsafe Mutex(Destination(function: nil, userData: nil))
    /// `fb_log_level` below which messages are dropped; `FB_LOG_OFF` drops all.
    private static let minimum = Atomic<Int32>(FB_LOG_INFO)
    /// The thread inside a C log function (0: none); a call from it to change the route would wait on the lock it
    /// holds, so it is refused.
    private static let emittingThread = Atomic<UInt>(0)

    /// A logger for a handle the C ABI makes.
    static func logger(label: String) -> Logger {
        Logger(label: label) { label in ABILogHandler(label: label) }
    }

    static func setDestination(_ function: fb_log_function?, userData: UnsafeMutableRawPointer?) throws(ABIError) {
        try refuseFromInsideALogFunction("fb_set_log_handler")
        destination.withLock { unsafe $0 = Destination(function: function, userData: userData) }
    }

    static func setMinimum(_ level: fb_log_level) throws(ABIError) {
        guard (FB_LOG_TRACE...FB_LOG_OFF).contains(level) else {
            throw ABIError(.invalidArgument, "fb_set_log_level: level \(level) is outside 0...\(FB_LOG_OFF)")
        }
        try refuseFromInsideALogFunction("fb_set_log_level")
        minimum.store(level, ordering: .relaxed)
    }

    /// The swift-log level at and above which a handler is asked to log.
    static var minimumLoggerLevel: Logger.Level {
        let level = minimum.load(ordering: .relaxed)
        return Logger.Level.allCases.first { cLevel($0) == level } ?? .critical
    }

    static func cLevel(_ level: Logger.Level) -> fb_log_level {
        switch level {
        case .trace: FB_LOG_TRACE
        case .debug: FB_LOG_DEBUG
        case .info: FB_LOG_INFO
        case .notice: FB_LOG_NOTICE
        case .warning: FB_LOG_WARNING
        case .error: FB_LOG_ERROR
        case .critical: FB_LOG_CRITICAL
        }
    }

    static func emit(_ event: LogEvent, label: String, metadata: Logger.Metadata) {
        let level = cLevel(event.level)
        guard level >= minimum.load(ordering: .relaxed) else { return }
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        destination.withLock { destination in
            guard let function = unsafe destination.function else {
                var standardError = StreamLogHandler.standardError(label: label)
                standardError.logLevel = .trace
                standardError.metadata = merged
                standardError.log(event: event)
                return
            }
            var line = event.message.description
            for (key, value) in merged.sorted(by: { $0.key < $1.key }) { line += " \(key)=\(value)" }
            // One line of text: a peer's reason string may carry control characters.
            line = String(line.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : Character($0) })
            emittingThread.store(UInt(pthread_self()), ordering: .relaxed)
            defer { emittingThread.store(0, ordering: .relaxed) }
            unsafe label.withCString { label in
                unsafe line.withCString { message in unsafe function(destination.userData, level, label, message) }
            }
        }
    }

    private static func refuseFromInsideALogFunction(_ function: String) throws(ABIError) {
        if emittingThread.load(ordering: .relaxed) == UInt(pthread_self()) {
            throw ABIError(.busy, "\(function) called from inside a log function")
        }
    }
}

/// The swift-log handler of the C library's loggers: every message goes through ``LogRoute``.
struct ABILogHandler: LogHandler {
    let label: String
    var metadata: Logger.Metadata = [:]

    /// The C caller's minimum level (`fb_set_log_level`); setting it on one logger has no effect.
    var logLevel: Logger.Level {
        get { LogRoute.minimumLoggerLevel }
        set {}
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        LogRoute.emit(event, label: label, metadata: metadata)
    }
}
