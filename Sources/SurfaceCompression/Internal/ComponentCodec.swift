/// How one component of one tile is stored (the `mode` byte of its table entry).
enum TileMode: UInt8, Sendable, CaseIterable {
    /// The samples as they are (for BGRA after subtract-green), little-endian.
    case raw = 0
    /// Every sample equal: one sample.
    case solid = 1
    /// The raw samples through LZ4 (screen content).
    case lz4 = 2
    /// 8-bit samples: "up" or "left" prediction per block of 8 samples within a row (left throughout the first
    /// row), zig-zag residuals, each block bit-packed at its own width (0...8). Widths come first, one nibble per
    /// block (low nibble first), then one predictor bit per block (see ``ComponentCodec/encode8``).
    case packed8 = 3
    /// 16-bit samples whose 6 low padding bits are all zero: the same on the 10-bit values (widths 0...10).
    case packed10 = 4
    /// 16-bit samples with padding bits set: the same on all 16 bits (width nibble 15 means 16).
    case packed16 = 5
    /// A packed8 payload through LZ4 (layout version 3): screen content, where most residual blocks are zero and
    /// the width nibbles repeat in long runs that LZ4 folds away, while the prediction keeps what LZ4 alone
    /// cannot (gradients, anti-aliased edges, text repeated at another brightness).
    case packed8LZ4 = 6
    /// A packed10 payload through LZ4 (layout version 4): packed8LZ4 for 10-bit screen content (x420, xf20).
    case packed10LZ4 = 7
    /// A packed16 payload through LZ4 (layout version 4): the same for 16-bit samples with padding bits set.
    case packed16LZ4 = 8
    /// A packed8 payload through LZ4 whose matches may reach into the packed8 payload of the same component of the
    /// tile above (layout version 5): screen content repeats across the 64-row bands, which restart LZ4's window.
    /// The dictionary is the tile above's inner payload (its packed payload, or its samples for raw, solid, lz4
    /// and lz4Up), and chains restart every ``TileMode/chainRows`` tile rows (docs/COMPRESSED-LAYOUT.md §6.5).
    case packed8LZ4Up = 9
    /// packed10LZ4 with the packed10 payload of the tile above as LZ4 dictionary (layout version 5).
    case packed10LZ4Up = 10
    /// packed16LZ4 with the packed16 payload of the tile above as LZ4 dictionary (layout version 5).
    case packed16LZ4Up = 11
    /// The raw samples through LZ4 with the inner payload of the tile above as dictionary (layout version 5).
    case lz4Up = 12
    /// One zstd frame (RFC 8878) of the raw samples (layout version 8, docs/COMPRESSED-LAYOUT.md §6.9): screen
    /// content at effort fast, where zstd's entropy-coded sequences and literals beat the LZ4 modes on ratio and
    /// its level-1 search costs less than their trials.
    case zstd = 13

    /// A tile row whose index is a multiple of this cannot use an "Up" mode: so a chain of dictionaries is at most
    /// this many tiles long, which bounds the work of decoding one tile row on its own.
    static let chainRows = 8

    /// The lowest layout version that has this mode.
    var minimumLayoutVersion: Int {
        switch self {
        case .packed8LZ4: 3
        case .packed10LZ4, .packed16LZ4: 4
        case .packed8LZ4Up, .packed10LZ4Up, .packed16LZ4Up, .lz4Up: 5
        case .zstd: TileMode.zstdLayoutVersion
        default: 1
        }
    }

    /// The packed mode of the payload this mode's bytes are or decompress to (packed8, packed10 or packed16), or
    /// nil for raw, solid, lz4 and lz4Up (whose inner payload is the samples themselves). A tile's inner payload is
    /// what an Up entry below it uses as its dictionary.
    var innerMode: TileMode? {
        switch self {
        case .packed8, .packed8LZ4, .packed8LZ4Up: .packed8
        case .packed10, .packed10LZ4, .packed10LZ4Up: .packed10
        case .packed16, .packed16LZ4, .packed16LZ4Up: .packed16
        case .raw, .solid, .lz4, .lz4Up, .zstd: nil
        }
    }

    /// The Up mode of a packed mode (packed8 → packed8LZ4Up, …).
    var upMode: TileMode {
        switch self {
        case .packed10: .packed10LZ4Up
        case .packed16: .packed16LZ4Up
        default: .packed8LZ4Up
        }
    }

    /// Added to the mode byte of an entry whose LZ4 block is stored with Huffman-coded literals (layout version 6,
    /// docs/COMPRESSED-LAYOUT.md §6.6): allowed on the modes whose payload is an LZ4 block (``isLZ4Block``).
    static let codedLiteralsFlag: UInt8 = 16

    /// The lowest layout version with coded literals.
    static let codedLiteralsLayoutVersion = 6

    /// Added to the mode byte of an entry whose LZ4 block is stored as coded sequences (layout version 7,
    /// docs/COMPRESSED-LAYOUT.md §6.7: literals, tokens, offset bytes and length bytes in separate streams, each
    /// Huffman-coded or stored): allowed on the modes whose payload is an LZ4 block (``isLZ4Block``).
    static let codedSequencesFlag: UInt8 = 32

    /// The lowest layout version with coded sequences.
    static let codedSequencesLayoutVersion = 7

    /// Whether this mode's payload is an LZ4 block (lz4, the packed-through-LZ4 modes and the Up modes).
    var isLZ4Block: Bool {
        switch self {
        case .raw, .solid, .packed8, .packed10, .packed16, .zstd: false
        default: true
        }
    }

    /// Whether this mode's payload is an LZ4 block that uses the tile above's inner payload as dictionary.
    var usesTileAbove: Bool { (TileMode.packed8LZ4Up.rawValue...TileMode.lz4Up.rawValue).contains(rawValue) }

    /// The lowest layout version with mode ``zstd``.
    static let zstdLayoutVersion = 8

    func isValid(bytesPerSample: Int, layoutVersion: Int) -> Bool {
        guard layoutVersion >= minimumLayoutVersion else { return false }
        switch self {
        case .raw, .solid, .lz4, .lz4Up, .zstd: return true
        case .packed8, .packed8LZ4, .packed8LZ4Up: return bytesPerSample == 1
        case .packed10, .packed16, .packed10LZ4, .packed16LZ4, .packed10LZ4Up, .packed16LZ4Up:
            return bytesPerSample == 2
        }
    }
}

/// Encoding and decoding of one component of one tile held as contiguous samples (width × height, row-major).
///
/// Residual blocks are 8 samples within one row; a row's last block is padded with zero residuals. A block at
/// width w takes exactly w bytes (8 fields of w bits), so blocks stay byte-aligned and are packed and
/// unpacked with single wide loads and stores.
enum ComponentCodec {
    /// The encoder's choice: where the payload is and how long it is.
    @unsafe struct Choice {
        var mode: TileMode
        var payload: UnsafeRawPointer
        var byteCount: Int
        /// The packed payload's mode and byte count when the encoder built it (in its `packed` slot): the input of
        /// packed Up modes, and the dictionary of the tile below when `mode.innerMode` is set.
        var packedMode: TileMode? = nil
        var packedByteCount = 0
        /// Whether LZ4 was tried on the packed payload (screen-like content): only then is an Up mode tried.
        var triedPackedLZ4 = false

