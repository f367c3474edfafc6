import CFrameBusABI
import FrameBus
import Glibc

// The plumbing every exported function uses: handles as retained object pointers, errors into a caller's fb_error,
// and bounded reads of C strings and arrays. Unsafe by nature (C hands us raw pointers); nothing here trusts a
// pointer beyond what the header makes the caller promise.

/// Opaque handles: a Swift object retained once per handle, its address the C pointer.
enum Handle {
    static func make<Object: AnyObject>(_ object: Object) -> OpaquePointer {
        unsafe OpaquePointer(Unmanaged.passRetained(object).toOpaque())
    }

    /// The object behind a live handle, without consuming it.
    static func borrow<Object: AnyObject>(_ handle: OpaquePointer, as type: Object.Type) -> Object {
        unsafe Unmanaged<Object>.fromOpaque(UnsafeRawPointer(handle)).takeUnretainedValue()
    }

    /// Ends a handle: drops the reference `make` took.
    static func free<Object: AnyObject>(_ handle: OpaquePointer, as type: Object.Type) {
        unsafe Unmanaged<Object>.fromOpaque(UnsafeRawPointer(handle)).release()
    }
}

extension ABIError {
    /// Fills the caller's `fb_error` (if any) and returns the status to return to C.
    func report(to error: UnsafeMutablePointer<fb_error>?) -> fb_status {
        if let error = unsafe error {
            unsafe error.pointee.code = status.rawValue
            unsafe error.pointee.system_errno = systemErrno
            unsafe withUnsafeMutableBytes(of: &error.pointee.message) { buffer in
                unsafe copyMessage(message, into: buffer)
            }
        }
        return status.rawValue
    }
}

/// Copies `message` into a fixed C character array, truncated at a UTF-8 character boundary and NUL-terminated.
func copyMessage(_ message: String, into buffer: UnsafeMutableRawBufferPointer) {
    guard buffer.count > 0 else { return }
    var utf8 = Array(message.utf8.prefix(buffer.count - 1))
    // Do not end inside a multi-byte character: if the last character is incomplete, drop its bytes.
    if let last = utf8.indices.last, utf8[last] & 0x80 != 0 {
        var lead = last
        while lead > 0, utf8[lead] & 0xC0 == 0x80 { lead -= 1 }
        let length = utf8[lead] >= 0xF0 ? 4 : utf8[lead] >= 0xE0 ? 3 : utf8[lead] >= 0xC0 ? 2 : 1
        if utf8.count - lead < length { utf8.removeSubrange(lead...) }
    }
    for (index, byte) in utf8.enumerated() { unsafe buffer[index] = byte }
    unsafe buffer[utf8.count] = 0
}

/// Runs `body`, turning a thrown ``ABIError`` into a status and the caller's `fb_error`.
func boundary(_ errorPointer: UnsafeMutablePointer<fb_error>?, _ body: () throws(ABIError) -> Void) -> fb_status {
    do {
        try body()
        return ABIStatus.ok.rawValue
    } catch {
        return unsafe error.report(to: errorPointer)
    }
}

/// A C string of at most `limit` bytes before its NUL.
///
/// - Throws: ``ABIStatus/invalidArgument`` for NULL, a string that does not end within `limit` bytes, or one that is
///   not UTF-8.
func boundedString(_ pointer: UnsafePointer<CChar>?, limit: Int, _ what: String) throws(ABIError) -> String {
    guard let pointer = unsafe pointer else { throw ABIError(.invalidArgument, "\(what) is NULL") }
    let length = unsafe strnlen(pointer, limit + 1)
    guard length <= limit else { throw ABIError(.invalidArgument, "\(what) is longer than \(limit) bytes") }
    let bytes = unsafe UnsafeRawBufferPointer(start: pointer, count: length)
    guard let string = unsafe String(validating: bytes, as: UTF8.self) else {
        throw ABIError(.invalidArgument, "\(what) is not UTF-8")
    }
    return string
}

/// Pixel formats from a C array of FourCCs, 1...`limit` of them.
///
/// - Throws: ``ABIStatus/invalidArgument`` for NULL with a non-zero count, too many or none, or an unknown FourCC.
func formatList(
    _ pointer: UnsafePointer<UInt32>?,
    count: Int,
    limit: Int,
    _ what: String
) throws(ABIError)
    -> [PixelFormat]
{
    guard count >= 1, count <= limit else {
        throw ABIError(.invalidArgument, "\(what): \(count) formats, expected 1...\(limit)")
    }
    guard let pointer = unsafe pointer else { throw ABIError(.invalidArgument, "\(what) is NULL") }
    var formats: [PixelFormat] = []
    for index in 0..<count {
        let code = unsafe pointer[index]
        guard let format = try? PixelFormat(fourCC: code) else {
            throw ABIError(.invalidArgument, "\(what)[\(index)]: unknown format \(fourCCName(code))")
        }
        formats.append(format)
    }
    return formats
}

/// The pixel format a caller named by FourCC, or ``ABIStatus/formatMismatch``.
func callerFormat(_ code: UInt32, _ what: String) throws(ABIError) -> PixelFormat {
    guard let format = try? PixelFormat(fourCC: code) else {
        throw ABIError(.formatMismatch, "\(what): unknown format \(fourCCName(code))")
    }
    return format
}

/// Checks a caller's image size against `format`'s base format (each side at most
/// `PixelFormat.maximumDimension`, even where it subsamples), or throws ``ABIStatus/invalidArgument``.
func checkCallerSize(_ width: Int, _ height: Int, fit format: PixelFormat, _ what: String) throws(ABIError) {
    guard width <= PixelFormat.maximumDimension, height <= PixelFormat.maximumDimension,
        format.base.isValidSize(width: width, height: height)
    else {
        throw ABIError(.invalidArgument, "\(what): \(width)x\(height) does not fit \(format)")
    }
}

/// A FourCC as text when printable, else as hex, for messages.
func fourCCName(_ code: UInt32) -> String { FourCC.quotedName(code) }

/// Nanoseconds as a `Duration`; `nil` unless positive.
func positiveDuration(nanoseconds: Int64) -> Duration? {
    nanoseconds > 0 ? .nanoseconds(nanoseconds) : nil
}

extension fb_time {
    init(_ time: MediaTime) {
        self.init(value: time.value, timescale: time.timescale, flags: time.flags.rawValue)
    }
}

extension MediaTime {
    /// A time from C: all zero (no valid flag) is "no time"; a time flagged valid must be consistent.
    ///
    /// - Throws: ``ABIStatus/invalidArgument`` for a time flagged valid whose fields ``MediaTime`` refuses.
    init(_ time: fb_time, _ what: String) throws(ABIError) {
        guard time.flags & UInt32(FB_TIME_FLAG_VALID) != 0 else {
            self = .invalid
            return
        }
        let converted = MediaTime(value: time.value, timescale: time.timescale, flags: Flags(rawValue: time.flags))
        guard converted.isValid else {
            throw ABIError(
                .invalidArgument,
                "\(what): {\(time.value), \(time.timescale), flags \(time.flags)} is not a valid time"
            )
        }
        self = converted
    }
}
