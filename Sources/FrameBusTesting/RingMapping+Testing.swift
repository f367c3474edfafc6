import FrameBus

/// What only tests and hostile peers do with a ring file: write any bytes anywhere in our own file, and copy a slot
/// into a new array. Built from the shipping module's 64-bit header stores and its slot copy, so FrameBus itself keeps
/// no member that only tests call.
extension RingMapping {
    /// Writes arbitrary bytes at `offset` of our own file (hostile peers and fuzzers only), as whole 64-bit words: a
    /// word only partly covered keeps its other bytes. Traps for a range outside the file or a peer's file.
    package func scribble(offset: Int, _ bytes: [UInt8]) {
        precondition(offset >= 0 && offset + bytes.count <= RingLayout.byteCount, "scribble outside the ring file")
        guard !bytes.isEmpty else { return }
        var word = offset & ~7
        while word < offset + bytes.count {
            // Byte `index` of the word in memory is bits 8 × index of its little-endian value.
            var value = load(word).littleEndian
            for index in 0..<8 where (offset..<(offset + bytes.count)).contains(word + index) {
                let shift = UInt64(8 * index)
                value = value & ~(0xFF << shift) | UInt64(bytes[word + index - offset]) << shift
            }
            store(UInt64(littleEndian: value), word)
            word += 8
        }
    }

    /// Writes slot `index % slotCount` of our own file with exactly `bytes` (`slotSize` of them, any content).
    package func writeSlot(_ index: UInt64, _ bytes: [UInt8]) {
        precondition(bytes.count == RingLayout.slotSize, "a slot is \(RingLayout.slotSize) bytes")
        let slot = Int(index % UInt64(RingLayout.slotCount))
        scribble(offset: RingLayout.headerSize + slot * RingLayout.slotSize, bytes)
    }

    /// Copies slot `index % slotCount` into a new array of private memory.
    package func copySlot(_ index: UInt64) -> [UInt8] {
        var slot: [UInt8] = []
        copySlot(index, into: &slot)
        return slot
    }
}
