import CLZ4
import CSurfaceCodecKernels

#if canImport(Glibc)
import Glibc
#endif

/// liblz4's block API, the one place this module calls it.
enum LZ4Block {
    /// Compresses `count` bytes into at most `capacity` bytes; returns the compressed size, or 0 when the
    /// result would not fit (LZ4_compress_default).
    static func compress(
        _ source: UnsafeRawPointer,
        count: Int,
        into destination: UnsafeMutableRawPointer,
        capacity: Int
    ) -> Int {
        guard count > 0, capacity > 0, count <= Int(Int32.max), capacity <= Int(Int32.max) else { return 0 }
        let written = unsafe LZ4_compress_default(
            source.assumingMemoryBound(to: CChar.self),
            destination.assumingMemoryBound(to: CChar.self),
            Int32(count),
            Int32(capacity)
        )
        return Int(written)
    }

    /// The match search level of ``compressHC(_:count:into:capacity:state:)``: liblz4's HC level 3 by default, or
    /// the level `FRAMEBUS_CODEC_HC_LEVEL` gives (0 turns the HC search off; at most 12), read once per process.
    /// Its output is an ordinary LZ4 block (the decoder does not know the level), with fewer and longer matches.
    /// On the screen corpus level 3 gets nearly all of level 9's ratio (26.5 against 27.1 on 420v) at a quarter of
    /// its encoding time (docs/BENCHMARKS.md).
    static let highCompressionLevel: Int = {
        if let value = unsafe getenv("FRAMEBUS_CODEC_HC_LEVEL"), let level = Int(unsafe String(cString: value)) {
            return max(0, min(level, 12))
        }
        return 3
    }()

    /// Bytes of the private state ``compressHC(_:count:into:capacity:state:)`` needs (LZ4_sizeofStateHC), rounded
    /// up to 64.
    static let highCompressionStateByteCount = (Int(LZ4_sizeofStateHC()) + 63) & ~63

    /// Compresses as ``compress(_:count:into:capacity:)`` with liblz4's HC match search at
    /// ``highCompressionLevel``, in `state` (``highCompressionStateByteCount`` bytes, 8-byte aligned, reused:
    /// nothing is allocated). Returns the compressed size, or 0 when the result would not fit.
    static func compressHC(
        _ source: UnsafeRawPointer,
        count: Int,
        into destination: UnsafeMutableRawPointer,
        capacity: Int,
        state: UnsafeMutableRawPointer
    ) -> Int {
        guard highCompressionLevel > 0, count > 0, capacity > 0, count <= Int(Int32.max), capacity <= Int(Int32.max)
        else { return 0 }
        let written = unsafe LZ4_compress_HC_extStateHC(
            state,
            source.assumingMemoryBound(to: CChar.self),
            destination.assumingMemoryBound(to: CChar.self),
            Int32(count),
            Int32(capacity),
            Int32(highCompressionLevel)
        )
        return Int(written)
    }

    /// The match search level of ``compressHC(_:count:dictionary:dictionaryCount:into:capacity:state:)`` (the Up
    /// modes): level 9, or ``highCompressionLevel`` when that is higher, or off when that is 0; or the level
    /// `FRAMEBUS_CODEC_UP_LEVEL` gives (1...12, for measurements), read once per process. Only tiles whose packed
    /// payload LZ4 already compresses (screen content) try it.
    static let dictionaryLevel: Int = {
        if highCompressionLevel == 0 { return 0 }
        if let value = unsafe getenv("FRAMEBUS_CODEC_UP_LEVEL"), let level = Int(unsafe String(cString: value)) {
            return max(1, min(level, 12))
        }
        return max(9, highCompressionLevel)
    }()

    /// Compresses `count` bytes with liblz4's HC match search at ``dictionaryLevel``, letting matches reach into
    /// the `dictionaryCount` bytes at `dictionary` as if they preceded the source (only their last 64 KiB can be
    /// reached). `state` as for ``compressHC(_:count:into:capacity:state:)``. Returns the compressed size, or 0
    /// when the result would not fit.
    static func compressHC(
        _ source: UnsafeRawPointer,
        count: Int,
        dictionary: UnsafeRawPointer,
        dictionaryCount: Int,
        into destination: UnsafeMutableRawPointer,
        capacity: Int,
        state: UnsafeMutableRawPointer
    ) -> Int {
        let level = dictionaryLevel
        guard level > 0, count > 0, capacity > 0, dictionaryCount >= 0, count <= Int(Int32.max),
            capacity <= Int(Int32.max), dictionaryCount <= Int(Int32.max)
        else { return 0 }
        guard let stream = unsafe LZ4_initStreamHC(state, Int(LZ4_sizeofStateHC())) else { return 0 }
        unsafe LZ4_resetStreamHC_fast(stream, Int32(level))
        unsafe LZ4_loadDictHC(stream, dictionary.assumingMemoryBound(to: CChar.self), Int32(dictionaryCount))
        let written = unsafe LZ4_compress_HC_continue(
            stream,
            source.assumingMemoryBound(to: CChar.self),
            destination.assumingMemoryBound(to: CChar.self),
            Int32(count),
            Int32(capacity)
        )
        return Int(written)
    }

