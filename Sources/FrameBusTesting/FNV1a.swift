/// FNV-1a, 64-bit: the hash the tests, the test peer and the C test programs (Tests/CABI/common.h's `hash_rows`)
/// compute over a frame's packed image bytes to show it arrived bit-exact. One definition, so the three agree.
public func fnv1a(_ bytes: [UInt8]) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes {
        hash ^= UInt64(byte)
        hash = hash &* 0x100_0000_01b3
    }
    return hash
}
