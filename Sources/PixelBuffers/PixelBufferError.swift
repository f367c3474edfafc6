import Surfaces

/// An error from the `PixelBuffers` layer.
public struct PixelBufferError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public var code: Code
    /// The operation that failed, with its arguments where they help.
    public var operation: String
    /// The surface error underneath, if one caused this.
    public var underlying: SurfaceError?

    public init(code: Code, operation: String, underlying: SurfaceError? = nil) {
        self.code = code
        self.operation = operation
        self.underlying = underlying
    }

    package init(_ code: Code, _ operation: String, underlying: SurfaceError? = nil) {
        self.init(code: code, operation: operation, underlying: underlying)
    }

    public var description: String {
        var text = "\(operation): \(code)"
        if let underlying { text += " [\(underlying)]" }
        return text
    }

    /// The kinds of pixel buffer error.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case unknownPixelFormat, invalidSize, invalidAlignment, opaqueFormat, planeOutOfRange
            case wouldExceedAllocationThreshold, surface, invalidImage, formatMismatch, cancelled
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// A four-character code FrameBus does not know.
        public static let unknownPixelFormat = Code(.unknownPixelFormat)
        /// Zero, negative or absurd sizes, or odd sizes for 4:2:0.
        public static let invalidSize = Code(.invalidSize)
        /// A bytes-per-row alignment that is not a power of two, or is too large.
        public static let invalidAlignment = Code(.invalidAlignment)
        /// Plane access on a compressed (opaque) format: only the codec reads its bytes.
        public static let opaqueFormat = Code(.opaqueFormat)
        /// A plane index that the format does not have.
        public static let planeOutOfRange = Code(.planeOutOfRange)
        /// The pool would exceed its allocation threshold (`kCVReturnWouldExceedAllocationThreshold`).
        public static let wouldExceedAllocationThreshold = Code(.wouldExceedAllocationThreshold)
        /// The task waiting in ``PixelBufferPool/nextPixelBuffer()`` was cancelled.
        public static let cancelled = Code(.cancelled)
        /// The surface underneath failed; see ``PixelBufferError/underlying``.
        public static let surface = Code(.surface)
        /// An image file could not be read or decoded.
        public static let invalidImage = Code(.invalidImage)
        /// Two buffers that must share a format or size do not.
        public static let formatMismatch = Code(.formatMismatch)

        public var description: String {
            switch value {
            case .unknownPixelFormat: "unknown pixel format"
            case .invalidSize: "invalid size"
            case .invalidAlignment: "invalid bytes-per-row alignment"
            case .opaqueFormat: "compressed formats have no CPU-accessible planes"
            case .planeOutOfRange: "plane index out of range"
            case .wouldExceedAllocationThreshold: "would exceed the pool's allocation threshold"
            case .surface: "surface error"
            case .invalidImage: "invalid image"
            case .formatMismatch: "format or size mismatch"
            case .cancelled: "cancelled"
            }
        }
    }
}