        /// This choice with the packed payload's facts.
        func withPacked(_ mode: TileMode, byteCount: Int, triedLZ4: Bool) -> Choice {
            var copy = unsafe self
            unsafe copy.packedMode = mode
            unsafe copy.packedByteCount = byteCount
            unsafe copy.triedPackedLZ4 = triedLZ4
            return unsafe copy
        }
    }

    // MARK: 8-bit

    @inline(__always) static func zigzag8(_ d: UInt8) -> UInt8 {
        (d &<< 1) ^ UInt8(bitPattern: Int8(bitPattern: d) &>> 7)
    }

    @inline(__always) static func unzigzag8(_ z: UInt8) -> UInt8 {
        (z &>> 1) ^ (0 &- (z & 1))
    }

    /// Encodes 8-bit samples. `residuals`, `residuals2`, `packed` and `alternative` are scratch slots; `packed`
    /// holds at least ``maximumPacked8ByteCount(width:height:)`` + ``Kernels/packSlack`` bytes (the pack kernels
    /// check that figure).
    ///
    /// packed8 payload: `blocks` = height × ⌈width / 8⌉ blocks of 8 samples, each within one row (the last block
    /// of a row padded with zero residuals). First a width nibble per block (low nibble first), then one
    /// predictor bit per block (1: left, 0: up; bit i of byte i / 8), then each block's 8 zig-zag residuals
    /// packed into exactly w bytes. The first row is predicted from the left; column 0 from above.
    static func encode8(
        samples s: UnsafeMutablePointer<UInt8>,
        width: Int,
        height: Int,
        residuals ru: UnsafeMutablePointer<UInt8>,
        residuals2 rl: UnsafeMutablePointer<UInt8>,
        packed out: UnsafeMutableRawPointer,
        alternative alt: UnsafeMutableRawPointer,
        usesVectorKernels: Bool = true,
        allowsPacked8LZ4: Bool = true,
        highCompressionState: UnsafeMutableRawPointer? = nil
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
        let lz4First = unsafe tryLZ4First(
            UnsafeRawPointer(s),
            rowBytes: width,
            rows: height,
            blocks: ((width &+ 7) &>> 3) &* height,
            into: alt
        )
        if lz4First < 0 {
            // The residual slot is free: nothing was computed yet.
            return unsafe searchHarder(
                Choice(mode: .lz4, payload: UnsafeRawPointer(alt), byteCount: -lz4First),
                source: UnsafeRawPointer(s),
                sourceCount: n,
                into: UnsafeMutableRawPointer(ru),
                state: highCompressionState
            )
        }
        let lz4Written = lz4First
        let blocksPerRow = (width &+ 7) &>> 3
        let stride = blocksPerRow &<< 3
        // Residuals for both predictors, rows padded to whole blocks with zeros. The loops are flat: they vectorise.
        for y in 0..<height {
            let row = unsafe UnsafePointer(s + y &* width)
            let up = unsafe ru + y &* stride
            let left = unsafe rl + y &* stride
            if y == 0 {
                unsafe up[0] = zigzag8(row[0])
            } else {
                let above = unsafe UnsafePointer(s + (y &- 1) &* width)
                for i in 0..<width { unsafe up[i] = zigzag8(row[i] &- above[i]) }
            }
            unsafe left[0] = up[0]
            for i in 1..<max(width, 1) { unsafe left[i] = zigzag8(row[i] &- row[i &- 1]) }
            if y == 0 { unsafe (up + 1).update(from: left + 1, count: width &- 1) }
            for i in width..<stride {
                unsafe up[i] = 0
                unsafe left[i] = 0
            }
        }
        let blockCount = blocksPerRow &* height
        let nibbleBytes = (blockCount &+ 1) &>> 1
        let bitBytes = (blockCount &+ 7) &>> 3
        // One pass: choose each block's predictor and width, and pack it at once (8-byte stores; the slot has
        // room for the worst case plus 8). Widths and predictor bits gather in registers and are stored a whole
        // word at a time; only full words are stored in the loop, so they never reach past their own region.
        var zeroBlocks = 0
        let nibbles = unsafe out.assumingMemoryBound(to: UInt8.self)
        let bits = unsafe nibbles + nibbleBytes
        var position = nibbleBytes &+ bitBytes
        var nibbleWord: UInt64 = 0
        var bitWord: UInt64 = 0
        // The vector kernels where the processor has them (AVX2, SSE4.1, NEON; see Kernels): the same bytes.
        let packedByKernel =
            unsafe usesVectorKernels
            && Kernels.pack8(
                up: UnsafePointer(ru),
                left: UnsafePointer(rl),
                blockCount: blockCount,
                into: out,
                capacity: maximumPacked8ByteCount(width: width, height: height) &+ Kernels.packSlack,
                size: &position,
                zeroBlocks: &zeroBlocks
            )
        for block in 0..<(packedByKernel ? 0 : blockCount) {
            let u = unsafe UnsafeRawPointer(ru + block &<< 3).loadUnaligned(as: UInt64.self)
            let l = unsafe UnsafeRawPointer(rl + block &<< 3).loadUnaligned(as: UInt64.self)
            let wu = width8(u)
            let wl = width8(l)
            let useLeft = wl < wu
            let w = useLeft ? wl : wu
            let chosen = useLeft ? l : u
            zeroBlocks &+= w == 0 ? 1 : 0
            unsafe out.storeBytes(of: compact8(chosen, UInt64(w)), toByteOffset: position, as: UInt64.self)
            position &+= w
            nibbleWord |= UInt64(truncatingIfNeeded: w) &<< UInt64((block & 15) &<< 2)
            bitWord |= (useLeft ? 1 : 0) &<< UInt64(block & 63)
            if block & 15 == 15 {
                unsafe out.storeBytes(of: nibbleWord, toByteOffset: (block &>> 4) &<< 3, as: UInt64.self)
                nibbleWord = 0
            }
            if block & 63 == 63 {
                unsafe UnsafeMutableRawPointer(bits).storeBytes(
                    of: bitWord,
                    toByteOffset: (block &>> 6) &<< 3,
                    as: UInt64.self
                )
                bitWord = 0
            }
        }
        // The last partial words, byte by byte.
        var index = packedByKernel ? nibbleBytes : (blockCount &>> 4) &<< 3
        while index < nibbleBytes {
            unsafe nibbles[index] = UInt8(truncatingIfNeeded: nibbleWord)
            nibbleWord &>>= 8
            index &+= 1
        }
        index = packedByKernel ? bitBytes : (blockCount &>> 6) &<< 3
        while index < bitBytes {
            unsafe bits[index] = UInt8(truncatingIfNeeded: bitWord)
            bitWord &>>= 8
            index &+= 1
        }
        let total = position
        let rawBytes = n
        var best = unsafe Choice(mode: .raw, payload: UnsafeRawPointer(s), byteCount: rawBytes)
        if total < rawBytes { unsafe best = Choice(mode: .packed8, payload: UnsafeRawPointer(out), byteCount: total) }
        // LZ4 only where many residual blocks are zero (flat or repetitive screen content): it is slow and poor
        // on photographs. Each must beat the best so far.
        guard zeroBlocks &* lz4ZeroBlockDivisor >= blockCount || lz4Written > 0 else {
            return unsafe best.withPacked(.packed8, byteCount: total, triedLZ4: false)
        }
        if lz4Written > 0 {
            if unsafe lz4Written < best.byteCount {
                unsafe best = Choice(mode: .lz4, payload: UnsafeRawPointer(alt), byteCount: lz4Written)
            }
        } else {
            let written = unsafe LZ4Block.compress(s, count: rawBytes, into: alt, capacity: best.byteCount &- 1)
            if written > 0 { unsafe best = Choice(mode: .lz4, payload: UnsafeRawPointer(alt), byteCount: written) }
        }
        // The packed payload through LZ4, into the up residuals (read for the last time by the packing above).
        if allowsPacked8LZ4, unsafe best.byteCount > 1 {
            let written = unsafe LZ4Block.compress(
                UnsafeRawPointer(out),
                count: total,
                into: ru,
                capacity: best.byteCount &- 1
            )
            if written > 0 {
                unsafe best = Choice(mode: .packed8LZ4, payload: UnsafeRawPointer(ru), byteCount: written)
            }
        }
        // The winner, if it is LZ4, once more with the HC match search, into the slot the loser left free.
        if unsafe best.mode == .lz4 {
            return unsafe searchHarder(
                best,
                source: UnsafeRawPointer(s),
                sourceCount: rawBytes,
                into: UnsafeMutableRawPointer(ru),
                state: highCompressionState
            ).withPacked(.packed8, byteCount: total, triedLZ4: allowsPacked8LZ4)
        }
        if unsafe best.mode == .packed8LZ4 {
            return unsafe searchHarder(
                best,
                source: UnsafeRawPointer(out),
                sourceCount: total,
                into: alt,
                state: highCompressionState
            ).withPacked(.packed8, byteCount: total, triedLZ4: allowsPacked8LZ4)
        }
        return unsafe best.withPacked(.packed8, byteCount: total, triedLZ4: allowsPacked8LZ4)
    }

