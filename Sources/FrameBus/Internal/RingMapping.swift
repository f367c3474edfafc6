import Atomics
import CFrameBusShims
import Glibc
import Surfaces
import SystemPackage

/// One ring file mapped into this process (docs/PROTOCOL.md §9): our own, read-write, or the peer's, read-only.
///
/// Our own file is a memfd sized once, sealed against shrinking and growing, mapped read-write once, then sealed
/// against every later writable mapping (`F_SEAL_FUTURE_WRITE | F_SEAL_SEAL`): the peer that receives its descriptor
/// can only read it. A peer's file is mapped only after the same seals are checked, so it can never shrink under
/// us (no `SIGBUS`); its contents stay hostile and may change at any moment: every value is loaded once and checked
/// by ``RingLayout`` before it is used.
///
/// Counters are `UnsafeAtomic<UInt64>` views of the mapped memory, never destroyed (the memory is the mapping's).
@safe package final class RingMapping: @unchecked Sendable {
    // `@unchecked Sendable`: the address and descriptor are immutable; shared memory is only touched through atomics
    // and whole-slot copies.
    private let address: UnsafeMutableRawPointer
    /// The file's descriptor (ours: sent to the peer at the handshake; the peer's: kept until the mapping goes).
    let descriptor: FileDescriptor
    let isWritable: Bool
    /// The ring it carries (known privately: ours as made, the peer's as expected and checked at the import).
    let role: RingLayout.Role

    private init(
        address: UnsafeMutableRawPointer,
        descriptor: FileDescriptor,
        isWritable: Bool,
        role: RingLayout.Role
    ) {
        unsafe self.address = address
        self.descriptor = descriptor
        self.isWritable = isWritable
        self.role = role
    }

    deinit {
        unsafe Syscall.unmap(address, byteCount: RingLayout.byteCount)
        Syscall.close(descriptor)
    }

    /// Makes, seals and maps our own ring file of `role`.
    static func create(role: RingLayout.Role) throws(FrameBusError) -> RingMapping {
        let name = role == .announce ? "framebus-announce" : "framebus-release"
        let fd: FileDescriptor
        switch Syscall.memfdCreate(name: name, flags: CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING) {
        case .success(let created): fd = created
        case .failure(let errno): throw .systemCall("memfd_create", errno)
        }
        func fail(_ call: String, _ errno: Errno) -> FrameBusError {
            Syscall.close(fd)
            return .systemCall(call, errno)
        }
        if case .failure(let errno) = Syscall.truncate(fd, byteCount: RingLayout.byteCount) {
            throw fail("ftruncate", errno)
        }
        if case .failure(let errno) = Syscall.addSeals(fd, CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW) {
            throw fail("fcntl(F_ADD_SEALS)", errno)
        }
        let address: UnsafeMutableRawPointer
        switch unsafe Syscall.mapShared(fd, byteCount: RingLayout.byteCount, writable: true) {
        case .success(let mapped): unsafe address = mapped
        case .failure(let errno): throw fail("mmap", errno)
        }
        if case .failure(let errno) = Syscall.addSeals(fd, CFB_F_SEAL_FUTURE_WRITE | CFB_F_SEAL_SEAL) {
            unsafe Syscall.unmap(address, byteCount: RingLayout.byteCount)
            throw fail("fcntl(F_ADD_SEALS)", errno)
        }
        let mapping = unsafe RingMapping(address: address, descriptor: fd, isWritable: true, role: role)
        let header = RingLayout.header(role: role)
        unsafe header.withUnsafeBytes { unsafe mapping.address.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        return mapping
    }

    /// Checks and maps a peer's ring file of `role` read-only. Takes ownership of `fd` (closed on failure).
    static func importing(_ fd: FileDescriptor, role: RingLayout.Role) throws(FrameBusError) -> RingMapping {
        func refuse(_ reason: String, errno: Errno? = nil) -> FrameBusError {
            Syscall.close(fd)
            return FrameBusError(.protocolViolation, "ring import", errno: errno, message: reason)
        }
        let seals: Int32
        switch Syscall.seals(fd) {
        case .success(let found): seals = found
        case .failure(let errno): throw refuse("not a sealable memfd", errno: errno)
        }
        let required = CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW
        guard seals & required == required, seals & (CFB_F_SEAL_FUTURE_WRITE | CFB_F_SEAL_WRITE) != 0 else {
            throw refuse("ring file seals 0x\(String(seals, radix: 16)) lack shrink, grow and write seals")
        }
        switch Syscall.fileSize(fd) {
        case .success(let info) where info.isRegular && info.byteCount >= RingLayout.byteCount: break
        case .success(let info): throw refuse("ring file of \(info.byteCount) bytes")
        case .failure(let errno): throw refuse("fstat", errno: errno)
        }
        let address: UnsafeMutableRawPointer
        switch unsafe Syscall.mapShared(fd, byteCount: RingLayout.byteCount, writable: false) {
        case .success(let mapped): unsafe address = mapped
        case .failure(let errno): throw refuse("mmap", errno: errno)
        }
        let mapping = unsafe RingMapping(address: address, descriptor: fd, isWritable: false, role: role)
        if let violation = RingLayout.checkHeader(mapping.copy(offset: 0, count: 16), role: role) {
            throw FrameBusError(.protocolViolation, "ring import", message: violation.description)
        }
        return mapping
    }

    private func counter(_ offset: Int) -> UnsafeAtomic<UInt64> {
        unsafe UnsafeAtomic<UInt64>(
            at: unsafe (address + offset).assumingMemoryBound(to: UInt64.AtomicRepresentation.self)
        )
    }

    /// Loads a header counter (sequentially consistent: the flag-then-recheck protocol of §9.5 needs it).
    package func load(_ offset: Int) -> UInt64 {
        counter(offset).load(ordering: .sequentiallyConsistent)
    }

    /// Stores a header counter of our own file.
    package func store(_ value: UInt64, _ offset: Int) {
        precondition(isWritable, "store into a peer's ring")
        counter(offset).store(value, ordering: .sequentiallyConsistent)
    }

    private func word(_ offset: Int) -> UnsafeAtomic<UInt32> {
        unsafe UnsafeAtomic<UInt32>(
            at: unsafe (address + offset).assumingMemoryBound(to: UInt32.AtomicRepresentation.self)
        )
    }

    /// Loads a 32-bit header word (sequentially consistent), e.g. the futex wake count (§9.8).
    package func load32(_ offset: Int) -> UInt32 {
        word(offset).load(ordering: .sequentiallyConsistent)
    }

    /// Stores a 32-bit header word of our own file.
    package func store32(_ value: UInt32, _ offset: Int) {
        precondition(isWritable, "store into a peer's ring")
        word(offset).store(value, ordering: .sequentiallyConsistent)
    }

    /// Adds 1 to a 32-bit header word of our own file (wrapping; sequentially consistent).
    package func increment32(_ offset: Int) {
        precondition(isWritable, "store into a peer's ring")
        word(offset).wrappingIncrement(ordering: .sequentiallyConsistent)
    }

    /// `FUTEX_WAKE` (shared) of one waiter on a 32-bit header word; false if the kernel refused (never blocks).
    func futexWake(_ offset: Int) -> Bool {
        unsafe Syscall.futexWake(unsafe (address + offset).assumingMemoryBound(to: UInt32.self), isPrivate: false)
    }

    /// Sleeps while the 32-bit header word at `offset` (this mapping, shared) still holds `seen` and `doorbell`'s
    /// word still holds `rang`, at most `timeoutNanoseconds` (`futex_waitv`, §9.8).
    func futexWait(_ offset: Int, seen: UInt32, doorbell: Doorbell, rang: UInt32, timeoutNanoseconds: Int64)
        -> FutexWaitOutcome
    {
        let result = unsafe Syscall.futexWaitTwo(
            shared: unsafe UnsafePointer((address + offset).assumingMemoryBound(to: UInt32.self)),
            sharedSeen: seen,
            local: unsafe doorbell.futexWord,
            localSeen: rang,
            timeoutNanoseconds: timeoutNanoseconds
        )
        switch result {
        case .success(0): return .woken
        case .success: return .doorbell
        case .failure(.resourceTemporarilyUnavailable), .failure(.interrupted): return .changed
        case .failure(.timedOut): return .timedOut
        case .failure(let errno): return .failed(errno)
        }
    }

    /// Copies bytes out of the mapping into private memory (one copy; the peer may rewrite them meanwhile).
    func copy(offset: Int, count: Int) -> [UInt8] {
        precondition(offset >= 0 && count >= 0 && offset + count <= RingLayout.byteCount)
        return unsafe [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            unsafe buffer.baseAddress!.initialize(repeating: 0, count: count)
            unsafe UnsafeMutableRawPointer(buffer.baseAddress!).copyMemory(
                from: unsafe address + offset,
                byteCount: count
            )
            initialized = count
        }
    }

    /// Copies slot `index % slotCount` into `slot`, private memory of ours reused for every slot read (one copy,
    /// without allocating). `slot` becomes `slotSize` bytes long.
    package func copySlot(_ index: UInt64, into slot: inout [UInt8]) {
        if slot.count != RingLayout.slotSize { slot = [UInt8](repeating: 0, count: RingLayout.slotSize) }
        let offset = RingLayout.headerSize + Int(index % UInt64(RingLayout.slotCount)) * RingLayout.slotSize
        unsafe slot.withUnsafeMutableBytes { destination in
            unsafe destination.baseAddress!.copyMemory(from: unsafe address + offset, byteCount: RingLayout.slotSize)
        }
    }

    /// Writes slot `index % slotCount` of our own file as ``RingLayout/slot(controlCount:message:)`` lays it out
    /// (header, message, zeros), straight into the mapping: no slot is made in private memory first.
    package func writeSlot(_ index: UInt64, controlCount: UInt64, message: [UInt8]) {
        precondition(isWritable && message.count <= RingLayout.maximumMessageLength)
        let slot = unsafe address + RingLayout.headerSize + Int(index % UInt64(RingLayout.slotCount)) * RingLayout.slotSize
        unsafe slot.storeBytes(
            of: controlCount.littleEndian,
            toByteOffset: RingLayout.slotControlCountOffset,
            as: UInt64.self
        )
        unsafe slot.storeBytes(
            of: UInt32(message.count).littleEndian,
            toByteOffset: RingLayout.slotLengthOffset,
            as: UInt32.self
        )
        unsafe slot.storeBytes(of: UInt32(0), toByteOffset: RingLayout.slotReservedOffset, as: UInt32.self)
        let body = unsafe slot + RingLayout.slotMessageOffset
        unsafe message.withUnsafeBytes { unsafe body.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        unsafe (body + message.count).initializeMemory(
            as: UInt8.self,
            repeating: 0,
            count: RingLayout.maximumMessageLength - message.count
        )
    }
}

/// How a `futex_waitv` sleep ended (docs/PROTOCOL.md §9.8).
enum FutexWaitOutcome: Equatable {
    /// The peer woke the ring word.
    case woken
    /// The doorbell word was woken.
    case doorbell
    /// A word had changed already, or a signal interrupted the sleep: look again.
    case changed
    /// The liveness interval passed.
    case timedOut
    case failed(Errno)
}

/// A wake-up channel (docs/PROTOCOL.md §9.5): a Unix datagram socket pair of ours, or the end of the peer's pair
/// that the peer sent us.
///
/// Ours: `socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK)`; we poll end A for `POLLIN` and drain it,
/// and end B travels to the peer with HELLO or WELCOME (the peer sends on it to wake us). We keep end B open in this
/// object until the channel dies, so the descriptor we send is valid for as long as the half or channel lives.
///
/// The peer's: its end B, accepted only if the kernel says it is an `AF_UNIX` `SOCK_DGRAM` socket; we send one byte
/// on it to wake the peer.
///
/// Why datagram sockets and not eventfds: an open file's `O_NONBLOCK` is shared by every process holding it, so a
/// peer can clear it between any check and our call. `send`/`recv` take `MSG_DONTWAIT` per call, which never
/// blocks whatever the shared flags say, so no peer can block the thread that signals or drains.
package final class WakeSocket: Sendable {
    /// The end we use: our end A (polled and drained), or the peer's end B (sent on).
    let descriptor: Int32
    /// Our end B, which travels to the peer; `nil` for the peer's.
    private let handedOut: Int32?

    private init(descriptor: Int32, handedOut: Int32?) {
        self.descriptor = descriptor
        self.handedOut = handedOut
    }

    deinit {
        Syscall.close(descriptor)
        if let handedOut { Syscall.close(handedOut) }
    }

    /// Our pair's end B, the descriptor to send with HELLO or WELCOME (ours only).
    var handedOutEnd: Int32 {
        guard let handedOut else { preconditionFailure("a peer's wake-up socket has no end to hand out") }
        return handedOut
    }

    /// Most datagrams one ``drain()`` reads, so one turn of the loop reads a bounded number; the publisher also
    /// budgets a subscriber's wake-ups over its session (``PublisherRings/wakeUpFlood()``, PROTOCOL.md §9.5).
    static let drainLimit = 1024

    static func create() throws(FrameBusError) -> WakeSocket {
        switch Syscall.makeDoorbellPair() {
        case .success(let (ownEnd, peerEnd)): return WakeSocket(descriptor: ownEnd, handedOut: peerEnd)
        case .failure(let errno): throw .systemCall("socketpair", errno)
        }
    }

    /// Checks a peer's descriptor (ownership moves here; closed on failure): a Unix datagram socket, connected, whose
    /// peer is unnamed (an end of a `socketpair(2)` that was never connected elsewhere: a socket connected to a bound
    /// name, a third party's, is refused) and, when `peerProcessID` is given, was made by that process (`SO_PEERCRED`
    /// of a socket pair's end names the process that called `socketpair`; it is the session socket's peer). So our
    /// wake-ups reach only a socket the session's peer made for us, never a third party (docs/PROTOCOL.md §9.1).
    static func importing(_ fd: FileDescriptor, peerProcessID: Int32? = nil) throws(FrameBusError) -> WakeSocket {
        let wake = WakeSocket(descriptor: fd.rawValue, handedOut: nil)
        func refuse(_ message: String) -> FrameBusError {
            FrameBusError(.protocolViolation, "ring import", message: message)
        }
        guard case .success(let domain) = Syscall.socketOption(fd.rawValue, SOL_SOCKET, SO_DOMAIN), domain == AF_UNIX,
            case .success(let type) = Syscall.socketOption(fd.rawValue, SOL_SOCKET, SO_TYPE),
            type == Int32(SOCK_DGRAM.rawValue)
        else {
            throw refuse("the wake-up descriptor is not a datagram socket")
        }
        switch Syscall.peerAddressLength(fd.rawValue) {
        case .success(MemoryLayout<sa_family_t>.size): break
        case .success:
            throw refuse("the wake-up socket is connected to a bound name, not to its socket pair's other end")
        case .failure(let errno):
            throw refuse("the wake-up socket has no peer (getpeername: \(errno))")
        }
        if let peerProcessID {
            guard case .success(let credentials) = Syscall.peerCredentials(fd.rawValue) else {
                throw refuse("the wake-up socket has no credentials")
            }
            guard credentials.pid == peerProcessID else {
                throw refuse(
                    "the wake-up socket pair was made by process \(credentials.pid), not by the peer \(peerProcessID)"
                )
            }
        }
        return wake
    }

    /// Wakes whoever polls the other end; false if the socket became unusable (closed, disconnected). Never blocks.
    package func signal() -> Bool {
        if case .success = Syscall.sendWake(descriptor) { return true }
        return false
    }

    /// Reads the pending wake-ups (at most `limit`) after a wake-up; false if the socket became unusable. Never
    /// blocks. A limit of 1 costs one `recv` per wake-up; a wake-up left unread only makes the next `poll` return at
    /// once.
    func drain(limit: Int = drainLimit) -> Bool {
        drainCounting(limit: limit) != nil
    }

    /// Reads the pending wake-ups like ``drain(limit:)``; how many it read, or nil if the socket became unusable.
    func drainCounting(limit: Int = drainLimit) -> Int? {
        if case .success(let count) = Syscall.drainWake(descriptor, limit: limit) { return count }
        return nil
    }
}
