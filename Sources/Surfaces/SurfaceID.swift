import Synchronization

/// A 64-bit surface identifier, unique across processes.
///
/// The high 32 bits are random per process and the low 32 count surfaces made by it, so two processes
/// (or a restarted publisher) practically never reuse an id.
public struct SurfaceID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public var description: String { "surface#" + String(rawValue, radix: 16) }

    private static let processPrefix = UInt64(UInt32.random(in: 1...UInt32.max)) << 32
    private static let counter = Atomic<UInt32>(0)

    /// A new identifier, never returned before by this process.
    public static func next() -> SurfaceID {
        let count = counter.wrappingAdd(1, ordering: .relaxed).newValue
        return SurfaceID(rawValue: processPrefix | UInt64(count))
    }
}