    /// An LZ4 choice compressed again from `source` with liblz4's HC match search into `destination`, if that is
    /// smaller (and `state`, the HC state, is given); else `choice`. Only winners get here: the HC search costs
    /// about ten fast searches, and only tiles LZ4 already won (screen content) are worth it.
    static func searchHarder(
        _ choice: Choice,
        source: UnsafeRawPointer,
        sourceCount: Int,
        into destination: UnsafeMutableRawPointer,
        state: UnsafeMutableRawPointer?
    ) -> Choice {
        guard let state = unsafe state else { return unsafe choice }
        let written = unsafe LZ4Block.compressHC(
            source,
            count: sourceCount,
            into: destination,
            capacity: choice.byteCount &- 1,
            state: state
        )
        guard written > 0 else { return unsafe choice }
        return unsafe Choice(mode: choice.mode, payload: UnsafeRawPointer(destination), byteCount: written)
    }

    /// The largest valid packed8 payload of a width × height component: every block 8 bytes wide.
    static func maximumPacked8ByteCount(width: Int, height: Int) -> Int {
        let blocks = ((width &+ 7) &>> 3) &* height
        return ((blocks &+ 1) &>> 1) &+ ((blocks &+ 7) &>> 3) &+ blocks &* 8
    }

    /// The bit width of the widest of 8 residual bytes.
    @inline(__always)
    static func width8(_ bytes: UInt64) -> Int {
        var folded = bytes | bytes &>> 32
        folded |= folded &>> 16
        folded |= folded &>> 8
        return 8 &- UInt8(truncatingIfNeeded: folded).leadingZeroBitCount
    }

    /// Screen content: at least half of the 8-byte words of a component equal the word above them, checked on every
    /// fourth row (photographs almost never pass; flat or repeated bands of one do). The test of
    /// ``tryLZ4First(_:rowBytes:rows:blocks:into:)``. With `allowsLeft` (layout version 8's zstd mode) a word equal
    /// to the word before it in its row counts too: dense text, whose rows differ from the row above, still has runs
    /// of background between its glyphs.
    static func looksLikeScreen(_ s: UnsafeRawPointer, rowBytes: Int, rows: Int, allowsLeft: Bool = false) -> Bool {
        let words = rowBytes &>> 3
        guard rows > 1, words > 0 else { return false }
        var equal = 0
        var sampled = 0
        for y in stride(from: 1, to: rows, by: 4) {
            sampled &+= words
            let row = unsafe s + y &* rowBytes
            let above = unsafe row - rowBytes
            var left = unsafe row.loadUnaligned(as: UInt64.self) ^ 1  // the first word has no word to its left
            for i in 0..<words {
                let a = unsafe above.loadUnaligned(fromByteOffset: i &<< 3, as: UInt64.self)
                let b = unsafe row.loadUnaligned(fromByteOffset: i &<< 3, as: UInt64.self)
                equal &+= a == b || (allowsLeft && left == b) ? 1 : 0
                left = b
            }
        }
        return equal &* 2 >= sampled
    }

    /// Whether all `count` bytes are one repeated sample of `bytesPerSample` (1 or 2) bytes (mode solid). Compares
    /// 64 bytes at a time with the first sample repeated and stops at the first difference: screen content that is
    /// not solid differs early, so the test costs it almost nothing.
    static func isSolid(_ s: UnsafeRawPointer, count: Int, bytesPerSample: Int) -> Bool {
        guard count >= bytesPerSample else { return false }
        let sample =
            bytesPerSample == 1
            ? UInt64(unsafe s.load(as: UInt8.self)) : UInt64(unsafe s.loadUnaligned(as: UInt16.self))
        let word = bytesPerSample == 1 ? sample &* 0x0101_0101_0101_0101 : sample &* 0x0001_0001_0001_0001
        var i = 0
        while i &+ 64 <= count {
            var difference: UInt64 = 0
            for k in stride(from: 0, to: 64, by: 8) {
                difference |= unsafe s.loadUnaligned(fromByteOffset: i &+ k, as: UInt64.self) ^ word
            }
            if difference != 0 { return false }
            i &+= 64
        }
        while i < count {
            // The tail byte by byte: byte i of the repeated sample is byte (i mod bytesPerSample) of the word.
            let expected = UInt8(truncatingIfNeeded: word &>> UInt64((i % bytesPerSample) &* 8))
            if unsafe s.load(fromByteOffset: i, as: UInt8.self) != expected { return false }
            i &+= 1
        }
        return true
    }

