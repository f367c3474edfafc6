/// Appends little-endian integers to a byte array (the wire byte order, docs/PROTOCOL.md §1).
struct WireWriter {
    private(set) var bytes: [UInt8]

    init(capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// A writer into `storage`'s buffer (emptied, its capacity kept); `storage` is left empty until ``finish()``'s
    /// result is stored back.
    init(reusing storage: inout [UInt8]) {
        bytes = []
        swap(&bytes, &storage)
        bytes.removeAll(keepingCapacity: true)
    }

    mutating func write<T: FixedWidthInteger>(_ value: T) {
        var little = value.littleEndian
        for _ in 0..<(T.bitWidth / 8) {
            bytes.append(UInt8(truncatingIfNeeded: little))
            little >>= 8
        }
    }

    mutating func write(bytes more: some Sequence<UInt8>) { bytes.append(contentsOf: more) }

    /// Writes the common header with a placeholder length, fixed by ``finish()``.
    mutating func writeHeader(_ type: WireMessageType) {
        write(type.rawValue)
        write(UInt16(0))
        write(UInt32(0))
    }

    /// Stores the final length into the header and returns the datagram.
    mutating func finish() -> [UInt8] {
        let length = UInt32(bytes.count)
        for index in 0..<4 { bytes[4 + index] = UInt8(truncatingIfNeeded: length >> (8 * UInt32(index))) }
        return bytes
    }
}

/// Reads little-endian integers from a datagram, bounds-checked: reading past the end throws.
struct WireReader {
    let bytes: [UInt8]
    private(set) var offset: Int

    init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    var remaining: Int { bytes.count - offset }

    mutating func read<T: FixedWidthInteger>(_ type: T.Type = T.self) throws(WireError) -> T {
        let size = T.bitWidth / 8
        guard remaining >= size else { throw WireError(.truncated, "need \(size) bytes at offset \(offset)") }
        var value: T = 0
        for index in 0..<size { value |= T(truncatingIfNeeded: bytes[offset + index]) << (8 * index) }
        offset += size
        return value
    }

    mutating func readBytes(_ count: Int) throws(WireError) -> ArraySlice<UInt8> {
        guard count >= 0, remaining >= count else {
            throw WireError(.truncated, "need \(count) bytes at offset \(offset)")
        }
        defer { offset += count }
        return bytes[offset..<(offset + count)]
    }

    /// Reads a reserved field and insists that it is zero.
    mutating func readReserved<T: FixedWidthInteger>(_ type: T.Type, _ field: String) throws(WireError) {
        let value: T = try read()
        guard value == 0 else { throw WireError(.invalidField, "\(field) must be 0, is \(value)") }
    }
}

/// Why a datagram could not be decoded. Peers see it as a ``FrameBusError`` with code
/// ``FrameBusError/Code-swift.struct/protocolViolation`` and this as the message.
package struct WireError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kinds of decoding failure.
    public enum Kind: String, Hashable, Sendable {
        case truncated = "truncated message"
        case wrongLength = "wrong length"
        case unknownType = "unknown message type"
        case unsupportedVersion = "unsupported protocol version"
        case badMagic = "bad magic"
        case invalidField = "invalid field"
        case unexpectedDescriptors = "unexpected file descriptors"
        case missingDescriptor = "missing file descriptor"
        case oversized = "oversized message"
        case unexpectedMessage = "unexpected message"
    }

    /// What was wrong.
    public let kind: Kind
    /// Which field or size.
    public let detail: String

    init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    public var description: String { "\(kind.rawValue): \(detail)" }

    /// The ERROR code a receiver answers with (docs/PROTOCOL.md §8): `unsupportedVersion` for a bad magic or an
    /// unknown version, `malformedMessage` for everything else.
    public var errorCode: WireErrorCode {
        kind == .unsupportedVersion || kind == .badMagic ? .unsupportedVersion : .malformedMessage
    }

    func busError(_ operation: String) -> FrameBusError {
        FrameBusError(code: .protocolViolation, operation: operation, message: description)
    }
}