    /// The decoded size of `count` bytes of LZ4 block at `source` (private memory) if it obeys the LZ4 block rule of
    /// docs/COMPRESSED-LAYOUT.md §6.8 for an output of `capacity` bytes after `dictionaryCount` bytes of dictionary,
    /// else a negative number. The rule, not liblz4, is what decides: liblz4 accepts some blocks the rule refuses
    /// (offset 0, for one), and which ones depends on its version and code path; every block the rule accepts,
    /// liblz4 decodes as the rule says.
    static func check(_ source: UnsafeRawPointer, count: Int, capacity: Int, dictionaryCount: Int) -> Int {
        guard count > 0, capacity >= 0, dictionaryCount >= 0 else { return -1 }
        return unsafe csck_lz4_block_check(
            source.assumingMemoryBound(to: UInt8.self),
            count,
            capacity,
            dictionaryCount
        )
    }

    /// Bytes of the private state ``compress(_:count:dictionary:dictionaryCount:into:capacity:state:)`` needs
    /// (LZ4_sizeofState); smaller than ``highCompressionStateByteCount``, so it fits where that state would go.
    static let fastStateByteCount = Int(LZ4_sizeofState())

    /// Compresses as ``compress(_:count:into:capacity:)`` (liblz4's fast match search), letting matches reach into
    /// the `dictionaryCount` bytes at `dictionary` as if they preceded the source (only their last 64 KiB can be
    /// reached; LZ4_loadDict, then LZ4_compress_fast_continue). `state`: ``fastStateByteCount`` bytes, 8-byte
    /// aligned, reused. Returns the compressed size, or 0 when the result would not fit.
    static func compress(
        _ source: UnsafeRawPointer,
        count: Int,
        dictionary: UnsafeRawPointer,
        dictionaryCount: Int,
        into destination: UnsafeMutableRawPointer,
        capacity: Int,
        state: UnsafeMutableRawPointer
    ) -> Int {
        guard count > 0, capacity > 0, dictionaryCount >= 0, count <= Int(Int32.max), capacity <= Int(Int32.max)
        else { return 0 }
        guard let stream = unsafe LZ4_initStream(state, fastStateByteCount) else { return 0 }
        let reach = min(dictionaryCount, 65536)
        unsafe LZ4_loadDict(
            stream,
            (dictionary + (dictionaryCount - reach)).assumingMemoryBound(to: CChar.self),
            Int32(reach)
        )
        let written = unsafe LZ4_compress_fast_continue(
            stream,
            source.assumingMemoryBound(to: CChar.self),
            destination.assumingMemoryBound(to: CChar.self),
            Int32(count),
            Int32(capacity),
            1
        )
        return Int(written)
    }

    /// Decompresses as ``decompress(_:count:into:capacity:)``, with the `dictionaryCount` bytes at `dictionary`
    /// standing before the output (LZ4_decompress_safe_usingDict): a match may reach back into them, never
    /// before them. Safe against hostile input; `dictionary` must not overlap the output.
    static func decompress(
        _ source: UnsafeRawPointer,
        count: Int,
        dictionary: UnsafeRawPointer,
        dictionaryCount: Int,
        into destination: UnsafeMutableRawPointer,
        capacity: Int
    ) -> Int {
        guard count > 0, count <= Int(Int32.max), capacity <= Int(Int32.max), dictionaryCount >= 0,
            dictionaryCount <= Int(Int32.max)
        else { return -1 }
        let read = unsafe LZ4_decompress_safe_usingDict(
            source.assumingMemoryBound(to: CChar.self),
            destination.assumingMemoryBound(to: CChar.self),
            Int32(count),
            Int32(capacity),
            dictionary.assumingMemoryBound(to: CChar.self),
            Int32(dictionaryCount)
        )
        return Int(read)
    }

