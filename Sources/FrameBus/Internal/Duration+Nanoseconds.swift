extension Duration {
    /// Whole nanoseconds, saturating at `UInt64.max`; negative durations are 0.
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : whole.addingSaturating(UInt64(max(0, attoseconds) / 1_000_000_000))
    }
}
