/// How one component of one tile is stored (the `mode` byte of its table entry).
enum TileMode: UInt8, Sendable, CaseIterable {
    /// The samples as they are (for BGRA after subtract-green), little-endian.
    case raw = 0
    /// Every sample equal: one sample.
    case solid = 1
    /// The raw samples through LZ4 (screen content).
    case lz4 = 2
    /// 8-bit samples: "up" prediction (left in the first row), zig-zag residuals in blocks of 16, each block
    /// bit-packed at its own width (0...8). Widths come first, one nibble per block (low nibble first).
    case packed8 = 3
    /// 16-bit samples whose 6 low padding bits are all zero: the same on the 10-bit values (widths 0...10).
    case packed10 = 4
    /// 16-bit samples with padding bits set: the same on all 16 bits (width nibble 15 means 16).
    case packed16 = 5

    func isValid(bytesPerSample: Int) -> Bool {
        switch self {
        case .raw, .solid, .lz4: true
        case .packed8: bytesPerSample == 1
        case .packed10, .packed16: bytesPerSample == 2
        }
    }
}

/// Encoding and decoding of one component of one tile held as contiguous samples (width × height, row-major).
///
/// Residual blocks run over the samples in row-major order, so a block may span two rows; the last block is
/// padded with zero residuals. A block of 16 samples at width w takes exactly 2·w bytes, so blocks stay
/// byte-aligned: 8 samples are packed into one w-byte group with a single wide store.
enum ComponentCodec {
    /// The encoder's choice: where the payload is and how long it is.
    @unsafe struct Choice {
        var mode: TileMode
        var payload: UnsafeRawPointer
        var byteCount: Int
    }

    // MARK: 8-bit

    @inline(__always) static func zigzag8(_ d: UInt8) -> UInt8 {
        (d &<< 1) ^ UInt8(bitPattern: Int8(bitPattern: d) &>> 7)
    }

    @inline(__always) static func unzigzag8(_ z: UInt8) -> UInt8 {
        (z &>> 1) ^ (0 &- (z & 1))
    }

    /// Encodes 8-bit samples. `residuals`, `packed` and `alternative` are scratch slots of the grid's stride.
    static func encode8(
        samples s: UnsafeMutablePointer<UInt8>, width: Int, height: Int,
        residuals r: UnsafeMutablePointer<UInt8>, packed out: UnsafeMutableRawPointer,
        alternative alt: UnsafeMutableRawPointer
    ) -> Choice {
        let n = width &* height
        // Solid?
        let first = unsafe s[0]
        var difference: UInt8 = 0
        for i in 0..<n { difference |= unsafe s[i] ^ first }
        if difference == 0 {
            unsafe out.storeBytes(of: first, as: UInt8.self)
            return unsafe Choice(mode: .solid, payload: UnsafeRawPointer(out), byteCount: 1)
        }
        // Residuals: left in the first row, up below. Both loops are flat, so they vectorise.
        unsafe r[0] = zigzag8(s[0])
        for i in 1..<width { unsafe r[i] = zigzag8(s[i] &- s[i &- 1]) }
        if height > 1 {
            let above = unsafe UnsafePointer(s)
            let current = unsafe UnsafePointer(s + width)
            let residual = unsafe r + width
            for i in 0..<(n &- width) { unsafe residual[i] = zigzag8(current[i] &- above[i]) }
        }
        let blockCount = (n &+ 15) / 16
        for i in n..<blockCount &* 16 { unsafe r[i] = 0 }
        // Widths (nibbles) and the exact packed size, before packing anything.
        let nibbleBytes = (blockCount &+ 1) / 2
        var total = nibbleBytes
        var zeroBlocks = 0
        let nibbles = unsafe out.assumingMemoryBound(to: UInt8.self)
        for i in 0..<nibbleBytes { unsafe nibbles[i] = 0 }
        for block in 0..<blockCount {
            let p = unsafe UnsafeRawPointer(r + block &* 16)
            let bits = unsafe p.loadUnaligned(as: UInt64.self) | p.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
            // The width of the widest residual: OR the 16 bytes of both words into one byte.
            var folded = bits | bits &>> 32
            folded |= folded &>> 16
            folded |= folded &>> 8
            let w = 8 &- UInt8(truncatingIfNeeded: folded).leadingZeroBitCount
            zeroBlocks &+= w == 0 ? 1 : 0
            unsafe nibbles[block &>> 1] |= UInt8(truncatingIfNeeded: w) &<< ((block & 1) &* 4)
            total &+= 2 &* w
        }
        let rawBytes = n
        var best = unsafe Choice(mode: .raw, payload: UnsafeRawPointer(s), byteCount: rawBytes)
        // LZ4 only where many residual blocks are zero (flat or repetitive screen content): it is slow and poor
        // on photographs. It must beat the packed size, which is known exactly without packing.
        if zeroBlocks &* lz4ZeroBlockDivisor >= blockCount {
            let written = unsafe LZ4Block.compress(s, count: rawBytes, into: alt, capacity: min(total, rawBytes) &- 1)
            if written > 0 { return unsafe Choice(mode: .lz4, payload: UnsafeRawPointer(alt), byteCount: written) }
        }
        if total < rawBytes {
            unsafe pack8(r, blockCount: blockCount, nibbles: nibbles, into: out + nibbleBytes)
            unsafe best = Choice(mode: .packed8, payload: UnsafeRawPointer(out), byteCount: total)
        }
        return unsafe best
    }