    /// LZ4 is tried when at least 1/divisor of the residual blocks are zero.
    static let lz4ZeroBlockDivisor = 4

    /// Screen content: when at least half of the 8-byte words of a component equal the word above them (checked on
    /// every fourth row), LZ4 is tried before any residual is computed. If it is no larger than the smallest
    /// possible packed payload (the width nibbles and predictor bits alone), nothing else can beat it and the
    /// residual passes are skipped.
    ///
    /// Returns −(LZ4 size) to take LZ4 now, the LZ4 size (> 0) to compare with the packed size later, 0 if LZ4 was
    /// not tried, or `Int.max` if it was tried and does not beat raw.
    static func tryLZ4First(
        _ s: UnsafeRawPointer,
        rowBytes: Int,
        rows: Int,
        blocks: Int,
        into alt: UnsafeMutableRawPointer
    ) -> Int {
        guard unsafe looksLikeScreen(s, rowBytes: rowBytes, rows: rows) else { return 0 }
        let rawBytes = rowBytes &* rows
        let written = unsafe LZ4Block.compress(s, count: rawBytes, into: alt, capacity: rawBytes &- 1)
        guard written > 0 else { return Int.max }
        let smallestPacked = ((blocks &+ 1) &>> 1) &+ ((blocks &+ 7) &>> 3)
        return written <= smallestPacked ? -written : written
    }

    /// Decodes an 8-bit packed payload into `x`: `capacity` writable bytes, at least (height − 1) × stride + width
    /// with rows `rowStride` apart (a vector kernel: exactly the samples are written), or (height − 1) × width +
    /// ⌈width / 8⌉ × 8 with contiguous rows (the portable decoder writes whole blocks of 8). Returns false if the payload is not exactly the
    /// packed form.
    ///
    /// The payload may be shared memory that another process rewrites meanwhile: the width nibbles and predictor
    /// bits are copied once into `controls` (private, `controlsCapacity` bytes: at least their size plus
    /// ``Kernels/controlSlack``) and read only from there, so every position and width is validated once and
    /// cannot change; residual bytes are read from the payload within the bounds those give. A capacity below
    /// these is a bug of the caller: a precondition failure (the kernels check them again).
    static func decodePacked8(
        _ payload: UnsafeRawPointer,
        count: Int,
        width: Int,
        height: Int,
        controls: UnsafeMutablePointer<UInt8>,
        controlsCapacity: Int,
        into x: UnsafeMutablePointer<UInt8>,
        capacity: Int,
        rowStride: Int? = nil,
        usesVectorKernels: Bool = true
    ) -> Bool {
        // Rows `rowStride` apart (straight into a plane) only through a vector kernel, which writes nothing past
        // a row's end; the portable decoder below writes whole blocks into contiguous rows.
        precondition(rowStride == nil || (usesVectorKernels && Kernels.decodesStrided), "a row stride needs a kernel")
        let blocksPerRow = (width &+ 7) &>> 3
        let blockCount = blocksPerRow &* height
        let byKernel = usesVectorKernels && Kernels.decodesStrided
        let needed = (height &- 1) &* (rowStride ?? width) &+ (byKernel ? width : blocksPerRow &<< 3)
        precondition(height == 0 || capacity >= needed, "decodePacked8: \(capacity) bytes for \(width)×\(height)")
        precondition(
            controlsCapacity >= ((blockCount &+ 1) &>> 1) &+ ((blockCount &+ 7) &>> 3) &+ Kernels.controlSlack,
            "decodePacked8: controls of \(controlsCapacity) bytes"
        )
        guard let (nibbles, bits, nibbleBytes, bitBytes) = unsafe copyControls(payload, count, blockCount, controls)
        else { return false }
        // The widths' sum and whether any exceeds 8, 16 nibbles at a time (SWAR): a nibble is above 8 when its
        // bit 3 and any of its low 3 bits are set; 8 bytes of nibble pairs sum to at most 240, so one multiply
        // adds them up.
        var total = nibbleBytes &+ bitBytes
        var tooWide: UInt64 = 0
        var i = 0
        // With AVX-512 (the AVX2 tier), 128 nibbles a step; the loops below are then skipped.
        if usesVectorKernels, let widths = unsafe Kernels.packed8Widths(nibbles, count: nibbleBytes) {
            total &+= widths.total
            tooWide = widths.tooWide ? 1 : 0
            i = nibbleBytes
        }
        while i &+ 8 <= nibbleBytes {
            let word = unsafe UnsafeRawPointer(nibbles + i).loadUnaligned(as: UInt64.self)
            tooWide |= word & 0x8888_8888_8888_8888 & ((word & 0x7777_7777_7777_7777) &+ 0x7777_7777_7777_7777)
            let pairs = (word & 0x0F0F_0F0F_0F0F_0F0F) &+ ((word &>> 4) & 0x0F0F_0F0F_0F0F_0F0F)
            total &+= Int(truncatingIfNeeded: (pairs &* 0x0101_0101_0101_0101) &>> 56)
            i &+= 8
        }
        while i < nibbleBytes {
            let pair = unsafe nibbles[i]
            tooWide |= UInt64((pair & 15) > 8 || (pair &>> 4) > 8 ? 1 : 0)
            total &+= Int(pair & 15) &+ Int(pair &>> 4)
            i &+= 1
        }
        guard tooWide == 0, total == count else { return false }
        // The vector kernels where the processor has them (AVX2, SSE4.1, NEON; see Kernels).
        if usesVectorKernels,
            unsafe Kernels.decodePacked8(
                payload,
                count: count,
                position: nibbleBytes &+ bitBytes,
                nibbles: nibbles,
                nibbleCapacity: controlsCapacity,
                bits: bits,
                bitCapacity: controlsCapacity &- nibbleBytes,
                width: width,
                height: height,
                into: x,
                capacity: capacity,
                rowStride: rowStride ?? width
            )
        {
            return true
        }
        // One pass over the blocks, row by row. Each block: unpack 8 residuals (SWAR, masks from a table by width),
        // undo the zig-zag, then either add the row above (bytewise, without carries between bytes) or, for a
        // left-predicted block, form the running sum: prefix sums of byte pairs in 16-bit lanes by one multiply
        // (odd bytes), minus the odd byte of each pair (even bytes), plus the left neighbour carried broadcast in
        // 16-bit lanes. Column 0 of a left block is predicted from above: the neighbour carried into column 0 is
        // the sample above it (0 in the first row, which is predicted from the left throughout). Rows are written
        // 8 bytes at a time, so a row's last block may spill into the next row, which is written after it (the
        // scratch has slack).
        let low7: UInt64 = 0x7F7F_7F7F_7F7F_7F7F
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high1: UInt64 = 0x8080_8080_8080_8080
        let lanes8: UInt64 = 0x00FF_00FF_00FF_00FF
        let lanes16: UInt64 = 0x0001_0001_0001_0001
        return unsafe withUnsafeTemporaryAllocation(of: UInt64.self, capacity: 36) { table in
            for w in 0...8 {
                let w64 = UInt64(w)
                unsafe table[w &* 4] = (UInt64(1) &<< (4 &* w64)) &- 1
                unsafe table[w &* 4 &+ 1] = ((UInt64(1) &<< (2 &* w64)) &- 1) &* 0x0000_0001_0000_0001
                unsafe table[w &* 4 &+ 2] = ((UInt64(1) &<< w64) &- 1) &* 0x0001_0001_0001_0001
                unsafe table[w &* 4 &+ 3] = 0
            }
            guard let masks = table.baseAddress else { return false }
            var position = nibbleBytes &+ bitBytes
            for y in 0..<height {
                let current = unsafe UnsafeMutableRawPointer(x + y &* width)
                let above = unsafe UnsafeRawPointer(x + (y == 0 ? 0 : (y &- 1) &* width))
                let forceLeft: UInt8 = y == 0 ? 1 : 0
                var neighbour: UInt64 = y == 0 ? 0 : UInt64(unsafe above.load(as: UInt8.self)) &* lanes16
                let firstBlock = y &* blocksPerRow
                var column = 0
                while column < blocksPerRow {
                    let block = firstBlock &+ column
                    // Validated above (<= 8); the clamp keeps the table index in range whatever happens.
                    let w = min(Int(unsafe (nibbles[block &>> 1] &>> ((block & 1) &* 4)) & 15), 8)
                    let isLeft = (unsafe (bits[block &>> 3] &>> UInt8(truncatingIfNeeded: block & 7)) & 1) | forceLeft
                    let v =
                        position &+ 8 <= count
                        ? unsafe payload.loadUnaligned(fromByteOffset: position, as: UInt64.self)
                        : unsafe load64(payload, at: position, count: count)
                    position &+= w
                    let m = unsafe masks + w &* 4
                    let w64 = UInt64(truncatingIfNeeded: w)
                    let halves = unsafe (v & m[0]) | ((v &>> (4 &* w64)) & m[0]) &<< 32
                    let quads = unsafe (halves & m[1]) | ((halves &>> (2 &* w64)) & m[1]) &<< 16
                    let z = unsafe (quads & m[2]) | ((quads &>> w64) & m[2]) &<< 8
                    let d = ((z &>> 1) & low7) ^ ((z & ones) &* 0xFF)
                    if isLeft != 0 {
                        let even = d & lanes8
                        let odd = (d &>> 8) & lanes8
                        let prefixOdd = (even &+ odd) &* lanes16
                        let prefixEven = prefixOdd &- odd
                        let left = ((prefixEven &+ neighbour) & lanes8) | (((prefixOdd &+ neighbour) & lanes8) &<< 8)
                        unsafe current.storeBytes(of: left, toByteOffset: column &<< 3, as: UInt64.self)
                        neighbour = ((prefixOdd &>> 48) &* lanes16 &+ neighbour) & lanes8
                    } else {
                        let a = unsafe above.loadUnaligned(fromByteOffset: column &<< 3, as: UInt64.self)
                        let up = ((a & low7) &+ (d & low7)) ^ ((a ^ d) & high1)
                        unsafe current.storeBytes(of: up, toByteOffset: column &<< 3, as: UInt64.self)
                        neighbour = (up &>> 56) &* lanes16
                    }
                    column &+= 1
                }
            }
            return true
        }
    }

