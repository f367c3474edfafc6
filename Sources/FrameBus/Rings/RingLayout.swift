/// Protocol version 3's shared-memory rings (docs/PROTOCOL.md §9): the byte layout both sides agree on, and the
/// pure checks every value read from a peer's ring goes through before it bounds anything.
///
/// Each side of a version-3 session owns one ring file (a sealed memfd) that only it can write; the other side maps
/// it read-only. The publisher's file carries the *announce* ring (FRAME and DROP messages for this subscriber); the
/// subscriber's carries the *release* ring (RELEASE messages). Each file's header also holds how far its owner has
/// read the other side's ring and whether its owner is going to sleep.
package enum RingLayout {
    /// `'FBRG'` as a FourCC, at offset 0 of every ring file.
    public static let magic: UInt32 = 0x4642_5247
    /// The protocol version the layout belongs to.
    public static let version: UInt16 = 3

    /// Which ring a file carries.
    public enum Role: UInt16, Sendable {
        /// The publisher's: FRAME and DROP messages for one subscriber.
        case announce = 1
        /// The subscriber's: RELEASE messages.
        case release = 2
    }

    /// Slots per ring (a power of two).
    public static let slotCount = 256
    /// Bytes per slot.
    public static let slotSize = 128
    /// Bytes before the first slot (one page: the header's counters each sit on their own cache line).
    public static let headerSize = 4096
    /// Bytes of a ring file: the header and the slots.
    public static let byteCount = headerSize + slotCount * slotSize

    // Header offsets (each u64 counter on its own 64-byte cache line).
    public static let magicOffset = 0
    public static let versionOffset = 4
    public static let roleOffset = 6
    public static let slotCountOffset = 8
    public static let slotSizeOffset = 12
    /// u64: messages the owner has written into its ring (slot `n % slotCount` holds message `n`).
    public static let tailOffset = 64
    /// u64: messages of the *other* side's ring the owner has read (and so the other side may overwrite).
    public static let peerHeadOffset = 128
    /// u64: 1 while the owner is (about to be) asleep waiting for the other side's messages.
    public static let sleepingOffset = 192
    /// u64: 1 while the owner waits for room in its own ring (the other side must wake it when it reads).
    public static let wantsRoomOffset = 256
    /// u32, written once before the file is shared (§9.8): the release ring's bit 0 says its owner (the subscriber)
    /// can be woken by a futex; the announce ring's bit 0 says the publisher will wake this subscriber that way.
    public static let wakeKindsOffset = 16
    /// Bit 0 of ``wakeKindsOffset``: futex wake-ups.
    public static let futexWakeKind: UInt32 = 1
    /// u32, announce ring of a futex-woken session only (§9.8): the publisher adds 1 before every wake-up; the
    /// subscriber sleeps on this word (`futex_waitv`).
    public static let wakeCountOffset = 320
    /// u64, announce ring of a futex-woken session only (§9.8): socket messages the publisher sent after WELCOME
    /// (so a woken subscriber knows whether its socket has something to read).
    public static let controlSentOffset = 384

    // Slot offsets.
    /// u64: socket messages the owner had sent on the connection after WELCOME before it wrote this slot.
    public static let slotControlCountOffset = 0
    /// u32: bytes of the message at `slotMessageOffset`.
    public static let slotLengthOffset = 8
    /// u32: 0.
    public static let slotReservedOffset = 12
    /// The message, encoded exactly as on the socket (docs/PROTOCOL.md §5).
    public static let slotMessageOffset = 16
    /// The longest message a slot holds.
    public static let maximumMessageLength = slotSize - slotMessageOffset

    /// The header an owner writes before sharing its file.
    public static func header(role: Role) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 16)
        store(magic, at: magicOffset, in: &bytes)
        store(version, at: versionOffset, in: &bytes)
        store(role.rawValue, at: roleOffset, in: &bytes)
        store(UInt32(slotCount), at: slotCountOffset, in: &bytes)
        store(UInt32(slotSize), at: slotSizeOffset, in: &bytes)
        return bytes
    }

    /// Checks the first 16 bytes of a peer's ring file (copied into private memory).
    public static func checkHeader(_ bytes: [UInt8], role: Role) -> RingViolation? {
        guard bytes.count >= 16 else { return RingViolation("ring header of \(bytes.count) bytes") }
        let foundMagic: UInt32 = load(at: magicOffset, in: bytes)
        let foundVersion: UInt16 = load(at: versionOffset, in: bytes)
        let foundRole: UInt16 = load(at: roleOffset, in: bytes)
        let count: UInt32 = load(at: slotCountOffset, in: bytes)
        let size: UInt32 = load(at: slotSizeOffset, in: bytes)
        guard foundMagic == magic, foundVersion == version, foundRole == role.rawValue,
            count == UInt32(slotCount), size == UInt32(slotSize)
        else {
            return RingViolation(
                "ring header magic 0x\(String(foundMagic, radix: 16)) version \(foundVersion) role \(foundRole) "
                    + "slots \(count)×\(size)"
            )
        }
        return nil
    }

    /// How many messages a reader whose private head is `head` may read when the writer's tail says `tail`: the tail
    /// must be at most `slotCount` ahead of the head (wrapping arithmetic, so no value can trap).
    public static func readable(head: UInt64, tail: UInt64) -> Result<Int, RingViolation> {
        let distance = tail &- head
        guard distance <= UInt64(slotCount) else {
            return .failure(RingViolation("ring tail \(tail) is not within \(slotCount) of head \(head)"))
        }
        return .success(Int(distance))
    }

    /// How many slots a writer that wrote `written` messages may fill when the reader says it read `peerHead`, having
    /// said `lastPeerHead` before: the reader's head only moves forward and never passes what was written.
    public static func room(written: UInt64, peerHead: UInt64, lastPeerHead: UInt64) -> Result<Int, RingViolation> {
        guard peerHead &- lastPeerHead <= written &- lastPeerHead else {
            return .failure(
                RingViolation("peer head \(peerHead) outside \(lastPeerHead)…\(written)")
            )
        }
        let used = written &- peerHead
        guard used <= UInt64(slotCount) else {
            return .failure(RingViolation("peer head \(peerHead) more than \(slotCount) behind \(written)"))
        }
        return .success(slotCount - Int(used))
    }

    /// One slot's bytes for `message` (an encoded FRAME, DROP or RELEASE).
    public static func slot(controlCount: UInt64, message: [UInt8]) -> [UInt8] {
        precondition(message.count <= maximumMessageLength, "message too long for a ring slot")
        var bytes = [UInt8](repeating: 0, count: slotSize)
        store(controlCount, at: slotControlCountOffset, in: &bytes)
        store(UInt32(message.count), at: slotLengthOffset, in: &bytes)
        for (index, byte) in message.enumerated() { bytes[slotMessageOffset + index] = byte }
        return bytes
    }

    /// Reads one slot copied into private memory: its control count and its message bytes (decoded and checked by
    /// ``WireMessage/decode(_:descriptorCount:)`` next).
    public static func entry(_ slot: [UInt8]) -> Result<RingEntry, RingViolation> {
        guard slot.count == slotSize else { return .failure(RingViolation("slot of \(slot.count) bytes")) }
        let controlCount: UInt64 = load(at: slotControlCountOffset, in: slot)
        let length: UInt32 = load(at: slotLengthOffset, in: slot)
        let reserved: UInt32 = load(at: slotReservedOffset, in: slot)
        guard reserved == 0 else { return .failure(RingViolation("slot reserved 0x\(String(reserved, radix: 16))")) }
        guard length >= UInt32(WireProtocol.headerSize), length <= UInt32(maximumMessageLength) else {
            return .failure(RingViolation("slot message length \(length)"))
        }
        let start = slotMessageOffset
        return .success(RingEntry(controlCount: controlCount, message: Array(slot[start..<start + Int(length)])))
    }

    static func store<T: FixedWidthInteger>(_ value: T, at offset: Int, in bytes: inout [UInt8]) {
        var remaining = value.littleEndian
        for index in 0..<MemoryLayout<T>.size {
            bytes[offset + index] = UInt8(truncatingIfNeeded: remaining)
            remaining = remaining >> 8
        }
    }

    static func load<T: FixedWidthInteger>(at offset: Int, in bytes: [UInt8]) -> T {
        var value: T = 0
        for index in (0..<MemoryLayout<T>.size).reversed() {
            value = (value << 8) | T(bytes[offset + index])
        }
        return value
    }
}

/// One message read from a ring.
package struct RingEntry: Hashable, Sendable {
    /// Socket messages the writer had sent after WELCOME before this one (docs/PROTOCOL.md §9.4).
    public var controlCount: UInt64
    /// The message, as it would travel on the socket.
    public var message: [UInt8]
}

/// A ring value the peer wrote that breaks docs/PROTOCOL.md §9: the session ends with ERROR `malformedMessage`.
package struct RingViolation: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
