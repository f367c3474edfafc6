import Surfaces
import Synchronization
import SystemPackage

/// The open device node; closed when the last owner goes away.
final class CaptureDevice: Sendable {
    let descriptor: FileDescriptor

    init(descriptor: FileDescriptor) { self.descriptor = descriptor }

    deinit { Syscall.close(descriptor) }
}

/// Buffer indices whose last pixel buffer went away, and the eventfd that wakes the capture loop for them.
///
/// Shared by the capture and the release handlers of its pixel buffers, which may outlive it (a subscriber can hold
/// a frame after the capture stopped): a handler only notes the index and rings; the capture thread re-queues.
final class ReturnedBuffers: Sendable {
    let descriptor: Int32
    private let indices = Mutex<[Int]>([])

    init() throws(V4L2CaptureError) {
        descriptor = try Syscall.eventFD().mapError { V4L2CaptureError.systemCall("eventfd", $0) }.get()
    }

    deinit { Syscall.close(descriptor) }

    /// Called by a pixel buffer's release handler, on whatever thread dropped the last reference.
    func returned(_ index: Int) {
        indices.withLock { $0.append(index) }
        Syscall.signal(eventFD: descriptor)
    }

    /// Wakes the capture loop without returning anything (for `stop()`).
    func ring() { Syscall.signal(eventFD: descriptor) }

    /// Everything returned since the last call.
    func take() -> [Int] {
        Syscall.drain(eventFD: descriptor)
        return indices.withLock { indices in
            defer { indices.removeAll(keepingCapacity: true) }
            return indices
        }
    }
}