    /// LZ4 is tried when at least 1/divisor of the residual blocks are zero.
    static let lz4ZeroBlockDivisor = 4

    /// Packs residual blocks at their widths: per 8 samples one w-byte group, written as one 8-byte store.
    @inline(__always)
    static func pack8(
        _ r: UnsafeMutablePointer<UInt8>, blockCount: Int, nibbles: UnsafeMutablePointer<UInt8>,
        into out: UnsafeMutableRawPointer
    ) {
        var position = 0
        for block in 0..<blockCount {
            let w = UInt64(unsafe (nibbles[block &>> 1] &>> ((block & 1) &* 4)) & 15)
            let base = unsafe r + block &* 16
            let v0 = compact8(unsafe UnsafeRawPointer(base).loadUnaligned(as: UInt64.self), w)
            let v1 = compact8(unsafe UnsafeRawPointer(base).loadUnaligned(fromByteOffset: 8, as: UInt64.self), w)
            unsafe out.storeBytes(of: v0, toByteOffset: position, as: UInt64.self)
            unsafe out.storeBytes(of: v1, toByteOffset: position &+ Int(w), as: UInt64.self)
            position &+= 2 &* Int(w)
        }
    }

    /// Packs 8 bytes, each below 2^w, into the low 8·w bits (byte i at bit w·i), branch-free (SWAR: pairs of
    /// bytes, then pairs of 16-bit lanes, then the two 32-bit halves).
    @inline(__always)
    static func compact8(_ bytes: UInt64, _ w: UInt64) -> UInt64 {
        let lanes8: UInt64 = 0x00FF_00FF_00FF_00FF
        let lanes16: UInt64 = 0x0000_FFFF_0000_FFFF
        let pairs = (bytes & lanes8) | ((bytes &>> 8) & lanes8) &<< w
        let quads = (pairs & lanes16) | ((pairs &>> 16) & lanes16) &<< (2 &* w)
        return (quads & 0xFFFF_FFFF) | (quads &>> 32) &<< (4 &* w)
    }

    /// The inverse of ``compact8(_:_:)``: 8 fields of w bits into 8 bytes; bits above 8·w are ignored.
    @inline(__always)
    static func spread8(_ packed: UInt64, _ w: UInt64) -> UInt64 {
        let mask4 = (UInt64(1) &<< (4 &* w)) &- 1  // w = 8 gives 2^32 - 1, as wanted
        let halves = (packed & mask4) | ((packed &>> (4 &* w)) & mask4) &<< 32
        let mask2 = ((UInt64(1) &<< (2 &* w)) &- 1) &* 0x0000_0001_0000_0001
        let quads = (halves & mask2) | ((halves &>> (2 &* w)) & mask2) &<< 16
        let mask1 = ((UInt64(1) &<< w) &- 1) &* 0x0001_0001_0001_0001
        return (quads & mask1) | ((quads &>> w) & mask1) &<< 8
    }

