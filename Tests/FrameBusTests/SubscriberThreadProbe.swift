@testable import FrameBus

extension Subscriber {
    /// Whether the caller runs on this subscriber's connection thread (for tests of delegate and executor delivery).
    var isOnConnectionThread: Bool { core.isOnConnectionThread }
}
