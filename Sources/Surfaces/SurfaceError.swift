import SystemPackage

/// An error from the `Surfaces` layer.
///
/// Codes are a struct over a private enum, so new codes can be added without breaking clients (the NIOFS style).
public struct SurfaceError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public var code: Code
    /// The operation that failed, e.g. `"memfd_create"` or `"Surface.import"`.
    public var operation: String
    /// The system error, when a system call failed.
    public var errno: Errno?

    public init(code: Code, operation: String, errno: Errno? = nil) {
        self.code = code
        self.operation = operation
        self.errno = errno
    }

    init(_ code: Code, _ operation: String, errno: Errno? = nil) {
        self.init(code: code, operation: operation, errno: errno)
    }

    public var description: String {
        var text = "\(operation): \(code)"
        if let errno { text += " (\(errno))" }
        return text
    }

    /// The kinds of surface error.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case systemCall, invalidLayout, notSealed, tooSmall, notLocked, alreadyLocked, readOnly
            case unbalancedUnlock, notAMemFD, deviceUnavailable, invalidHandle, notWriteSealed, notADMABuf
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// A system call failed; ``SurfaceError/errno`` says why.
        public static let systemCall = Code(.systemCall)
        /// The layout is impossible: planes outside the allocation, zero or absurd sizes.
        public static let invalidLayout = Code(.invalidLayout)
        /// An imported memfd lacks `F_SEAL_SHRINK` or `F_SEAL_GROW`: the peer could shrink it under us (SIGBUS).
        public static let notSealed = Code(.notSealed)
        /// An imported memfd lacks `F_SEAL_FUTURE_WRITE` (or `F_SEAL_WRITE`): any process holding it could reopen
        /// it writable and change the pixels every other consumer reads.
        public static let notWriteSealed = Code(.notWriteSealed)
        /// An imported file is smaller than its layout says.
        public static let tooSmall = Code(.tooSmall)
        /// The bytes were accessed without a lock.
        public static let notLocked = Code(.notLocked)
        /// A read-write lock was requested while the surface is locked.
        public static let alreadyLocked = Code(.alreadyLocked)
        /// A write was attempted on a read-only surface (an imported consumer handle).
        public static let readOnly = Code(.readOnly)
        /// `unlock` without a matching `lock`, or with different options.
        public static let unbalancedUnlock = Code(.unbalancedUnlock)
        /// The descriptor is not a memfd (it has no seals to check).
        public static let notAMemFD = Code(.notAMemFD)
        /// A descriptor imported as a DMA-BUF is not one (its file system is not the DMA-BUF one): it could be a
        /// memfd that its sender shrinks under our mapping.
        public static let notADMABuf = Code(.notADMABuf)
        /// The device node an allocator needs does not exist on this machine.
        public static let deviceUnavailable = Code(.deviceUnavailable)
        /// A handle's descriptor is closed, or its layout does not match what it describes.
        public static let invalidHandle = Code(.invalidHandle)

        public var description: String {
            switch value {
            case .systemCall: "system call failed"
            case .invalidLayout: "invalid layout"
            case .notSealed: "memfd is not sealed against shrinking and growing"
            case .notWriteSealed: "memfd is not sealed against writes"
            case .tooSmall: "file is smaller than the layout"
            case .notLocked: "surface is not locked"
            case .alreadyLocked: "surface is already locked"
            case .readOnly: "surface is read-only"
            case .unbalancedUnlock: "unlock does not match a lock"
            case .notAMemFD: "descriptor is not a memfd"
            case .notADMABuf: "descriptor is not a DMA-BUF"
            case .deviceUnavailable: "device node unavailable"
            case .invalidHandle: "invalid surface handle"
            }
        }
    }
}
