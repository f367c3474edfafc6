import SystemPackage

/// An error from the `FrameBus` layer: the socket, the wire protocol, the publisher or the subscriber.
///
/// Codes are a struct over a private enum, so new codes can be added without breaking clients (the NIOFS style).
/// A refusal or a protocol error carries the peer's or our own reason in ``message``.
public struct FrameBusError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public var code: Code
    /// The operation that failed, e.g. `"bind"` or `"Subscriber.connect"`.
    public var operation: String
    /// The system error, when a system call failed.
    public var errno: Errno?
    /// A human-readable reason, e.g. the reason string of a publisher's refusal.
    public var message: String?

    /// Creates an error.
    public init(code: Code, operation: String, errno: Errno? = nil, message: String? = nil) {
        self.code = code
        self.operation = operation
        self.errno = errno
        self.message = message
    }

    package init(_ code: Code, _ operation: String, errno: Errno? = nil, message: String? = nil) {
        self.init(code: code, operation: operation, errno: errno, message: message)
    }

    package static func systemCall(_ operation: String, _ errno: Errno) -> FrameBusError {
        FrameBusError(.systemCall, operation, errno: errno)
    }

    public var description: String {
        var text = "\(operation): \(code)"
        if let message { text += ": \(message)" }
        if let errno { text += " (\(errno))" }
        return text
    }

    /// The kinds of bus error.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case systemCall, addressInUse, permissionDenied, refused, protocolViolation, endOfStream
            case timedOut, invalidArgument, surfaceRejected, closed, outOfBuffers, resourceFailure
            case concurrentConsumer
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// A system call failed; ``FrameBusError/errno`` says why.
        public static let systemCall = Code(.systemCall)
        /// A live publisher already listens at the path.
        public static let addressInUse = Code(.addressInUse)
        /// The peer's user id is not allowed (`SO_PEERCRED`).
        public static let permissionDenied = Code(.permissionDenied)
        /// The publisher refused the subscription; ``FrameBusError/message`` holds its reason.
        public static let refused = Code(.refused)
        /// The peer sent a malformed, oversized, unexpected or out-of-order message.
        public static let protocolViolation = Code(.protocolViolation)
        /// The publisher stopped or died; the subscriber may reconnect.
        public static let endOfStream = Code(.endOfStream)
        /// A wait ran past its deadline.
        public static let timedOut = Code(.timedOut)
        /// An argument is out of range (a path too long, a queue depth of zero, no formats).
        public static let invalidArgument = Code(.invalidArgument)
        /// A surface the publisher announced failed its checks (unsealed, too small, bad layout).
        public static let surfaceRejected = Code(.surfaceRejected)
        /// The publisher or subscriber was already closed.
        public static let closed = Code(.closed)
        /// The pool was exhausted because frames are held: the frame was dropped with
        /// `DroppedFrameReason.outOfBuffers`, and subscribers were told.
        public static let outOfBuffers = Code(.outOfBuffers)
        /// A pixel buffer, surface or codec operation failed; ``FrameBusError/message`` holds the underlying error.
        public static let resourceFailure = Code(.resourceFailure)
        /// A subscriber's events already have a consumer (another iteration of ``Subscriber/events`` or
        /// ``Subscriber/frames``, or a delegate): one consumer at a time.
        public static let concurrentConsumer = Code(.concurrentConsumer)

        public var description: String {
            switch value {
            case .systemCall: "system call failed"
            case .addressInUse: "a live publisher already listens at this path"
            case .permissionDenied: "peer not permitted"
            case .refused: "refused by the publisher"
            case .protocolViolation: "protocol violation"
            case .endOfStream: "end of stream"
            case .timedOut: "timed out"
            case .invalidArgument: "invalid argument"
            case .surfaceRejected: "surface rejected"
            case .closed: "closed"
            case .outOfBuffers: "out of buffers: the frame was dropped"
            case .resourceFailure: "buffer operation failed"
            case .concurrentConsumer: "another consumer already takes these events"
            }
        }
    }
}
