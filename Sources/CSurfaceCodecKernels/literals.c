// LZ4 blocks with Huffman-coded literals (docs/COMPRESSED-LAYOUT.md §6.6, layout version 6).
//
// A "coded block" is an LZ4 block split in two streams: its literal bytes, coded with a canonical Huffman code
// of at most CSCK_HUFF_MAX_BITS bits, and everything else (tokens, length extensions, offsets) verbatim. The
// decoder (csck_huff_lz4_decompress) decodes the literals into private scratch and executes the sequences straight
// into the output, exactly as liblz4 would decode the LZ4 block; where liblz4's verdict could differ it answers
// "undecided" and the caller rebuilds the block (csck_huff_lz4_decode) for liblz4. So the dictionary rules of the
// Up modes and the packed payload rules are unchanged.
#include "CSurfaceCodecKernels.h"

#include <string.h>

#define TABLE_SIZE (1u << CSCK_HUFF_MAX_BITS)
/// The decoding table's entry for a bit pattern no code starts with: length 0, and a bit no symbol entry has (the
/// decoder ORs the entries it meets and tests that bit once per literal run), outside `entry & 63` (the length).
#define INVALID_ENTRY 0x40u

static inline uint32_t load32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void store32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/// The low `length` bits of `code` in reverse order (length 1...16).
static inline uint32_t reverse_bits(uint32_t code, unsigned length) {
    uint32_t r = code & 0xFFFF;
    r = (r >> 1 & 0x5555) | (r & 0x5555) << 1;
    r = (r >> 2 & 0x3333) | (r & 0x3333) << 2;
    r = (r >> 4 & 0x0F0F) | (r & 0x0F0F) << 4;
    r = (r >> 8 & 0x00FF) | (r & 0x00FF) << 8;
    return r >> (16 - length);
}

/// Canonical codes from lengths: symbols sorted by (length, symbol value), codes counting up. Returns 0 when the
/// lengths over-subscribe the code space (Kraft sum above 1), else 1. `codes` get the bit-reversed code (the
/// first code bit in bit 0), as written into the LSB-first stream.
static int canonical_codes(const uint8_t lengths[256], uint32_t codes[256]) {
    uint32_t count[CSCK_HUFF_MAX_BITS + 1] = {0};
    for (unsigned s = 0; s < 256; s++) count[lengths[s]] += 1;
    count[0] = 0;
    uint32_t next[CSCK_HUFF_MAX_BITS + 2] = {0};
    uint32_t code = 0;
    uint32_t space = 0;  // Kraft sum in units of 2^-MAX_BITS
    for (unsigned l = 1; l <= CSCK_HUFF_MAX_BITS; l++) {
        code = (code + count[l - 1]) << 1;
        next[l] = code;
        space += count[l] << (CSCK_HUFF_MAX_BITS - l);
    }
    if (space > TABLE_SIZE) return 0;
    for (unsigned s = 0; s < 256; s++) {
        unsigned l = lengths[s];
        if (l == 0) continue;
        codes[s] = reverse_bits(next[l], l);
        next[l] += 1;
    }
    return 1;
}

// MARK: Encoder

/// Walks an LZ4 block made by liblz4 (trusted). For each sequence calls the visitor with the literal run and the
/// bytes of the rest of the sequence. Returns 0 when the block does not parse.
typedef struct {
    size_t literalCount;
    size_t sequenceBytes;
    uint32_t frequency[256];
} block_stats;

