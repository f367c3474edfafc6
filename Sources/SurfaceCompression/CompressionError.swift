import PixelBuffers

/// An error from the `SurfaceCompression` layer.
///
/// The decoder treats compressed bytes as hostile: every damaged surface it can detect gives one of these
/// codes, never a crash, a hang or an out-of-bounds access. Codes are a struct over a private enum, so new
/// codes can be added without breaking clients (the NIOFS style).
public struct CompressionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public var code: Code
    /// The operation that failed, with the detail that locates the problem (e.g. the tile index).
    public var operation: String
    /// The pixel buffer error underneath, if one caused this.
    public var underlying: PixelBufferError?

    public init(code: Code, operation: String, underlying: PixelBufferError? = nil) {
        self.code = code
        self.operation = operation
        self.underlying = underlying
    }

    init(_ code: Code, _ operation: String, underlying: PixelBufferError? = nil) {
        self.init(code: code, operation: operation, underlying: underlying)
    }

    public var description: String {
        var text = "\(operation): \(code)"
        if let underlying { text += " [\(underlying)]" }
        return text
    }

    /// The kinds of compression error.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case truncated, badMagic, unsupportedVersion, invalidHeader, checksumMismatch, tableOutOfRange
            case overlappingTiles, invalidTileMode, corruptPayload, formatMismatch, destinationTooSmall
            case invalidArgument, pixelBuffer, reentrantCall
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The bytes end before the header, the table or the bytes the header says are used.
        public static let truncated = Code(.truncated)
        /// The surface does not start with the FrameBus compressed-surface magic number.
        public static let badMagic = Code(.badMagic)
        /// The layout version is not one this decoder reads.
        public static let unsupportedVersion = Code(.unsupportedVersion)
        /// A header field is impossible: unknown base format, bad size or tile size, wrong table length.
        public static let invalidHeader = Code(.invalidHeader)
        /// The header, tile table or a tile payload does not match its checksum (bit flips).
        public static let checksumMismatch = Code(.checksumMismatch)
        /// A tile's offset or size points outside the bytes used, or is larger than the raw tile.
        public static let tableOutOfRange = Code(.tableOutOfRange)
        /// Tile payloads overlap, leave gaps or are out of order.
        public static let overlappingTiles = Code(.overlappingTiles)
        /// A tile names a coding mode this decoder does not know, or one the sample depth cannot use.
        public static let invalidTileMode = Code(.invalidTileMode)
        /// A tile payload does not decode to exactly the tile's samples.
        public static let corruptPayload = Code(.corruptPayload)
        /// Source and destination differ in format or size.
        public static let formatMismatch = Code(.formatMismatch)
        /// The destination has fewer bytes than the worst case needs.
        public static let destinationTooSmall = Code(.destinationTooSmall)
        /// An argument is out of range (tile size, thread count, region).
        public static let invalidArgument = Code(.invalidArgument)
        /// The pixel buffer underneath failed; see ``CompressionError/underlying``.
        public static let pixelBuffer = Code(.pixelBuffer)
        /// A ``SurfaceCodecContext`` was called from the body of its own
        /// ``SurfaceCodecContext/decodeTileRows(of:into:verifiesChecksums:_:)`` (which holds the context): use
        /// another context there.
        public static let reentrantCall = Code(.reentrantCall)

        public var description: String {
            switch value {
            case .truncated: "truncated compressed surface"
            case .badMagic: "not a compressed surface (bad magic)"
            case .unsupportedVersion: "unsupported layout version"
            case .invalidHeader: "invalid header"
            case .checksumMismatch: "checksum mismatch"
            case .tableOutOfRange: "tile offset or size out of range"
            case .overlappingTiles: "tile payloads overlap or leave gaps"
            case .invalidTileMode: "invalid tile mode"
            case .corruptPayload: "tile payload does not decode to the tile"
            case .formatMismatch: "format or size mismatch"
            case .destinationTooSmall: "destination too small"
            case .invalidArgument: "invalid argument"
            case .pixelBuffer: "pixel buffer error"
            case .reentrantCall: "codec context called from its own decodeTileRows body"
            }
        }
    }
}
