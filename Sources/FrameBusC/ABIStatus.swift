/// The status codes of the C ABI (`fb_status` in include/framebus.h), mirrored so that the safe part of this module
/// does not import the C header. `ABIStatusTests` checks every value against the header's macros, and
/// Tests/CABI/checks.c checks from C that `fb_status_name` gives every macro its own spelling.
enum ABIStatus: Int32, CaseIterable, Sendable {
    case ok = 0
    case invalidArgument = 1
    case systemCall = 2
    case addressInUse = 3
    case permissionDenied = 4
    case refused = 5
    case protocolViolation = 6
    case endOfStream = 7
    case timedOut = 8
    case surfaceRejected = 9
    case closed = 10
    case outOfBuffers = 11
    case resource = 12
    case busy = 13
    case interrupted = 14
    case formatMismatch = 15
    case corruptData = 16
    case unsupportedVersion = 17
    case bufferTooSmall = 18
    case cancelled = 19
    case `internal` = 20

    /// The macro's spelling, for `fb_status_name`.
    var name: StaticString {
        switch self {
        case .ok: "FB_OK"
        case .invalidArgument: "FB_ERROR_INVALID_ARGUMENT"
        case .systemCall: "FB_ERROR_SYSTEM_CALL"
        case .addressInUse: "FB_ERROR_ADDRESS_IN_USE"
        case .permissionDenied: "FB_ERROR_PERMISSION_DENIED"
        case .refused: "FB_ERROR_REFUSED"
        case .protocolViolation: "FB_ERROR_PROTOCOL_VIOLATION"
        case .endOfStream: "FB_ERROR_END_OF_STREAM"
        case .timedOut: "FB_ERROR_TIMED_OUT"
        case .surfaceRejected: "FB_ERROR_SURFACE_REJECTED"
        case .closed: "FB_ERROR_CLOSED"
        case .outOfBuffers: "FB_ERROR_OUT_OF_BUFFERS"
        case .resource: "FB_ERROR_RESOURCE"
        case .busy: "FB_ERROR_BUSY"
        case .interrupted: "FB_ERROR_INTERRUPTED"
        case .formatMismatch: "FB_ERROR_FORMAT_MISMATCH"
        case .corruptData: "FB_ERROR_CORRUPT_DATA"
        case .unsupportedVersion: "FB_ERROR_UNSUPPORTED_VERSION"
        case .bufferTooSmall: "FB_ERROR_BUFFER_TOO_SMALL"
        case .cancelled: "FB_ERROR_CANCELLED"
        case .internal: "FB_ERROR_INTERNAL"
        }
    }
}