static int walk_block(const uint8_t *block, size_t n, block_stats *stats, uint8_t *sequences, uint8_t *bitsOut,
                      size_t bitsCapacity, const uint8_t *lengths, const uint32_t *codes, size_t *bitsWritten) {
    size_t i = 0;
    size_t s = 0;
    uint64_t accumulator = 0;
    unsigned filled = 0;
    size_t out = 0;
    while (i < n) {
        size_t start = i;
        uint8_t token = block[i++];
        size_t literals = token >> 4;
        if (literals == 15) {
            uint8_t b;
            do {
                if (i >= n) return 0;
                b = block[i++];
                literals += b;
            } while (b == 255);
        }
        if (sequences) {
            memcpy(sequences + s, block + start, i - start);
        }
        s += i - start;
        if (literals > n - i) return 0;
        if (stats) {
            for (size_t k = 0; k < literals; k++) stats->frequency[block[i + k]] += 1;
            stats->literalCount += literals;
        }
        if (bitsOut) {
            for (size_t k = 0; k < literals; k++) {
                uint8_t symbol = block[i + k];
                accumulator |= (uint64_t)codes[symbol] << filled;
                filled += lengths[symbol];
                while (filled >= 8) {
                    if (out >= bitsCapacity) return 0;
                    bitsOut[out++] = (uint8_t)accumulator;
                    accumulator >>= 8;
                    filled -= 8;
                }
            }
        }
        i += literals;
        if (i == n) break;  // the last sequence has no match
        start = i;
        if (n - i < 2) return 0;
        i += 2;
        if ((token & 15) == 15) {
            uint8_t b;
            do {
                if (i >= n) return 0;
                b = block[i++];
            } while (b == 255);
        }
        if (sequences) memcpy(sequences + s, block + start, i - start);
        s += i - start;
    }
    if (bitsOut && filled > 0) {
        if (out >= bitsCapacity) return 0;
        bitsOut[out++] = (uint8_t)accumulator;
    }
    if (bitsWritten) *bitsWritten = out;
    if (stats) stats->sequenceBytes = s;
    return 1;
}

/// Huffman code lengths of at most CSCK_HUFF_MAX_BITS bits for these frequencies (0 for absent symbols). A
/// single present symbol gets length 1. Over-long codes are avoided by halving the frequencies and rebuilding.
/// The two-queue construction: leaves sorted by (frequency, symbol), merged nodes come out in non-decreasing
/// weight order, so the two lightest are always at the queues' fronts (a leaf first on a tie): O(n log n).
static void code_lengths(const uint32_t frequency[256], uint8_t lengths[256]) {
    uint32_t f[256];
    memcpy(f, frequency, sizeof f);
    memset(lengths, 0, 256);
    for (;;) {
        uint64_t key[256];
        unsigned n = 0;
        for (unsigned s = 0; s < 256; s++)
            if (f[s] > 0) key[n++] = (uint64_t)f[s] << 8 | s;
        if (n == 0) return;
        if (n == 1) {
            lengths[key[0] & 255] = 1;
            return;
        }
        // Insertion sort of at most 256 keys (frequency, then symbol).
        for (unsigned i = 1; i < n; i++) {
            uint64_t k = key[i];
            unsigned j = i;
            while (j > 0 && key[j - 1] > k) {
                key[j] = key[j - 1];
                j -= 1;
            }
            key[j] = k;
        }
        // Nodes: 0..<n leaves (sorted), n..<2n-1 merged; parent links, then depths from the root down.
        uint64_t weight[511];
        unsigned parent[511];
        for (unsigned i = 0; i < n; i++) weight[i] = key[i] >> 8;
        unsigned leaf = 0, merged = n, next = n;
        for (unsigned m = 0; m + 1 < n; m++) {
            unsigned pick[2];
            for (int k = 0; k < 2; k++) {
                if (leaf < n && (merged >= next || weight[leaf] <= weight[merged])) {
                    pick[k] = leaf++;
                } else {
                    pick[k] = merged++;
                }
            }
            weight[next] = weight[pick[0]] + weight[pick[1]];
            parent[pick[0]] = parent[pick[1]] = next;
            next += 1;
        }
        unsigned depth[511];
        unsigned root = next - 1;
        depth[root] = 0;
        for (unsigned i = root; i-- > 0;) depth[i] = depth[parent[i]] + 1;
        unsigned longest = 0;
        for (unsigned i = 0; i < n; i++) {
            lengths[key[i] & 255] = (uint8_t)depth[i];
            if (depth[i] > longest) longest = depth[i];
        }
        if (longest <= CSCK_HUFF_MAX_BITS) return;
        memset(lengths, 0, 256);
        for (unsigned s = 0; s < 256; s++)
            if (f[s] > 0) f[s] = (f[s] >> 1) | 1;
    }
}

