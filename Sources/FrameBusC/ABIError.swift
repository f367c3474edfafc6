import FrameBus

/// A failure on its way to a C caller: a status code, the errno of a failed system call, and a message.
///
/// Every error of the Swift layers is turned into one of these at the boundary; nothing else crosses it.
struct ABIError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The code the C function returns.
    var status: ABIStatus
    /// `errno` of a failed system call, or 0.
    var systemErrno: Int32
    /// What failed.
    var message: String

    init(_ status: ABIStatus, _ message: String, systemErrno: Int32 = 0) {
        self.status = status
        self.message = message
        self.systemErrno = systemErrno
    }

    var description: String { "\(status.name): \(message)" }

    /// A NULL where the header requires a pointer or handle.
    static func null(_ parameter: String, in function: String) -> ABIError {
        ABIError(.invalidArgument, "\(function): \(parameter) is NULL")
    }

    /// Maps a bus error: each ``FrameBusError/Code-swift.struct`` has its own status.
    init(_ error: FrameBusError) {
        let status: ABIStatus =
            switch error.code {
            case .systemCall: .systemCall
            case .addressInUse: .addressInUse
            case .permissionDenied: .permissionDenied
            case .refused: .refused
            case .protocolViolation: .protocolViolation
            case .endOfStream: .endOfStream
            case .timedOut: .timedOut
            case .invalidArgument: .invalidArgument
            case .surfaceRejected: .surfaceRejected
            case .closed: .closed
            case .outOfBuffers: .outOfBuffers
            case .resourceFailure: .resource
            case .concurrentConsumer: .busy
            default: .internal
            }
        self.init(status, error.description, systemErrno: error.errno?.rawValue ?? 0)
    }

    /// Maps a codec error: damage is ``ABIStatus/corruptData``, whatever the detail.
    init(_ error: CompressionError) {
        let status: ABIStatus =
            switch error.code {
            case .truncated, .badMagic, .invalidHeader, .checksumMismatch, .tableOutOfRange, .overlappingTiles,
                .invalidTileMode, .corruptPayload:
                .corruptData
            case .unsupportedVersion: .unsupportedVersion
            case .formatMismatch: .formatMismatch
            case .destinationTooSmall: .bufferTooSmall
            case .invalidArgument: .invalidArgument
            case .pixelBuffer: .resource
            default: .internal
            }
        self.init(status, error.description, systemErrno: error.underlying?.underlying?.errno?.rawValue ?? 0)
    }

    /// Maps a pixel buffer error (pool and buffer creation, locking).
    init(_ error: PixelBufferError) {
        let status: ABIStatus =
            switch error.code {
            case .unknownPixelFormat, .opaqueFormat, .formatMismatch: .formatMismatch
            case .invalidSize, .invalidAlignment, .planeOutOfRange: .invalidArgument
            case .wouldExceedAllocationThreshold: .outOfBuffers
            default: .resource
            }
        self.init(status, error.description, systemErrno: error.underlying?.errno?.rawValue ?? 0)
    }

    /// Maps any error a Swift call may throw.
    init(any error: any Error) {
        switch error {
        case let error as ABIError: self = error
        case let error as FrameBusError: self.init(error)
        case let error as CompressionError: self.init(error)
        case let error as PixelBufferError: self.init(error)
        default: self.init(.internal, "\(error)")
        }
    }
}
