import SystemPackage

extension Surface {
    /// The bytes of memory the publisher has committed to this surface: the allocated blocks of its memfds
    /// (`fstat(2)` `st_blocks`), or nil for a DMA-BUF, whose allocation `fstat` does not report.
    ///
    /// A sealed memfd (the importer requires a write seal) cannot give committed memory back: holes can only be
    /// filled, never punched. So once a receiver has seen `n` bytes committed, at least `n` stay committed, and a
    /// receiver that reads no more than that never faults in memory the publisher did not pay for itself.
    ///
    /// - Throws: ``SurfaceError/Code-swift.struct/systemCall`` if `fstat` fails.
    package func committedByteCount() throws(SurfaceError) -> Int? {
        guard case .memfd = backing else { return nil }
        var total = 0
        for descriptor in descriptors {
            let count = try Syscall.allocatedByteCount(descriptor)
                .mapError { SurfaceError(.systemCall, "fstat", errno: $0) }.get()
            total = total.addingReportingOverflow(count).overflow ? Int.max : total + count
        }
        return total
    }
}