size_t csck_huff_lz4_encode(const uint8_t *block, size_t count, uint8_t *out, size_t capacity) {
    if (count == 0 || count > UINT32_MAX) return 0;
    block_stats stats;
    memset(&stats, 0, sizeof stats);
    if (!walk_block(block, count, &stats, NULL, NULL, 0, NULL, NULL, NULL)) return 0;
    if (stats.sequenceBytes == 0) return 0;
    uint8_t lengths[256];
    code_lengths(stats.frequency, lengths);
    uint32_t codes[256] = {0};
    if (!canonical_codes(lengths, codes)) return 0;
    uint64_t bits = 0;
    for (unsigned s = 0; s < 256; s++) bits += (uint64_t)stats.frequency[s] * lengths[s];
    size_t bitBytes = (size_t)((bits + 7) / 8);
    unsigned present = 0;
    for (unsigned s = 0; s < 256; s++) present += lengths[s] > 0;
    size_t header = CSCK_HUFF_HEADER_BYTES + (present + 1) / 2;
    size_t total = header + bitBytes + stats.sequenceBytes;
    if (total > capacity) return 0;
    store32(out, (uint32_t)stats.literalCount);
    store32(out + 4, (uint32_t)stats.sequenceBytes);
    memset(out + 8, 0, 32 + (present + 1) / 2);
    unsigned k = 0;
    for (unsigned s = 0; s < 256; s++) {
        if (lengths[s] == 0) continue;
        out[8 + s / 8] |= (uint8_t)(1u << (s % 8));
        out[40 + k / 2] |= (uint8_t)(lengths[s] << (4 * (k % 2)));
        k += 1;
    }
    size_t written = 0;
    uint8_t *bitStream = out + header;
    if (!walk_block(block, count, NULL, NULL, bitStream, bitBytes, lengths, codes, &written)) return 0;
    if (written != bitBytes) return 0;
    if (!walk_block(block, count, NULL, bitStream + bitBytes, NULL, 0, NULL, NULL, NULL)) return 0;
    return total;
}

// MARK: Decoder

/// Refill: at least 56 valid bits in the buffer; bytes past the stream read as zero.
#define REFILL()                                                                      \
    do {                                                                              \
        if (position + 8 <= bitBytes) {                                               \
            uint64_t word;                                                            \
            memcpy(&word, bitStream + position, 8);                                   \
            buffer |= word << available;                                              \
            position += (63 - available) >> 3;                                       \
            available |= 56;                                                          \
        } else {                                                                      \
            while (available <= 56) {                                                 \
                uint64_t byte = position < bitBytes ? bitStream[position] : 0;        \
                buffer |= byte << available;                                          \
                position += 1;                                                        \
                available += 8;                                                       \
            }                                                                         \
        }                                                                             \
    } while (0)

/* One literal: its table entry (symbol << 8 | code length) at the next bits, ORed into `invalid` (INVALID_ENTRY
 * marks a pattern no code word starts with). `entry & 63` is the length (INVALID_ENTRY's is 0): a shift x86 takes
 * as it is, one step less on the chain from one code to the next. */
#define DECODE_ONE(to)                                                    \
    do {                                                                  \
        uint16_t entry = table[buffer & mask];                            \
        unsigned l = entry & 63;                                          \
        invalid |= entry;                                                 \
        *(to) = (uint8_t)(entry >> 8);                                    \
        buffer >>= l;                                                     \
        available -= l;                                                   \
    } while (0)

