import Glibc

/// The recorder's backlog: one block of private memory, page-aligned, used as a ring of stream bytes. Stream
/// position `p` lives at byte `p % capacity`, and file offset `p` is written from it, so a block-aligned stretch of
/// the stream is a block-aligned stretch of memory: what `O_DIRECT` needs.
///
/// Not synchronised: the recorder's lock says who may touch which positions (the producer writes bytes it reserved
/// and not yet committed; the I/O thread reads committed bytes it has not released).
@safe final class AlignedRing: @unchecked Sendable {
    // @unchecked: positions are handed out under the recorder's Mutex; no two threads touch one byte at a time.
    static let alignment = 4096

    let capacity: Int
    private let base: UnsafeMutableRawPointer

    /// Allocates `capacity` bytes (a multiple of 4096), or nil when memory is short.
    init?(capacity: Int) {
        precondition(capacity > 0 && capacity % Self.alignment == 0)
        var pointer: UnsafeMutableRawPointer?
        guard unsafe posix_memalign(&pointer, Self.alignment, capacity) == 0, let pointer = unsafe pointer else {
            return nil
        }
        unsafe base = pointer
        self.capacity = capacity
    }

    deinit { unsafe free(base) }

    /// Copies `bytes` to stream position `position`, wrapping at the end.
    func write(_ bytes: UnsafeRawBufferPointer, at position: Int) {
        precondition(bytes.count <= capacity)
        guard unsafe !bytes.isEmpty, let source = bytes.baseAddress else { return }
        let offset = position % capacity
        let first = min(bytes.count, capacity - offset)
        unsafe (base + offset).copyMemory(from: source, byteCount: first)
        if first < bytes.count { unsafe base.copyMemory(from: source + first, byteCount: bytes.count - first) }
    }

    func write(_ bytes: [UInt8], at position: Int) {
        unsafe bytes.withUnsafeBytes { unsafe write($0, at: position) }
    }

    /// The bytes of `[position, position + count)`, which must not wrap.
    func withBytes<R>(at position: Int, count: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let offset = position % capacity
        precondition(count >= 0 && offset + count <= capacity)
        return unsafe body(UnsafeRawBufferPointer(start: base + offset, count: count))
    }

    /// A copy of `[position, position + count)` (wrapping).
    func copy(at position: Int, count: Int) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        let offset = position % capacity
        let first = min(count, capacity - offset)
        unsafe result.withUnsafeMutableBytes { destination in
            unsafe destination.baseAddress!.copyMemory(from: base + offset, byteCount: first)
            if first < count {
                unsafe (destination.baseAddress! + first).copyMemory(from: base, byteCount: count - first)
            }
        }
        return result
    }
}

/// A page-aligned copy of some bytes, for the writes that do not come from the ring (the header, the trailer):
/// `O_DIRECT` needs aligned memory.
@safe struct AlignedBytes: ~Copyable {
    private let base: UnsafeMutableRawPointer
    let count: Int

    /// Copies `bytes` (a multiple of 4096 bytes) into aligned memory, or nil when memory is short.
    init?(_ bytes: [UInt8]) {
        precondition(!bytes.isEmpty && bytes.count % AlignedRing.alignment == 0)
        var pointer: UnsafeMutableRawPointer?
        guard unsafe posix_memalign(&pointer, AlignedRing.alignment, bytes.count) == 0, let pointer = unsafe pointer
        else { return nil }
        unsafe bytes.withUnsafeBytes { unsafe pointer.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        unsafe base = pointer
        count = bytes.count
    }

    deinit { unsafe free(base) }

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        unsafe body(UnsafeRawBufferPointer(start: base, count: count))
    }
}
