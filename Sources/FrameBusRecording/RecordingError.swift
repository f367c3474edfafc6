import SystemPackage

/// An error from a recorder or a recording reader.
///
/// Codes are a struct over a private enum, so new codes can be added without breaking clients (the NIOFS style).
public struct RecordingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public var code: Code
    /// The operation that failed, e.g. `"pwrite"` or `"RecordingReader.open"`.
    public var operation: String
    /// The system error, when a system call failed.
    public var errno: Errno?
    /// A human-readable reason (for a damaged file: what was wrong, and at which byte).
    public var message: String?

    /// Creates an error.
    public init(code: Code, operation: String, errno: Errno? = nil, message: String? = nil) {
        self.code = code
        self.operation = operation
        self.errno = errno
        self.message = message
    }

    init(_ code: Code, _ operation: String, errno: Errno? = nil, message: String? = nil) {
        self.init(code: code, operation: operation, errno: errno, message: message)
    }

    public var description: String {
        var text = "\(operation): \(code)"
        if let message { text += ": \(message)" }
        if let errno { text += " (\(errno))" }
        return text
    }

    /// The kinds of recording error.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case systemCall, diskFull, ioError, invalidArgument, subscriber, notARecording, malformed, truncated
            case unsupported, closed
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// A system call failed; ``RecordingError/errno`` says why.
        public static let systemCall = Code(.systemCall)
        /// The file system ran out of space (`ENOSPC`, `EDQUOT`, or `EFBIG` past the file size limit): the recording
        /// ends, readable up to its last checkpoint.
        public static let diskFull = Code(.diskFull)
        /// A write or a sync failed (`EIO`, `EROFS`, ...): the recording ends, readable up to its last checkpoint.
        public static let ioError = Code(.ioError)
        /// An argument is out of range.
        public static let invalidArgument = Code(.invalidArgument)
        /// The bus subscription failed or ended abnormally; ``RecordingError/message`` holds the bus error.
        public static let subscriber = Code(.subscriber)
        /// The file does not start with an EBML header of DocType `matroska`.
        public static let notARecording = Code(.notARecording)
        /// The file's structure is damaged: a bad element size, a frame of the wrong size, a track that contradicts
        /// itself.
        public static let malformed = Code(.malformed)
        /// The file ends inside an element: a recording that was not closed (the recorder was killed), or a cut copy.
        /// Everything before the cut was read.
        public static let truncated = Code(.truncated)
        /// A valid Matroska file that FrameBus does not play (another codec, more than one video track, a format
        /// FrameBus does not have).
        public static let unsupported = Code(.unsupported)
        /// The recorder was already stopped.
        public static let closed = Code(.closed)

        public var description: String {
            switch value {
            case .systemCall: "system call failed"
            case .diskFull: "disk full"
            case .ioError: "I/O error"
            case .invalidArgument: "invalid argument"
            case .subscriber: "subscriber failed"
            case .notARecording: "not a recording"
            case .malformed: "malformed recording"
            case .truncated: "truncated recording"
            case .unsupported: "unsupported recording"
            case .closed: "closed"
            }
        }
    }
}
