/// FourCC text for logs and error messages: the one printer of the Swift library (the C ABI's messages use it too).
package enum FourCC {
    /// `420v` for `0x34323076`; hex (`0x1f000000`) when any byte is not printable ASCII, since the code may come from
    /// a peer.
    package static func name(_ code: UInt32) -> String {
        text(code) ?? hex(code)
    }

    /// `'420v'`: ``name(_:)`` in quotes when it is text, hex unquoted otherwise.
    package static func quotedName(_ code: UInt32) -> String {
        text(code).map { "'" + $0 + "'" } ?? hex(code)
    }

    private static func text(_ code: UInt32) -> String? {
        let bytes = (0..<4).map { UInt8(truncatingIfNeeded: code >> (24 - 8 * $0)) }
        guard bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hex(_ code: UInt32) -> String { "0x" + String(code, radix: 16) }
}