/* Decodes `run` literals into `out`, 5 per refill (5 × 11 bits ≤ the 56 a refill leaves). */
#define DECODE_LITERALS(out, run)                                         \
    do {                                                                  \
        uint8_t *to = (out);                                              \
        size_t left = (run);                                              \
        while (left >= 5) {                                               \
            REFILL();                                                     \
            for (int k = 0; k < 5; k++) DECODE_ONE(to + k);               \
            to += 5;                                                      \
            left -= 5;                                                    \
        }                                                                 \
        if (left > 0) {                                                   \
            REFILL();                                                     \
            for (size_t k = 0; k < left; k++) DECODE_ONE(to + k);         \
        }                                                                 \
    } while (0)

/// A coded block's header, checked (rules 1 and 2 of §6.6), and its decoding table.
typedef struct {
    size_t literalCount;
    size_t sequenceBytes;
    size_t bitBytes;
    const uint8_t *bitStream;
    const uint8_t *sequences;
    uint64_t mask;
    uint16_t table[TABLE_SIZE];
} coded_block;

/// Reads and checks the header of `payload` (`count` bytes, private): sizes (with `S + L ≤ blockCapacity`) and
/// code lengths, and builds the table. Returns 0 or a CSCK_HUFF_ error.
static ptrdiff_t read_header(const uint8_t *payload, size_t count, size_t blockCapacity, coded_block *b) {
    if (count < CSCK_HUFF_HEADER_BYTES) return CSCK_HUFF_BAD_SIZE;
    size_t literalCount = load32(payload);
    size_t sequenceBytes = load32(payload + 4);
    // The code lengths: a bitmap of the symbols that have a code, then one nibble per such symbol.
    unsigned present = 0;
    for (unsigned k = 0; k < 32; k++) present += (unsigned)__builtin_popcount(payload[8 + k]);
    size_t header = CSCK_HUFF_HEADER_BYTES + (present + 1) / 2;
    if (count < header) return CSCK_HUFF_BAD_SIZE;
    size_t rest = count - header;
    if (sequenceBytes == 0 || sequenceBytes > rest) return CSCK_HUFF_BAD_SIZE;
    // Both are below 2^32: the sum cannot wrap a 64-bit size_t.
    if (literalCount + sequenceBytes > blockCapacity) return CSCK_HUFF_BAD_SIZE;
    b->literalCount = literalCount;
    b->sequenceBytes = sequenceBytes;
    b->bitBytes = rest - sequenceBytes;
    b->bitStream = payload + header;
    b->sequences = b->bitStream + b->bitBytes;

    // The present symbols in increasing order (the bitmap's set bits) and their lengths, checked (rule 2).
    uint8_t symbols[256];
    uint8_t lengths[256];
    unsigned k = 0;
    unsigned bits = 1;  // the longest length
    uint32_t perLength[CSCK_HUFF_MAX_BITS + 1] = {0};
    for (unsigned byte = 0; byte < 32; byte++) {
        unsigned set = payload[8 + byte];
        while (set != 0) {
            const unsigned symbol = byte * 8 + (unsigned)__builtin_ctz(set);
            set &= set - 1;
            const unsigned l = (payload[40 + k / 2] >> (4 * (k % 2))) & 15;
            if (l == 0 || l > CSCK_HUFF_MAX_BITS) return CSCK_HUFF_BAD_TABLE;
            symbols[k] = (uint8_t)symbol;
            lengths[k] = (uint8_t)l;
            perLength[l] += 1;
            if (l > bits) bits = l;
            k += 1;
        }
    }
    if (present % 2 == 1 && (payload[40 + present / 2] >> 4) != 0) return CSCK_HUFF_BAD_TABLE;
    // Canonical codes (as canonical_codes): the first code of each length, then symbols in order take the next.
    uint32_t next[CSCK_HUFF_MAX_BITS + 1] = {0};
    uint32_t code = 0;
    uint32_t space = 0;  // Kraft sum in units of 2^-MAX_BITS
    for (unsigned l = 1; l <= CSCK_HUFF_MAX_BITS; l++) {
        code = (code + perLength[l - 1]) << 1;
        next[l] = code;
        space += perLength[l] << (CSCK_HUFF_MAX_BITS - l);
    }
    if (space > TABLE_SIZE) return CSCK_HUFF_BAD_TABLE;
    // The table, indexed by the next `bits` bits (a small table for a small alphabet: building it is a fixed cost
    // per block): entry = symbol << 8 | length; INVALID_ENTRY (length 0) marks a bit pattern no code starts with.
    // A complete code (what Huffman's algorithm gives) fills every entry; else the others are marked first.
    const uint32_t size = 1u << bits;
    if (space < TABLE_SIZE)
        for (uint32_t c = 0; c < size; c++) b->table[c] = INVALID_ENTRY;
    for (unsigned i = 0; i < k; i++) {
        const unsigned l = lengths[i];
        const uint16_t entry = (uint16_t)(symbols[i] << 8 | l);
        for (uint32_t c = reverse_bits(next[l]++, l); c < size; c += 1u << l) b->table[c] = entry;
    }
    b->mask = size - 1;
    return 0;
}