    /// Copies a packed payload's width nibbles and predictor bits (`blockCount` blocks) into private `controls`, to
    /// be checked and read only there: another process may rewrite the payload meanwhile. Returns nil if the payload
    /// is shorter than they are, or if their unused trailing nibble or bits are not zero (one canonical form).
    static func copyControls(
        _ payload: UnsafeRawPointer,
        _ count: Int,
        _ blockCount: Int,
        _ controls: UnsafeMutablePointer<UInt8>
    ) -> (nibbles: UnsafePointer<UInt8>, bits: UnsafePointer<UInt8>, nibbleBytes: Int, bitBytes: Int)? {
        let nibbleBytes = (blockCount &+ 1) &>> 1
        let bitBytes = (blockCount &+ 7) &>> 3
        guard count >= nibbleBytes &+ bitBytes else { return nil }
        unsafe UnsafeMutableRawPointer(controls).copyMemory(from: payload, byteCount: nibbleBytes &+ bitBytes)
        let nibbles = unsafe UnsafePointer(controls)
        let bits = unsafe nibbles + nibbleBytes
        if blockCount & 1 == 1 { guard unsafe nibbles[nibbleBytes &- 1] &>> 4 == 0 else { return nil } }
        if blockCount & 7 != 0 { guard unsafe bits[bitBytes &- 1] &>> UInt8(blockCount & 7) == 0 else { return nil } }
        return unsafe (nibbles, bits, nibbleBytes, bitBytes)
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

    // MARK: 16-bit

    /// Encodes 16-bit samples: packed10 when every padding bit is zero (the 10-bit values are coded), otherwise
    /// packed16 (all 16 bits). The layout is packed8's with 16-bit residuals: widths 0...10 or 0...16 (nibble 15
    /// stands for 16), and each block of 8 residuals in exactly w bytes.
    static func encode16(
        samples s: UnsafeMutablePointer<UInt16>,
        width: Int,
        height: Int,
        residuals ru: UnsafeMutablePointer<UInt16>,
        residuals2 rl: UnsafeMutablePointer<UInt16>,
        packed out: UnsafeMutableRawPointer,
        alternative alt: UnsafeMutableRawPointer,
        allowsPacked16LZ4: Bool = true,
        highCompressionState: UnsafeMutableRawPointer? = nil
    ) -> Choice {
        let n = width &* height
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
        let lz4Written = unsafe tryLZ4First(
            UnsafeRawPointer(s),
            rowBytes: 2 &* width,
            rows: height,
            blocks: ((width &+ 7) &>> 3) &* height,
            into: alt
        )
        if lz4Written < 0 {
            return unsafe searchHarder(
                Choice(mode: .lz4, payload: UnsafeRawPointer(alt), byteCount: -lz4Written),
                source: UnsafeRawPointer(s),
                sourceCount: 2 &* n,
                into: UnsafeMutableRawPointer(ru),
                state: highCompressionState
            )
        }
        let tenBit = padding & 0x3F == 0
        let down: UInt16 = tenBit ? 6 : 0  // value shift
        let signShift: Int16 = tenBit ? 6 : 0  // sign-extends a 10-bit difference
        @inline(__always) func residual(_ x: UInt16, _ p: UInt16) -> UInt16 {
            let d = Int16(bitPattern: ((x &>> down) &- (p &>> down)) &<< UInt16(signShift)) &>> signShift
            return UInt16(bitPattern: (d &<< 1) ^ (d &>> 15))
        }
        let blocksPerRow = (width &+ 7) &>> 3
        let stride = blocksPerRow &<< 3
        for y in 0..<height {
            let row = unsafe UnsafePointer(s + y &* width)
            let up = unsafe ru + y &* stride
            let left = unsafe rl + y &* stride
            if y == 0 {
                unsafe up[0] = residual(row[0], 0)
            } else {
                let above = unsafe UnsafePointer(s + (y &- 1) &* width)
                for i in 0..<width { unsafe up[i] = residual(row[i], above[i]) }
            }
            unsafe left[0] = up[0]
            for i in 1..<max(width, 1) { unsafe left[i] = residual(row[i], row[i &- 1]) }
            if y == 0 { unsafe (up + 1).update(from: left + 1, count: width &- 1) }
            for i in width..<stride {
                unsafe up[i] = 0
                unsafe left[i] = 0
            }
        }
        let blockCount = blocksPerRow &* height
        let nibbleBytes = (blockCount &+ 1) &>> 1
        let bitBytes = (blockCount &+ 7) &>> 3
        var total = nibbleBytes &+ bitBytes
        var zeroBlocks = 0
        let nibbles = unsafe out.assumingMemoryBound(to: UInt8.self)
        let bits = unsafe nibbles + nibbleBytes
        for i in 0..<(nibbleBytes &+ bitBytes) { unsafe nibbles[i] = 0 }
        for block in 0..<blockCount {
            let wu = unsafe width16(UnsafeRawPointer(ru + block &<< 3))
            let wl = unsafe width16(UnsafeRawPointer(rl + block &<< 3))
            let useLeft = wl < wu
            let w = useLeft ? wl : wu
            zeroBlocks &+= w == 0 ? 1 : 0
            unsafe nibbles[block &>> 1] |= UInt8(truncatingIfNeeded: min(w, 15)) &<< ((block & 1) &* 4)
            unsafe bits[block &>> 3] |= (useLeft ? 1 : 0) &<< UInt8(truncatingIfNeeded: block & 7)
            total &+= w
        }
        let rawBytes = 2 &* n
        var best = unsafe Choice(mode: .raw, payload: UnsafeRawPointer(s), byteCount: rawBytes)
        // LZ4 of the samples and of the packed payload only where many residual blocks are zero (screen content),
        // as for 8-bit samples.
        let screenLike = zeroBlocks &* lz4ZeroBlockDivisor >= blockCount
        if lz4Written > 0 {
            if lz4Written < rawBytes {
                unsafe best = Choice(mode: .lz4, payload: UnsafeRawPointer(alt), byteCount: lz4Written)
            }
        } else if screenLike {
            let written = unsafe LZ4Block.compress(s, count: rawBytes, into: alt, capacity: rawBytes &- 1)
            if written > 0 { unsafe best = Choice(mode: .lz4, payload: UnsafeRawPointer(alt), byteCount: written) }
        }
        // The packed payload is needed if it beats the best so far, or as the input of packed10LZ4/packed16LZ4.
        let triesPackedLZ4 = allowsPacked16LZ4 && (screenLike || lz4Written > 0)
        guard unsafe total < best.byteCount || (triesPackedLZ4 && total < rawBytes) else {
            return unsafe searchHarder(
                best,
                source: UnsafeRawPointer(s),
                sourceCount: rawBytes,
                into: UnsafeMutableRawPointer(ru),
                state: unsafe best.mode == .lz4 ? highCompressionState : nil
            )
        }
        var position = nibbleBytes &+ bitBytes
        for block in 0..<blockCount {
            var w = Int(unsafe (nibbles[block &>> 1] &>> ((block & 1) &* 4)) & 15)
            if w == 15 { w = 16 }
            let useLeft = unsafe (bits[block &>> 3] &>> UInt8(truncatingIfNeeded: block & 7)) & 1 == 1
            let source = unsafe UnsafeRawPointer((useLeft ? rl : ru) + block &<< 3)
            let low = compact4(unsafe source.loadUnaligned(as: UInt64.self), UInt64(w))
            let high = compact4(unsafe source.loadUnaligned(fromByteOffset: 8, as: UInt64.self), UInt64(w))
            let v = UInt128(low) | UInt128(high) &<< (4 &* w)
            unsafe out.storeBytes(of: v, toByteOffset: position, as: UInt128.self)
            position &+= w
        }
        if unsafe total < best.byteCount {
            unsafe best = Choice(mode: tenBit ? .packed10 : .packed16, payload: UnsafeRawPointer(out), byteCount: total)
        }
        // The packed payload through LZ4, into the up residuals (read for the last time by the packing above).
        if triesPackedLZ4, unsafe best.byteCount > 2 {
            let written = unsafe LZ4Block.compress(
                UnsafeRawPointer(out),
                count: total,
                into: ru,
                capacity: best.byteCount &- 1
            )
            if written > 0 {
                unsafe best = Choice(
                    mode: tenBit ? .packed10LZ4 : .packed16LZ4,
                    payload: UnsafeRawPointer(ru),
                    byteCount: written
                )
            }
        }
        let packedMode: TileMode = tenBit ? .packed10 : .packed16
        switch unsafe best.mode {
        case .lz4:
            return unsafe searchHarder(
                best,
                source: UnsafeRawPointer(s),
                sourceCount: rawBytes,
                into: UnsafeMutableRawPointer(ru),
                state: highCompressionState
            ).withPacked(packedMode, byteCount: total, triedLZ4: triesPackedLZ4)
        case .packed10LZ4, .packed16LZ4:
            return unsafe searchHarder(
                best,
                source: UnsafeRawPointer(out),
                sourceCount: total,
                into: alt,
                state: highCompressionState
            ).withPacked(packedMode, byteCount: total, triedLZ4: triesPackedLZ4)
        default:
            return unsafe best.withPacked(packedMode, byteCount: total, triedLZ4: triesPackedLZ4)
        }
    }

    /// The largest valid packed10 or packed16 payload of a width × height component: every block 16 bytes wide.
    static func maximumPacked16ByteCount(width: Int, height: Int) -> Int {
        let blocks = ((width &+ 7) &>> 3) &* height
        return ((blocks &+ 1) &>> 1) &+ ((blocks &+ 7) &>> 3) &+ blocks &* 16
    }

    /// The bit width of the widest of 8 16-bit residuals; 15 is rounded up to 16 (its nibble).
    @inline(__always)
    static func width16(_ p: UnsafeRawPointer) -> Int {
        let bits = unsafe p.loadUnaligned(as: UInt64.self) | p.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
        var folded = bits | bits &>> 32
        folded |= folded &>> 16
        let w = 16 &- UInt16(truncatingIfNeeded: folded).leadingZeroBitCount
        return w == 15 ? 16 : w
    }

    /// Packs 4 16-bit lanes, each below 2^w, into the low 4·w bits.
    @inline(__always)
    static func compact4(_ lanes: UInt64, _ w: UInt64) -> UInt64 {
        let lanes16: UInt64 = 0x0000_FFFF_0000_FFFF
        let pairs = (lanes & lanes16) | ((lanes &>> 16) & lanes16) &<< w
        return (pairs & 0xFFFF_FFFF) | (pairs &>> 32) &<< (2 &* w)
    }

    /// The inverse of ``compact4(_:_:)``; bits above 4·w are ignored.
    @inline(__always)
    static func spread4(_ packed: UInt64, _ w: UInt64) -> UInt64 {
        let mask2 = (UInt64(1) &<< (2 &* w)) &- 1  // w = 16 gives 2^32 - 1
        let halves = (packed & mask2) | ((packed &>> (2 &* w)) & mask2) &<< 32
        let mask1 = ((UInt64(1) &<< w) &- 1) &* 0x0000_0001_0000_0001
        return (halves & mask1) | ((halves &>> w) & mask1) &<< 16
    }

    /// The 10-bit decode in one pass per block, as ``decodePacked8``'s: unpack 8 residuals (two 64-bit loads,
    /// four 16-bit lanes each), undo the zig-zag, then add the row above (lanes of 10-bit values, no carries
    /// between lanes) or, for a left-predicted block, form the running sum: prefix sums of the four lanes by one
    /// multiply (each lane stays below 2^12), plus the left neighbour carried broadcast, modulo 1024. Column 0 of
    /// a left block is predicted from above, row 0 from the left throughout (the neighbour carried into column
    /// 0 is the value above it, 0 in row 0). Rows are written 8 samples at a time, so a row's last block may
    /// spill into the next row, which is written after it (the scratch has slack). The widths were validated
    /// (<= 10, their sum is the payload size) from the private `nibbles`; they are clamped again here anyway.
    @inline(__always)
    static func decodePacked10Rows(
        _ payload: UnsafeRawPointer,
        count: Int,
        width: Int,
        height: Int,
        nibbles: UnsafePointer<UInt8>,
        bits: UnsafePointer<UInt8>,
        into x: UnsafeMutablePointer<UInt16>
    ) {
        let blocksPerRow = (width &+ 7) &>> 3
        let blockCount = blocksPerRow &* height
        let lanes16: UInt64 = 0x0001_0001_0001_0001
        let mask10: UInt64 = 0x03FF_03FF_03FF_03FF
        let low15: UInt64 = 0x7FFF_7FFF_7FFF_7FFF
        var position = ((blockCount &+ 1) &>> 1) &+ ((blockCount &+ 7) &>> 3)
        for y in 0..<height {
            let current = unsafe UnsafeMutableRawPointer(x + y &* width)
            let above = unsafe UnsafeRawPointer(x + (y == 0 ? 0 : (y &- 1) &* width))
            let forceLeft: UInt8 = y == 0 ? 1 : 0
            var neighbour: UInt64 =
                y == 0 ? 0 : UInt64(unsafe above.load(as: UInt16.self) &>> 6) &* lanes16
            let firstBlock = y &* blocksPerRow
            for column in 0..<blocksPerRow {
                let block = firstBlock &+ column
                let w = min(Int(unsafe (nibbles[block &>> 1] &>> ((block & 1) &* 4)) & 15), 10)
                let isLeft = (unsafe (bits[block &>> 3] &>> UInt8(truncatingIfNeeded: block & 7)) & 1) | forceLeft
                let w64 = UInt64(truncatingIfNeeded: w)
                let low = unsafe spread4(load64(payload, at: position, count: count), w64)
                let high = unsafe spread4(
                    load64(payload, at: position &+ (w &>> 1), count: count) &>> UInt64((w & 1) &<< 2),
                    w64
                )
                position &+= w
                let dLow = (((low &>> 1) & low15) ^ ((low & lanes16) &* 0xFFFF)) & mask10
                let dHigh = (((high &>> 1) & low15) ^ ((high & lanes16) &* 0xFFFF)) & mask10
                let resultLow: UInt64
                let resultHigh: UInt64
                if isLeft != 0 {
                    resultLow = (dLow &* lanes16 &+ neighbour) & mask10
                    resultHigh = (dHigh &* lanes16 &+ (resultLow &>> 48) &* lanes16) & mask10
                } else {
                    let offset = column &<< 4
                    let aLow = unsafe (above.loadUnaligned(fromByteOffset: offset, as: UInt64.self) &>> 6) & mask10
                    let aHigh =
                        unsafe (above.loadUnaligned(fromByteOffset: offset &+ 8, as: UInt64.self) &>> 6) & mask10
                    resultLow = (aLow &+ dLow) & mask10
                    resultHigh = (aHigh &+ dHigh) & mask10
                }
                neighbour = (resultHigh &>> 48) &* lanes16
                unsafe current.storeBytes(of: resultLow &<< 6, toByteOffset: column &<< 4, as: UInt64.self)
                unsafe current.storeBytes(of: resultHigh &<< 6, toByteOffset: (column &<< 4) &+ 8, as: UInt64.self)
            }
        }
    }

    /// Decodes a packed10 or packed16 payload into `x` (`capacity` samples, at least (height − 1) × width +
    /// ⌈width / 8⌉ × 8: whole blocks are stored); `r` is residual scratch (rows rounded up to 8); `controls` as for
    /// ``decodePacked8(_:count:width:height:controls:controlsCapacity:into:capacity:rowStride:usesVectorKernels:)``.
    /// With `rowStride` (packed10 only, under a tier that ``Kernels/decodesStrided10``, `width` a multiple of 8) the
    /// rows are `rowStride` samples apart in `x` and exactly their samples are written (`capacity` at least
    /// (height − 1) × rowStride + width): a plane's other samples stay as they were.
    static func decodePacked16(
        _ payload: UnsafeRawPointer,
        count: Int,
        tenBit: Bool,
        width: Int,
        height: Int,
        controls: UnsafeMutablePointer<UInt8>,
        controlsCapacity: Int,
        residuals r: UnsafeMutablePointer<UInt16>,
        into x: UnsafeMutablePointer<UInt16>,
        capacity: Int,
        rowStride: Int? = nil,
        usesVectorKernels: Bool = true
    ) -> Bool {
        let blocksPerRow = (width &+ 7) &>> 3
        let stride = blocksPerRow &<< 3
        let blockCount = blocksPerRow &* height
        // Whole blocks of 8 samples are stored: the last row reaches ⌈width / 8⌉ × 8 samples (exactly width when
        // strided: a multiple of 8).
        if let rowStride {
            precondition(
                tenBit && usesVectorKernels && Kernels.decodesStrided10 && width & 7 == 0 && rowStride >= width,
                "decodePacked16: rows \(rowStride) apart need packed10, the AVX2 tier and a width multiple of 8"
            )
        }
        precondition(
            height == 0 || capacity >= (height &- 1) &* (rowStride ?? width) &+ stride,
            "decodePacked16: \(capacity) samples for \(width)×\(height)"
        )
        precondition(
            controlsCapacity >= ((blockCount &+ 1) &>> 1) &+ ((blockCount &+ 7) &>> 3) &+ Kernels.controlSlack,
            "decodePacked16: controls of \(controlsCapacity) bytes"
        )
        guard let (nibbles, bits, nibbleBytes, bitBytes) = unsafe copyControls(payload, count, blockCount, controls)
        else { return false }
        let maximumWidth = tenBit ? 10 : 16
        // The widths' sum and validity, 16 nibbles at a time (SWAR, as decodePacked8's): the low and the high
        // nibbles of 8 bytes each in a byte lane; a lane is 11 or more when adding 0x75 sets its bit 7, 15 when
        // adding 0x71 does. packed10 refuses widths above 10; packed16 counts nibble 15 as 16. An unused high
        // nibble of the last byte is zero (copyControls), so it adds nothing.
        var total = nibbleBytes &+ bitBytes
        var tooWide: UInt64 = 0
        var i = 0
        while i &+ 8 <= nibbleBytes {
            let word = unsafe UnsafeRawPointer(nibbles + i).loadUnaligned(as: UInt64.self)
            let low = word & 0x0F0F_0F0F_0F0F_0F0F
            let high = (word &>> 4) & 0x0F0F_0F0F_0F0F_0F0F
            total &+= Int(truncatingIfNeeded: ((low &+ high) &* 0x0101_0101_0101_0101) &>> 56)
            if tenBit {
                tooWide |= ((low &+ 0x7575_7575_7575_7575) | (high &+ 0x7575_7575_7575_7575)) & 0x8080_8080_8080_8080
            } else {
                let fifteens =
                    (((low &+ 0x7171_7171_7171_7171) & 0x8080_8080_8080_8080).nonzeroBitCount)
                    &+ (((high &+ 0x7171_7171_7171_7171) & 0x8080_8080_8080_8080).nonzeroBitCount)
                total &+= fifteens
            }
            i &+= 8
        }
        while i < nibbleBytes {
            let pair = unsafe nibbles[i]
            let low = Int(pair & 15) == 15 ? 16 : Int(pair & 15)
            let high = Int(pair &>> 4) == 15 ? 16 : Int(pair &>> 4)
            tooWide |= low > maximumWidth || high > maximumWidth ? 1 : 0
            total &+= low &+ high
            i &+= 1
        }
        guard tooWide == 0, total == count else { return false }
        if tenBit {
            if let rowStride {
                let decoded = unsafe Kernels.decodePacked10(
                    payload,
                    count: count,
                    position: nibbleBytes &+ bitBytes,
                    nibbles: nibbles,
                    nibbleCapacity: controlsCapacity,
                    bits: bits,
                    bitCapacity: controlsCapacity &- nibbleBytes,
                    width: width,
                    height: height,
                    into: x,
                    capacity: capacity,
                    rowStride: rowStride
                )
                precondition(decoded, "decodePacked16: no strided packed10 kernel under this tier")
                return true
            }
            if usesVectorKernels,
                unsafe Kernels.decodePacked10(
                    payload,
                    count: count,
                    position: nibbleBytes &+ bitBytes,
                    nibbles: nibbles,
                    nibbleCapacity: controlsCapacity,
                    bits: bits,
                    bitCapacity: controlsCapacity &- nibbleBytes,
                    width: width,
                    height: height,
                    into: x,
                    capacity: capacity
                )
            {
                return true
            }
            unsafe decodePacked10Rows(
                payload,
                count: count,
                width: width,
                height: height,
                nibbles: nibbles,
                bits: bits,
                into: x
            )
            return true
        }
        var position = nibbleBytes &+ bitBytes
        for block in 0..<blockCount {
            var w = Int(unsafe (nibbles[block &>> 1] &>> ((block & 1) &* 4)) & 15)
            if w == 15 { w = 16 }
            w = min(w, maximumWidth)
            // The first 4 residuals are bits 0..<4w, the last 4 bits 4w..<8w: two 64-bit loads (spread4 ignores
            // the bits above 4w), the second from byte w/2, shifted by the half byte an odd w leaves.
            let low = unsafe load64(payload, at: position, count: count)
            let high = unsafe load64(payload, at: position &+ (w &>> 1), count: count) &>> UInt64((w & 1) &<< 2)
            let target = unsafe UnsafeMutableRawPointer(r + block &<< 3)
            unsafe target.storeBytes(of: spread4(low, UInt64(w)), as: UInt64.self)
            unsafe target.storeBytes(of: spread4(high, UInt64(w)), toByteOffset: 8, as: UInt64.self)
            position &+= w
        }
        let valueMask: UInt16 = tenBit ? 0x3FF : 0xFFFF
        let up: UInt16 = tenBit ? 6 : 0
        @inline(__always) func undo(_ z: UInt16, _ p: UInt16) -> UInt16 {
            let d = (z &>> 1) ^ (0 &- (z & 1))
            return (((p &>> up) &+ d) & valueMask) &<< up
        }
        var previous: UInt16 = 0
        for i in 0..<width {
            previous = unsafe undo(r[i], previous)
            unsafe x[i] = previous
        }
        if height > 1 {
            for y in 1..<height {
                let above = unsafe UnsafePointer(x + (y &- 1) &* width)
                let current = unsafe x + y &* width
                let residual = unsafe UnsafePointer(r + y &* stride)
                for i in 0..<width { unsafe current[i] = undo(residual[i], above[i]) }
                let firstBlock = y &* blocksPerRow
                var block = firstBlock
                let endBlock = firstBlock &+ blocksPerRow
                while block < endBlock {
                    let byte = unsafe bits[block &>> 3] &>> UInt8(truncatingIfNeeded: block & 7)
                    if byte == 0 {
                        block = (block | 7) &+ 1
                        continue
                    }
                    block &+= byte.trailingZeroBitCount
                    guard block < endBlock else { break }
                    let start = max((block &- firstBlock) &<< 3, 1)
                    let end = min(((block &- firstBlock) &+ 1) &<< 3, width)
                    if start < end {
                        var left = unsafe current[start &- 1]
                        for i in start..<end {
                            left = unsafe undo(residual[i], left)
                            unsafe current[i] = left
                        }
                    }
                    block &+= 1
                }
            }
        }
        return true
    }
}