    /// Decodes an 8-bit packed payload into `x` (capacity: n rounded up to 16). Returns false if the payload
    /// is not exactly the packed form of `width × height` samples.
    static func decodePacked8(
        _ payload: UnsafeRawPointer, count: Int, width: Int, height: Int, into x: UnsafeMutablePointer<UInt8>
    ) -> Bool {
        let n = width &* height
        let blockCount = (n &+ 15) / 16
        let nibbleBytes = (blockCount &+ 1) / 2
        guard count >= nibbleBytes else { return false }
        let nibbles = unsafe payload.assumingMemoryBound(to: UInt8.self)
        var total = nibbleBytes
        var widest: UInt8 = 0
        for i in 0..<nibbleBytes {
            let pair = unsafe nibbles[i]
            widest = max(widest, pair & 15, pair &>> 4)
            total &+= 2 &* Int(pair & 15) &+ 2 &* Int(pair &>> 4)
        }
        // An odd block count leaves the last high nibble unused: it must be zero.
        if blockCount & 1 == 1 { guard unsafe nibbles[nibbleBytes &- 1] &>> 4 == 0 else { return false } }
        guard widest <= 8, total == count else { return false }
        var position = nibbleBytes
        var block = 0
        // Blocks whose 16 bytes lie inside the payload load directly; the last few go through load64.
        while block < blockCount {
            let w = UInt64(unsafe (nibbles[block &>> 1] &>> ((block & 1) &* 4)) & 15)
            let v0: UInt64
            let v1: UInt64
            if position &+ 16 <= count {
                v0 = unsafe payload.loadUnaligned(fromByteOffset: position, as: UInt64.self)
                v1 = unsafe payload.loadUnaligned(fromByteOffset: position &+ Int(w), as: UInt64.self)
            } else {
                v0 = unsafe load64(payload, at: position, count: count)
                v1 = unsafe load64(payload, at: position &+ Int(w), count: count)
            }
            let base = unsafe UnsafeMutableRawPointer(x + block &* 16)
            unsafe base.storeBytes(of: spread8(v0, w), as: UInt64.self)
            unsafe base.storeBytes(of: spread8(v1, w), toByteOffset: 8, as: UInt64.self)
            position &+= 2 &* Int(w)
            block &+= 1
        }
        // Undo the prediction in place: a running sum along the first row, then each row plus the one above.
        var previous: UInt8 = 0
        for i in 0..<width {
            previous = unsafe previous &+ unzigzag8(x[i])
            unsafe x[i] = previous
        }
        if height > 1 {
            for row in 1..<height {
                let above = unsafe UnsafePointer(x + (row &- 1) &* width)
                let current = unsafe x + row &* width
                for i in 0..<width { unsafe current[i] = unzigzag8(current[i]) &+ above[i] }
            }
        }
        return true
    }

    /// Loads 8 bytes at `offset`, zero-filling past `count` (the payload end), so no read leaves the payload.
    @inline(__always)
    static func load64(_ p: UnsafeRawPointer, at offset: Int, count: Int) -> UInt64 {
        if offset + 8 <= count { return unsafe p.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }
        var v: UInt64 = 0
        var i = 0
        while offset + i < count {
            v |= UInt64(unsafe p.load(fromByteOffset: offset + i, as: UInt8.self)) &<< UInt64(8 * i)
            i += 1
        }
        return v
    }

    @inline(__always)
    static func load128(_ p: UnsafeRawPointer, at offset: Int, count: Int) -> UInt128 {
        if offset + 16 <= count { return unsafe p.loadUnaligned(fromByteOffset: offset, as: UInt128.self) }
        let low = unsafe load64(p, at: offset, count: count)
        let high = offset + 8 < count ? unsafe load64(p, at: offset + 8, count: count) : 0
        return UInt128(low) | UInt128(high) &<< 64
    }

    // MARK: 16-bit