/// Rule 3's end of the bit stream: exactly its bytes used (the last code ends in its last byte) and the bits
/// after the last code zero. `position`, `available`, `buffer`: the bit reader's state after the last code.
static int stream_ends_well(size_t bitBytes, size_t position, unsigned available, uint64_t buffer) {
    size_t consumed = position * 8 - available;
    if (consumed > bitBytes * 8 || consumed + 8 <= bitBytes * 8) return 0;
    unsigned padding = (unsigned)(bitBytes * 8 - consumed);
    return padding == 0 || (buffer & ((1u << padding) - 1)) == 0;
}

ptrdiff_t csck_huff_lz4_decode(const uint8_t *payload, size_t count, uint8_t *out, size_t capacity) {
    coded_block block;
    ptrdiff_t status = read_header(payload, count, capacity, &block);
    if (status != 0) return status;
    const size_t literalCount = block.literalCount;
    const size_t sequenceBytes = block.sequenceBytes;
    const size_t bitBytes = block.bitBytes;
    const uint8_t *const bitStream = block.bitStream;
    const uint8_t *const sequences = block.sequences;
    const uint16_t *const table = block.table;
    const uint64_t mask = block.mask;

    // One pass over the sequence stream: each sequence's token (and literal length bytes), its literals decoded
    // straight into place, then its offset and match length bytes; the last sequence ends after its literals.
    // Every write is below S + L ≤ capacity: the sequence bytes copied never exceed S, the literals never L.
    uint64_t buffer = 0;
    unsigned available = 0;
    size_t position = 0;
    unsigned invalid = 0;
    size_t s = 0;
    size_t o = 0;
    size_t used = 0;
    while (s < sequenceBytes) {
        uint8_t token = sequences[s++];
        out[o++] = token;
        size_t run = token >> 4;
        if (run == 15) {
            uint8_t b;
            do {
                if (s >= sequenceBytes) return CSCK_HUFF_BAD_SEQUENCES;
                b = sequences[s++];
                out[o++] = b;
                run += b;
            } while (b == 255 && run <= literalCount);
        }
        if (run > literalCount - used) return CSCK_HUFF_BAD_SEQUENCES;
        DECODE_LITERALS(out + o, run);
        if (invalid & INVALID_ENTRY) return CSCK_HUFF_BAD_CODE;
        if (position > bitBytes + 8) return CSCK_HUFF_BAD_CODE;  // far past the stream's end
        o += run;
        used += run;
        if (s == sequenceBytes) break;
        if (sequenceBytes - s < 2) return CSCK_HUFF_BAD_SEQUENCES;
        out[o] = sequences[s];
        out[o + 1] = sequences[s + 1];
        o += 2;
        s += 2;
        if ((token & 15) == 15) {
            uint8_t b;
            do {
                if (s >= sequenceBytes) return CSCK_HUFF_BAD_SEQUENCES;
                b = sequences[s++];
                out[o++] = b;
            } while (b == 255);
        }
    }
    if (used != literalCount) return CSCK_HUFF_BAD_SEQUENCES;
    if (!stream_ends_well(bitBytes, position, available, buffer)) return CSCK_HUFF_BAD_CODE;
    return (ptrdiff_t)o;
}

