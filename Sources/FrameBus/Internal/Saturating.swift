/// Saturating arithmetic for counters a peer drives: a hostile peer can make any counter reach its limit, and the
/// limit is a fine answer where a trap would end the process for everyone. The one implementation both sides use.
package enum Saturating {
    /// `a + b`, or `UInt64.max` if it overflows.
    package static func add(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? .max : sum
    }

    /// `a + b` (with `b` clamped to `Int`), or `Int.max` if it overflows.
    package static func add(_ a: Int, _ b: UInt64) -> Int {
        let (sum, overflow) = a.addingReportingOverflow(Int(clamping: b))
        return overflow ? .max : sum
    }
}

extension UInt64 {
    /// Adds, stopping at `UInt64.max` instead of trapping (``Saturating/add(_:_:)-(UInt64,UInt64)``).
    mutating func saturatingAdd(_ other: UInt64) { self = Saturating.add(self, other) }

    /// The sum, or `UInt64.max` if it overflows (``Saturating/add(_:_:)-(UInt64,UInt64)``).
    func addingSaturating(_ other: UInt64) -> UInt64 { Saturating.add(self, other) }
}
