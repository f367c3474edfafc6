/// FourCC helpers for log text.
enum FourCC {
    /// `'420v'` for `0x34323076`; hex for codes that are not printable ASCII (peer values are untrusted).
    static func name(_ code: UInt32) -> String {
        let bytes = (0..<4).map { UInt8(truncatingIfNeeded: code >> (24 - 8 * $0)) }
        guard bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return "0x" + String(code, radix: 16) }
        return String(decoding: bytes, as: UTF8.self)
    }
}