// MARK: Fused decoder

/// Copies an LZ4 match of `length` bytes from `offset` bytes back (1 ≤ offset ≤ what lies before `d` in the buffer),
/// byte for byte in effect (a match may overlap its own output), with whole stores that may write up to 15 bytes
/// past the match's end (the caller leaves 16 bytes of room).
static inline __attribute__((always_inline)) void copy_match_wide(uint8_t *d, size_t offset, size_t length) {
    const uint8_t *m = d - offset;
    uint8_t *const end = d + length;
    if (offset >= 16) {
        // Each 16-byte load ends at or before the store that overlaps it began: earlier stores are complete.
        do {
            memcpy(d, m, 16);
            d += 16;
            m += 16;
        } while (d < end);
    } else if (offset >= 8) {
        do {
            memcpy(d, m, 8);
            d += 8;
            m += 8;
        } while (d < end);
    } else if (offset == 1) {
        memset(d, *m, length);  // runs of one value, often long in screen content
    } else {
        // A period of 2...7 bytes: 16 bytes per step from two 8-byte words held in registers (no load of bytes just
        // stored). The first word repeats the period's bytes. A word `a` bytes further into the output starts
        // `r = a mod period` bytes further into the period: the word shifted down by r bytes, its top filled from
        // `period − r` bytes up (rotate, below). The one load may read bytes at and after `d` (in the room); their
        // values are not used.
        uint64_t word;
        memcpy(&word, m, 8);
        const unsigned bits = 8 * (unsigned)offset;
        uint64_t low = word & ((UINT64_C(1) << bits) - 1);
        for (unsigned shift = bits; shift < 64; shift *= 2) low |= low << shift;
        const unsigned down8 = 8 * (8 % (unsigned)offset);
        uint64_t high = (low >> down8) | (low << (bits - down8));
        const unsigned down = 8 * (16 % (unsigned)offset);
        const unsigned up = bits - down;  // 8...56
        if (down == 0) {
            // Periods 2 and 4 divide 16: the same two words throughout.
            do {
                memcpy(d, &low, 8);
                memcpy(d + 8, &high, 8);
                d += 16;
            } while (d < end);
        } else {
            do {
                memcpy(d, &low, 8);
                memcpy(d + 8, &high, 8);
                d += 16;
                low = (low >> down) | (low << up);
                high = (high >> down) | (high << up);
            } while (d < end);
        }
    }
}

/// Copies an LZ4 match as copy_match_wide does, writing nothing at or past `d + room` (room ≥ length): near the
/// buffer's end (a block's last match often runs to 5 bytes before it) all but its last bytes still go wide.
static inline __attribute__((always_inline)) void copy_match(uint8_t *d, size_t offset, size_t length,
                                                             size_t room) {
    if (length + 16 <= room) {
        copy_match_wide(d, offset, length);
        return;
    }
    size_t bulk = room > 16 ? room - 16 : 0;  // < length here
    if (bulk > 0) copy_match_wide(d, offset, bulk);
    for (size_t k = bulk; k < length; k++) d[k] = d[k - offset];
}