    /// Decompresses `count` bytes into at most `capacity` bytes; returns the decompressed size, or a negative
    /// value for malformed input. Safe against hostile input (LZ4_decompress_safe).
    static func decompress(
        _ source: UnsafeRawPointer,
        count: Int,
        into destination: UnsafeMutableRawPointer,
        capacity: Int
    ) -> Int {
        guard count > 0, count <= Int(Int32.max), capacity <= Int(Int32.max) else { return -1 }
        let read = unsafe LZ4_decompress_safe(
            source.assumingMemoryBound(to: CChar.self),
            destination.assumingMemoryBound(to: CChar.self),
            Int32(count),
            Int32(capacity)
        )
        return Int(read)
    }

    /// Worst-case compressed size (LZ4_compressBound).
    static func bound(_ count: Int) -> Int { Int(LZ4_compressBound(Int32(clamping: count))) }
}

extension LZ4Block {
    /// `compress` over arrays: returns the compressed size, 0 if it does not fit.
    static func compress(_ source: [UInt8], into destination: inout [UInt8]) -> Int {
        unsafe source.withUnsafeBytes { input in
            unsafe destination.withUnsafeMutableBytes { output in
                guard let inputBase = input.baseAddress, let outputBase = output.baseAddress else { return 0 }
                return unsafe compress(inputBase, count: input.count, into: outputBase, capacity: output.count)
            }
        }
    }

    /// `decompress` of the first `count` bytes of `source` over arrays: the decompressed size, or negative.
    static func decompress(_ source: [UInt8], count: Int, into destination: inout [UInt8]) -> Int {
        guard count >= 0, count <= source.count else { return -1 }
        return unsafe source.withUnsafeBytes { input in
            unsafe destination.withUnsafeMutableBytes { output in
                guard let inputBase = input.baseAddress, let outputBase = output.baseAddress else { return -1 }
                return unsafe decompress(inputBase, count: count, into: outputBase, capacity: output.count)
            }
        }
    }
}


/// LZ4 blocks with Huffman-coded literals (layout version 6, docs/COMPRESSED-LAYOUT.md §6.6), in C.
extension LZ4Block {
    /// How much smaller, in percent of the LZ4 block, a coded block must be to be kept (6 by default): decoding the
    /// literals costs about as much as LZ4-decoding the block they rebuild, so small savings are not worth it. On
    /// the screen corpus, 0 gives 420v / x420 / BGRA 30.7 / 41.0 / 51.3 at 0.32 / 0.36 / 0.48 × LZ4's decode speed,
    /// 6 gives 30.2 / 40.5 / 50.5 at 0.51 / 0.46 / 0.65 (version 5: 29.6 / 39.5 / 49.3 at 0.60 / 0.55–0.63 / 0.69).
    /// `FRAMEBUS_CODEC_CODED_SAVING` sets it (0...100, 100 turns coded literals off), read once per process.
    static let codedLiteralsMinimumSaving: Int = {
        if let value = unsafe getenv("FRAMEBUS_CODEC_CODED_SAVING"), let percent = Int(unsafe String(cString: value)) {
            return max(0, min(percent, 100))
        }
        return 6
    }()

    /// How many times smaller than its samples a tile's LZ4 block must be for its literals to be coded (4 by
    /// default): literal decoding costs time per literal, so it pays where literals are few for the bytes they help
    /// make (screen content), not in photographs' LZ4 tiles, whose literals are most of the block and save little.
    /// Measured (`framebus bench codec`, one thread, medians of four rounds): with 4, only photographs' flat tiles
    /// are coded (kodak and skimage at most 0.1 % smaller than version 5, decode speed within noise of version 5's)
    /// while the screen corpus keeps every gain of coding (30.22 / 40.50 / 50.47); with 1, skimage 420v was 0.05 %
    /// smaller and decoded at 0.50× LZ4 instead of 0.57×. `FRAMEBUS_CODEC_CODED_RATIO` sets it (1...1000), read once per process.
    static let codedLiteralsMinimumRatio: Int = {
        if let value = unsafe getenv("FRAMEBUS_CODEC_CODED_RATIO"), let ratio = Int(unsafe String(cString: value)) {
            return max(1, min(ratio, 1000))
        }
        return 4
    }()

