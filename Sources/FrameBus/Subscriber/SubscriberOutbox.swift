/// RELEASEs (and the GOODBYE) that wait for room in the socket because the publisher is not reading.
///
/// Bounded: a publisher that sends frames and never reads our releases would otherwise make this grow without
/// limit. When it is full the connection must close (``enqueue(_:)`` returns `false`).
package struct SubscriberOutbox {
    /// Most messages that may wait. An honest publisher holds at most `maximumHeldFrames` (≤ 65535, usually tens)
    /// of our frames, so it has read our earlier releases long before this many pile up.
    package static let defaultCapacity = 1024

    package let capacity: Int
    private(set) var messages: [[UInt8]] = []
    private var head = 0

    package init(capacity: Int = SubscriberOutbox.defaultCapacity) {
        self.capacity = capacity
    }

    package var count: Int { messages.count - head }
    package var isEmpty: Bool { count == 0 }

    /// Queues a message; `false` if the outbox is full (the publisher stopped reading).
    package mutating func enqueue(_ message: [UInt8]) -> Bool {
        guard count < capacity else { return false }
        messages.append(message)
        return true
    }

    /// The oldest waiting message.
    var first: [UInt8]? { head < messages.count ? messages[head] : nil }

    /// Removes the oldest waiting message.
    mutating func removeFirst() {
        guard head < messages.count else { return }
        head += 1
        if head == messages.count || head >= 64 {
            messages.removeFirst(head)
            head = 0
        }
    }

    package mutating func removeAll() {
        messages.removeAll()
        head = 0
    }
}
