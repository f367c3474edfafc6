import SystemPackage

/// An error of a V4L2 capture.
///
/// ```swift
/// do { _ = try V4L2Capture(configuration: .init(devicePath: "/dev/video0")) } catch {
///     if error.code == .unsupportedFormat { print(error.message ?? "") }
/// }
/// ```
public struct V4L2CaptureError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public var code: Code
    /// The operation that failed, e.g. `"VIDIOC_S_FMT"` or `"open(/dev/video0)"`.
    public var operation: String
    /// The system error, when a system call failed.
    public var errno: Errno?
    /// A human-readable reason.
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

    /// A failed system call; `ENODEV` (the device was unplugged) becomes ``Code-swift.struct/deviceLost``.
    static func systemCall(_ operation: String, _ errno: Errno) -> V4L2CaptureError {
        if errno == .operationNotSupportedByDevice {
            return V4L2CaptureError(.deviceLost, operation, errno: errno, message: "the device is gone (unplugged)")
        }
        return V4L2CaptureError(.systemCall, operation, errno: errno)
    }

    public var description: String {
        var text = "\(operation): \(code)"
        if let message { text += ": \(message)" }
        if let errno { text += " (\(errno))" }
        return text
    }

    /// The kinds of capture error.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case systemCall, notACaptureDevice, unsupportedFormat, invalidArgument, deviceLost, surface
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// A system call failed; see ``V4L2CaptureError/errno``.
        public static let systemCall = Code(.systemCall)
        /// The node is not a single-planar V4L2 video capture device with streaming I/O.
        public static let notACaptureDevice = Code(.notACaptureDevice)
        /// The device offers no format FrameBus can carry (NV12, P010, XR24, AR24), or not the one asked for, or
        /// not progressive, or not in the asked range.
        public static let unsupportedFormat = Code(.unsupportedFormat)
        /// A configuration value is out of range.
        public static let invalidArgument = Code(.invalidArgument)
        /// The device went away (`ENODEV`: unplugged, or its driver unbound).
        public static let deviceLost = Code(.deviceLost)
        /// An exported buffer could not be imported as a surface.
        public static let surface = Code(.surface)

        public var description: String {
            switch value {
            case .systemCall: "systemCall"
            case .notACaptureDevice: "notACaptureDevice"
            case .unsupportedFormat: "unsupportedFormat"
            case .invalidArgument: "invalidArgument"
            case .deviceLost: "deviceLost"
            case .surface: "surface"
            }
        }
    }
}