    /// Codes the LZ4 block `block` (`count` bytes, written by liblz4) with its literals Huffman-coded into at most
    /// `capacity` bytes of `destination`; returns the coded size, or 0 when it would not fit.
    static func codeLiterals(
        _ block: UnsafeRawPointer,
        count: Int,
        into destination: UnsafeMutableRawPointer,
        capacity: Int
    ) -> Int {
        guard count > 0, capacity > 0 else { return 0 }
        return unsafe csck_huff_lz4_encode(
            block.assumingMemoryBound(to: UInt8.self),
            count,
            destination.assumingMemoryBound(to: UInt8.self),
            capacity
        )
    }

    /// Rebuilds the LZ4 block of the coded block `payload` (`count` bytes of private memory) into `destination`
    /// (`capacity` bytes). Returns the block's size, or a negative number when the coded block is invalid.
    static func decodeLiterals(
        _ payload: UnsafeRawPointer,
        count: Int,
        into destination: UnsafeMutableRawPointer,
        capacity: Int
    ) -> Int {
        guard count > 0, capacity > 0 else { return -1 }
        return unsafe csck_huff_lz4_decode(
            payload.assumingMemoryBound(to: UInt8.self),
            count,
            destination.assumingMemoryBound(to: UInt8.self),
            capacity
        )
    }

    /// Decodes the coded block `payload` (`count` bytes of private memory) in one pass into `destination`
    /// (`capacity` bytes), the `dictionaryCount` bytes before it serving as dictionary (§6.5), its block at most
    /// `blockCapacity` bytes, its literals first decoded into `scratch` (`scratchCapacity` ≥ `blockCapacity` bytes,
    /// private; csck_huff_lz4_decompress). Returns the decoded size, or a negative number:
    /// ``undecided`` when only liblz4 can judge the block (rebuild it with
    /// ``decodeLiterals(_:count:into:capacity:)`` and decompress that), any other when the coded block is invalid.
    static func decompressCoded(
        _ payload: UnsafeRawPointer,
        count: Int,
        blockCapacity: Int,
        dictionaryCount: Int,
        into destination: UnsafeMutableRawPointer,
        capacity: Int,
        scratch: UnsafeMutableRawPointer,
        scratchCapacity: Int
    ) -> Int {
        guard count > 0, blockCapacity > 0, capacity > 0, dictionaryCount >= 0, scratchCapacity >= blockCapacity
        else { return -1 }
        guard decodesCodedBlocksInOnePass else { return undecided }
        return unsafe csck_huff_lz4_decompress(
            payload.assumingMemoryBound(to: UInt8.self),
            count,
            blockCapacity,
            destination.assumingMemoryBound(to: UInt8.self),
            dictionaryCount,
            capacity,
            scratch.assumingMemoryBound(to: UInt8.self),
            scratchCapacity
        )
    }

    /// Whether coded blocks are decoded in one pass (the default), or, with `FRAMEBUS_CODEC_FUSED=0` (read once per
    /// process, for measurements), rebuilt and given to liblz4 as every block was in version 6's first decoder.
    static let decodesCodedBlocksInOnePass: Bool = {
        if let value = unsafe getenv("FRAMEBUS_CODEC_FUSED") { return unsafe String(cString: value) != "0" }
        return true
    }()

    /// The answer of ``decompressCoded(_:count:blockCapacity:dictionaryCount:into:capacity:scratch:scratchCapacity:)``
    /// for a block liblz4 must judge.
    static let undecided = Int(CSCK_HUFF_UNDECIDED)
}

/// LZ4 blocks stored as coded sequences (layout version 7, docs/COMPRESSED-LAYOUT.md §6.7), in C.
extension LZ4Block {
    /// How much smaller, in percent of the LZ4 block, a sequence-coded block must be than the best of the block and
    /// its coded-literals form to be kept (20 by default): decoding its streams costs time per block and per symbol.
    /// On the screen corpus (one thread, medians of five alternating rounds, each stream coded where it saves 20 %),
    /// 3 gave 420v / x420 / BGRA 33.59 / 44.73 / 58.24 decoding at 0.51 / 0.57 / 0.57× LZ4, 20 gives 32.01 / 43.19 /
    /// 55.68 at 0.61 / 0.62 / 0.67× (version 6 in the same runs: 30.22 / 40.50 / 50.47 at 0.66 / 0.62 / 0.62×).
    /// Swept again with the faster stream decoder and match copies (docs/BENCHMARKS.md): 12, 8 and 5 gave 420v 33.02 /
    /// 33.43 / 33.54 but decoding at 0.57 / 0.52 / 0.50× LZ4, against 0.65× at 20, so 20 stays.
    /// `FRAMEBUS_CODEC_SEQUENCE_SAVING` sets it (0...100, 100 turns coded sequences off), read once per process.
    static let codedSequencesMinimumSaving: Int = {
        if let value = unsafe getenv("FRAMEBUS_CODEC_SEQUENCE_SAVING"),
            let percent = Int(unsafe String(cString: value))
        {
            return max(0, min(percent, 100))
        }
        return 20
    }()

