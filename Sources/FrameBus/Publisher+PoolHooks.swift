import PixelBuffers

// The two places where the publisher depends on PixelBufferPool's notifications. INTERIM: the pool's own hooks
// (`setSurfaceFreedHandler(_:)`, `nextPixelBuffer()`) are being added to PixelBuffers on another branch; until
// they land, surfaces freed by a pool are not retired early (they are still retired when a subscriber's announced
// limit is reached), and waiting for a buffer retries every millisecond.
extension Publisher {
    /// Calls `handler` with the id of every surface `pool` frees for good.
    static func onSurfaceFreed(by pool: PixelBufferPool, _ handler: @escaping @Sendable (UInt64) -> Void) {}

    /// Waits until `pool` has a free buffer; cancellation ends the wait.
    static func waitForPixelBuffer(from pool: PixelBufferPool) async throws -> PixelBuffer {
        while true {
            let result: Result<PixelBuffer, PixelBufferError> = Result { () throws(PixelBufferError) in
                try pool.makePixelBuffer()
            }
            switch result {
            case .success(let buffer): return buffer
            case .failure(let error) where error.code == .wouldExceedAllocationThreshold:
                try await Task.sleep(for: .milliseconds(1))
            case .failure(let error): throw error
            }
        }
    }
}
