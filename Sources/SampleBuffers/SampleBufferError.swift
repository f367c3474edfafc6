/// An error from the `SampleBuffers` layer.
///
/// Codes are a struct over a private enum, so new codes can be added without breaking clients (the NIOFS style).
public struct SampleBufferError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public var code: Code
    /// The operation that failed, e.g. `"SampleBuffer.makeDataReady"`.
    public var operation: String

    public init(code: Code, operation: String) {
        self.code = code
        self.operation = operation
    }

    init(_ code: Code, _ operation: String) {
        self.init(code: code, operation: operation)
    }

    public var description: String { "\(operation): \(code)" }

    /// The kinds of sample buffer error.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case invalidated, formatDescriptionMismatch, dataNotReady, dataFailed
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The sample buffer was invalidated (`kCMSampleBufferError_Invalidated`).
        public static let invalidated = Code(.invalidated)
        /// The format description does not describe the image buffer (`kCMSampleBufferError_InvalidMediaFormat`).
        public static let formatDescriptionMismatch = Code(.formatDescriptionMismatch)
        /// The data is not ready and there is no way to make it so (`kCMSampleBufferError_BufferNotReady`).
        public static let dataNotReady = Code(.dataNotReady)
        /// Making the data ready failed (`kCMSampleBufferError_DataFailed`).
        public static let dataFailed = Code(.dataFailed)

        public var description: String {
            switch value {
            case .invalidated: "sample buffer was invalidated"
            case .formatDescriptionMismatch: "format description does not match the image buffer"
            case .dataNotReady: "data is not ready"
            case .dataFailed: "making the data ready failed"
            }
        }
    }
}