    /// How much smaller, in percent of its symbol count, a stream of a sequence-coded block must be Huffman-coded to
    /// be stored that way (20 by default; else it is stored and the decoder uses it where it is): decoding costs time
    /// per symbol, and the streams differ in what coding saves per symbol (on the screen corpus, about 50 % for the
    /// length bytes, 38 % for the offset high bytes, 19 % for the tokens, 10 % for the offset low bytes and 7 % for
    /// the literals). `FRAMEBUS_CODEC_STREAM_SAVING` sets it (0...100), read once per process.
    static let codedSequencesStreamSaving: Int = {
        if let value = unsafe getenv("FRAMEBUS_CODEC_STREAM_SAVING"), let percent = Int(unsafe String(cString: value)) {
            return max(0, min(percent, 100))
        }
        return 20
    }()

    /// Codes the LZ4 block `block` (`count` bytes, written by liblz4) as coded sequences into at most `capacity`
    /// bytes of `destination` (written only when it fits), the streams gathered in `scratch` (`count` private bytes,
    /// apart from both). Returns the coded size, or 0 when it would not fit.
    static func codeSequences(
        _ block: UnsafeRawPointer,
        count: Int,
        into destination: UnsafeMutableRawPointer,
        capacity: Int,
        scratch: UnsafeMutableRawPointer
    ) -> Int {
        guard count > 0, capacity > 0 else { return 0 }
        return unsafe csck_seq_lz4_encode(
            block.assumingMemoryBound(to: UInt8.self),
            count,
            destination.assumingMemoryBound(to: UInt8.self),
            capacity,
            scratch.assumingMemoryBound(to: UInt8.self),
            UInt32(codedSequencesStreamSaving)
        )
    }

    /// Rebuilds the LZ4 block of the sequence-coded block `payload` (`count` bytes of private memory) into
    /// `destination` (`capacity` bytes; it may be `payload` itself: the streams are decoded into `scratch`, private,
    /// `scratchCapacity` bytes, before the block is written). Returns the block's size, or a negative number when the
    /// coded block is invalid.
    static func decodeSequences(
        _ payload: UnsafeRawPointer,
        count: Int,
        into destination: UnsafeMutableRawPointer,
        capacity: Int,
        scratch: UnsafeMutableRawPointer,
        scratchCapacity: Int
    ) -> Int {
        guard count > 0, capacity > 0, scratchCapacity > 0 else { return -1 }
        return unsafe csck_seq_lz4_decode(
            payload.assumingMemoryBound(to: UInt8.self),
            count,
            destination.assumingMemoryBound(to: UInt8.self),
            capacity,
            scratch.assumingMemoryBound(to: UInt8.self),
            scratchCapacity
        )
    }

    /// ``decompressCoded(_:count:blockCapacity:dictionaryCount:into:capacity:scratch:scratchCapacity:)`` for a
    /// sequence-coded block (csck_seq_lz4_decompress): its streams decoded into `scratch`, the sequences executed
    /// into `destination`; ``undecided`` when only liblz4 can judge the block (rebuild it with
    /// ``decodeSequences(_:count:into:capacity:scratch:scratchCapacity:)``).
    static func decompressSequenceCoded(
        _ payload: UnsafeRawPointer,
        count: Int,
        blockCapacity: Int,
        dictionaryCount: Int,
        into destination: UnsafeMutableRawPointer,
        capacity: Int,
        scratch: UnsafeMutableRawPointer,
        scratchCapacity: Int
    ) -> Int {
        guard count > 0, blockCapacity > 0, capacity > 0, dictionaryCount >= 0, scratchCapacity >= blockCapacity
        else { return -1 }
        guard decodesCodedBlocksInOnePass else { return undecided }
        return unsafe csck_seq_lz4_decompress(
            payload.assumingMemoryBound(to: UInt8.self),
            count,
            blockCapacity,
            destination.assumingMemoryBound(to: UInt8.self),
            dictionaryCount,
            capacity,
            scratch.assumingMemoryBound(to: UInt8.self),
            scratchCapacity
        )
    }
}
