import CFrameBusABI
import FrameBus

// The C ABI's socket-path and logging functions; include/framebus.h documents each.

/// `fb_default_socket_path`.
@_cdecl("fb_default_socket_path")
public func fbDefaultSocketPath(
    _ name: UnsafePointer<CChar>?,
    _ buffer: UnsafeMutablePointer<CChar>?,
    _ capacity: Int,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_default_socket_path"
        let stream = unsafe name == nil ? "framebus" : try unsafe boundedString(name, limit: 64, "\(function): name")
        guard let buffer = unsafe buffer else { throw .null("buffer", in: function) }
        let path: String
        do { path = try SocketPath.default(name: stream) } catch { throw ABIError(any: error) }
        let bytes = Array(path.utf8)
        guard bytes.count < capacity else {
            throw ABIError(
                .bufferTooSmall,
                "\(function): the path needs \(bytes.count + 1) bytes, the buffer holds \(capacity)"
            )
        }
        for (index, byte) in bytes.enumerated() { unsafe buffer[index] = CChar(bitPattern: byte) }
        unsafe buffer[bytes.count] = 0
    }
}

/// `fb_set_log_handler`.
@_cdecl("fb_set_log_handler")
public func fbSetLogHandler(
    _ function: fb_log_function?,
    _ userData: UnsafeMutableRawPointer?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        try unsafe LogRoute.setDestination(function, userData: userData)
    }
}

/// `fb_set_log_level`.
@_cdecl("fb_set_log_level")
public func fbSetLogLevel(_ minimum: fb_log_level, _ error: UnsafeMutablePointer<fb_error>?) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        try LogRoute.setMinimum(minimum)
    }
}