ptrdiff_t csck_huff_lz4_decompress(const uint8_t *payload, size_t count, size_t blockCapacity, uint8_t *out,
                                   size_t dictionaryCount, size_t capacity, uint8_t *scratch,
                                   size_t scratchCapacity) {
    coded_block block;
    ptrdiff_t status = read_header(payload, count, blockCapacity, &block);
    if (status != 0) return status;
    const size_t literalCount = block.literalCount;
    const size_t sequenceBytes = block.sequenceBytes;
    const size_t bitBytes = block.bitBytes;
    const uint8_t *const bitStream = block.bitStream;
    const uint8_t *const sequences = block.sequences;
    const uint16_t *const table = block.table;
    const uint64_t mask = block.mask;
    if (literalCount > scratchCapacity) return CSCK_HUFF_BAD_SIZE;  // L < blockCapacity ≤ scratchCapacity

    // 1. All L literals, in one run of the bit reader (no per-sequence stops), into `scratch`; then rule 3's end.
    {
        uint64_t buffer = 0;
        unsigned available = 0;
        size_t position = 0;
        unsigned invalid = 0;
        DECODE_LITERALS(scratch, literalCount);
        if (invalid & INVALID_ENTRY) return CSCK_HUFF_BAD_CODE;
        if (position > bitBytes + 8) return CSCK_HUFF_BAD_CODE;
        if (!stream_ends_well(bitBytes, position, available, buffer)) return CSCK_HUFF_BAD_CODE;
    }

    // 2. The sequences, executed into `out`. |B|, the LZ4 block's size: its read position before a sequence's
    // literals is `s + used` (the sequence bytes and literals before them), which the input rules compare with it.
    // Invariants: o ≤ capacity (every write is checked against `capacity − o` first); s ≤ S; used ≤ L.
    const size_t blockEnd = sequenceBytes + literalCount;
    const uint8_t *const literals = scratch;
    size_t s = 0;
    size_t o = 0;
    size_t used = 0;
    while (s < sequenceBytes) {
        const unsigned token = sequences[s++];
        size_t run = token >> 4;
        if (run == 15) {
            uint8_t b;
            do {
                if (s >= sequenceBytes) return CSCK_HUFF_BAD_SEQUENCES;
                b = sequences[s++];
                run += b;
            } while (b == 255 && run <= literalCount);
        }
        if (run > literalCount - used) return CSCK_HUFF_BAD_SEQUENCES;
        const size_t room = capacity - o;
        if (s < sequenceBytes) {
            // Not the last sequence: liblz4 takes it for one (and refuses the block, or not, depending on its
            // path) when its literals end within 12 bytes of the output's end or 8 of the block's.
            if (run > room || room - run < 12 || blockEnd - (s + used) < run + 8) return CSCK_HUFF_UNDECIDED;
            // 16 bytes at once when both sides have them (the extra bytes are written over later).
            if (run <= 16 && room >= 16 && used + 16 <= scratchCapacity) {
                memcpy(out + o, literals + used, 16);
            } else {
                memcpy(out + o, literals + used, run);
            }
        } else {
            if (run > room) return CSCK_HUFF_UNDECIDED;
            memcpy(out + o, literals + used, run);
        }
        o += run;
        used += run;
        if (s == sequenceBytes) break;
        if (sequenceBytes - s < 2) return CSCK_HUFF_BAD_SEQUENCES;
        const size_t offset = (size_t)sequences[s] | (size_t)sequences[s + 1] << 8;
        s += 2;
        size_t length = (token & 15) + 4;
        if ((token & 15) == 15) {
            uint8_t b;
            do {
                if (s >= sequenceBytes) return CSCK_HUFF_BAD_SEQUENCES;
                b = sequences[s++];
                length += b;  // at most 255 × S more: no wrap
            } while (b == 255);
            // liblz4 refuses match length bytes that reach into the block's last 4 bytes.
            if (blockEnd - (s + used) < 4) return CSCK_HUFF_UNDECIDED;
        }
        // Offset 0, a match reaching before the dictionary, or one ending in the output's last 5 bytes: liblz4
        // decides (it refuses most of these, but not on every path).
        const size_t left = capacity - o;
        if (offset == 0 || offset > o + dictionaryCount || length > left || left - length < 5)
            return CSCK_HUFF_UNDECIDED;
        copy_match(out + o, offset, length, left);
        o += length;
    }
    if (used != literalCount) return CSCK_HUFF_BAD_SEQUENCES;
    return (ptrdiff_t)o;
}