    /// Encodes 16-bit samples: packed10 when every padding bit is zero, otherwise packed16.
    static func encode16(
        samples s: UnsafeMutablePointer<UInt16>, width: Int, height: Int,
        residuals r: UnsafeMutablePointer<UInt16>, packed out: UnsafeMutableRawPointer,
        alternative alt: UnsafeMutableRawPointer
    ) -> Choice {
        let n = width * height
        let first = unsafe s[0]
        var difference: UInt16 = 0
        var padding: UInt16 = 0
        for i in 0..<n {
            let v = unsafe s[i]
            difference |= v ^ first
            padding |= v
        }
        if difference == 0 {
            unsafe out.storeBytes(of: first.littleEndian, as: UInt16.self)
            return unsafe Choice(mode: .solid, payload: UnsafeRawPointer(out), byteCount: 2)
        }
        let tenBit = padding & 0x3F == 0
        let down: UInt16 = tenBit ? 6 : 0  // value shift
        let signShift: Int16 = tenBit ? 6 : 0  // sign-extends a 10-bit difference
        @inline(__always) func residual(_ x: UInt16, _ p: UInt16) -> UInt16 {
            let d = Int16(bitPattern: ((x &>> down) &- (p &>> down)) &<< UInt16(signShift)) &>> signShift
            return UInt16(bitPattern: (d &<< 1) ^ (d &>> 15))
        }
        var previous: UInt16 = 0
        for i in 0..<width {
            let x = unsafe s[i]
            unsafe r[i] = residual(x, previous)
            previous = x
        }
        if height > 1 {
            for i in width..<n { unsafe r[i] = residual(s[i], s[i - width]) }
        }
        let blockCount = (n + 15) / 16
        for i in n..<blockCount * 16 { unsafe r[i] = 0 }
        let nibbleBytes = (blockCount + 1) / 2
        var total = nibbleBytes
        var zeroBlocks = 0
        let nibbles = unsafe out.assumingMemoryBound(to: UInt8.self)
        for i in 0..<nibbleBytes { unsafe nibbles[i] = 0 }
        for block in 0..<blockCount {
            var bits: UInt16 = 0
            for i in 0..<16 { bits |= unsafe r[block * 16 + i] }
            var w = 16 - bits.leadingZeroBitCount
            if w == 0 { zeroBlocks += 1 }
            if w == 15 { w = 16 }  // nibble 15 stands for 16
            unsafe nibbles[block >> 1] |= UInt8(min(w, 15)) &<< ((block & 1) &* 4)
            total += 2 * w
        }
        let rawBytes = 2 * n
        var best = unsafe Choice(mode: .raw, payload: UnsafeRawPointer(s), byteCount: rawBytes)
        if total < rawBytes {
            var position = nibbleBytes
            for block in 0..<blockCount {
                var w = Int(unsafe (nibbles[block >> 1] &>> ((block & 1) &* 4)) & 15)
                if w == 15 { w = 16 }
                for group in 0..<2 {
                    let base = unsafe r + block * 16 + group * 8
                    var v: UInt128 = 0
                    for i in 0..<8 { v |= UInt128(unsafe base[i]) &<< (w &* i) }
                    unsafe out.storeBytes(of: v, toByteOffset: position, as: UInt128.self)
                    position += w
                }
            }
            unsafe best = Choice(mode: tenBit ? .packed10 : .packed16, payload: UnsafeRawPointer(out), byteCount: total)
        }
        if zeroBlocks * 8 >= blockCount {
            let written = unsafe LZ4Block.compress(s, count: rawBytes, into: alt, capacity: best.byteCount - 1)
            if written > 0 { unsafe best = Choice(mode: .lz4, payload: UnsafeRawPointer(alt), byteCount: written) }
        }
        return unsafe best
    }

    /// Decodes a packed10 or packed16 payload into `x` (capacity: n rounded up to 16).
    static func decodePacked16(
        _ payload: UnsafeRawPointer, count: Int, tenBit: Bool, width: Int, height: Int,
        into x: UnsafeMutablePointer<UInt16>
    ) -> Bool {
        let n = width * height
        let blockCount = (n + 15) / 16
        let nibbleBytes = (blockCount + 1) / 2
        guard count >= nibbleBytes else { return false }
        let maximumWidth = tenBit ? 10 : 16
        var total = nibbleBytes
        for block in 0..<blockCount {
            var w = Int(unsafe (payload.load(fromByteOffset: block >> 1, as: UInt8.self) &>> ((block & 1) &* 4)) & 15)
            if w == 15 { w = 16 }
            guard w <= maximumWidth else { return false }
            total += 2 * w
        }
        guard total == count else { return false }
        var position = nibbleBytes
        for block in 0..<blockCount {
            var w = Int(unsafe (payload.load(fromByteOffset: block >> 1, as: UInt8.self) &>> ((block & 1) &* 4)) & 15)
            if w == 15 { w = 16 }
            let mask: UInt128 = (1 &<< UInt128(w)) &- 1
            for group in 0..<2 {
                let v = unsafe load128(payload, at: position, count: count)
                let base = unsafe x + block * 16 + group * 8
                for i in 0..<8 { unsafe base[i] = UInt16(truncatingIfNeeded: (v &>> (w &* i)) & mask) }
                position += w
            }
        }
        let valueMask: UInt16 = tenBit ? 0x3FF : 0xFFFF
        let up: UInt16 = tenBit ? 6 : 0
        @inline(__always) func undo(_ z: UInt16, _ p: UInt16) -> UInt16 {
            let d = (z &>> 1) ^ (0 &- (z & 1))
            return (((p &>> up) &+ d) & valueMask) &<< up
        }
        var previous: UInt16 = 0
        for i in 0..<width {
            previous = unsafe undo(x[i], previous)
            unsafe x[i] = previous
        }
        for row in 1..<max(height, 1) {
            let above = unsafe x + (row - 1) * width
            let current = unsafe x + row * width
            for i in 0..<width { unsafe current[i] = undo(current[i], above[i]) }
        }
        return true
    }
}
