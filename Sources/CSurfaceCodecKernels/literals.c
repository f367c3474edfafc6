// LZ4 blocks with Huffman-coded literals (docs/COMPRESSED-LAYOUT.md §6.6, layout version 6).
//
// A "coded block" is an LZ4 block split in two streams: its literal bytes, coded with a canonical Huffman code
// of at most CSCK_HUFF_MAX_BITS bits, and everything else (tokens, length extensions, offsets) verbatim. The
// decoder (csck_huff_lz4_decompress) decodes the literals into private scratch and executes the sequences straight
// into the output, exactly as liblz4 would decode the LZ4 block; where liblz4's verdict could differ it answers
// "undecided" and the caller rebuilds the block (csck_huff_lz4_decode) for liblz4. So the dictionary rules of the
// Up modes and the packed payload rules are unchanged.
#include "CSurfaceCodecKernels.h"

#include <math.h>
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
/// Sorts `n` ≤ 256 distinct keys ascending: runs of 1, 2, 4, … merged back and forth between `key` and a scratch
/// array. The same order as any other sort (the keys are distinct), so the same code lengths.
static void sort_keys(uint64_t *key, unsigned n) {
    uint64_t other[256];
    uint64_t *from = key, *to = other;
    for (unsigned width = 1; width < n; width *= 2) {
        for (unsigned start = 0; start < n; start += 2 * width) {
            unsigned middle = start + width < n ? start + width : n;
            unsigned end = start + 2 * width < n ? start + 2 * width : n;
            unsigned a = start, b = middle, k = start;
            while (a < middle && b < end) to[k++] = from[a] < from[b] ? from[a++] : from[b++];
            while (a < middle) to[k++] = from[a++];
            while (b < end) to[k++] = from[b++];
        }
        uint64_t *swap = from;
        from = to;
        to = swap;
    }
    if (from != key) memcpy(key, from, n * sizeof *key);
}

/// A lower bound on the bits of any prefix code of these symbol counts (their entropy, Σ f·log2(total / f), rounded
/// down with a margin for floating point), and how many symbols occur. No Huffman code, length-limited or not, is
/// shorter, so a stream whose bound already misses a size target can skip code_lengths (which repeats its tree
/// build while the longest code is over the limit: the encoder's largest cost on screen content).
static uint64_t entropy_bits_floor(const uint32_t frequency[256], unsigned *present) {
    uint64_t total = 0;
    unsigned n = 0;
    for (unsigned s = 0; s < 256; s++) {
        total += frequency[s];
        n += frequency[s] > 0;
    }
    *present = n;
    if (n <= 1) return 0;
    double bits = 0;
    const double logTotal = log2((double)total);
    for (unsigned s = 0; s < 256; s++)
        if (frequency[s] > 0) bits += (double)frequency[s] * (logTotal - log2((double)frequency[s]));
    bits = bits * (1 - 1e-9) - 1;
    return bits > 0 ? (uint64_t)bits : 0;
}

/// Huffman code lengths of the symbols with a count, the counts taken as `(f >> shift) | 1` when `shift` > 0
/// (what halving `f → (f >> 1) | 1` `shift` times gives); returns the longest length.
static unsigned huffman_lengths(const uint32_t frequency[256], unsigned shift, uint8_t lengths[256]) {
    memset(lengths, 0, 256);
    uint64_t key[256];
    unsigned n = 0;
    for (unsigned s = 0; s < 256; s++) {
        if (frequency[s] == 0) continue;
        const uint64_t f = shift == 0 ? frequency[s] : (shift >= 32 ? 0 : frequency[s] >> shift) | 1;
        key[n++] = f << 8 | s;
    }
    if (n == 0) return 0;
    if (n == 1) {
        lengths[key[0] & 255] = 1;
        return 1;
    }
    // Sort the keys (count, then symbol; all distinct): a bottom-up merge sort, n log n. An insertion sort here was
    // the encoder's largest cost on screen content (a block's five streams each built a code).
    sort_keys(key, n);
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
    return longest;
}

/// Code lengths of at most `limit` bits (8 or more: 256 symbols of equal count fit) from Huffman's algorithm over
/// the counts, halved (`f → (f >> 1) | 1`) until the code fits. Halving `k` times is one shift by `k`. (Doubling
/// `k`, then bisecting, built more trees on the screen corpus, whose streams need few halvings.)
static void code_lengths(const uint32_t frequency[256], uint8_t lengths[256], unsigned limit) {
    for (unsigned shift = 0; shift < 32; shift++)
        if (huffman_lengths(frequency, shift, lengths) <= limit) return;
    huffman_lengths(frequency, 32, lengths);
}

size_t csck_huff_lz4_encode(const uint8_t *block, size_t count, uint8_t *out, size_t capacity) {
    if (count == 0 || count > UINT32_MAX) return 0;
    block_stats stats;
    memset(&stats, 0, sizeof stats);
    if (!walk_block(block, count, &stats, NULL, NULL, 0, NULL, NULL, NULL)) return 0;
    if (stats.sequenceBytes == 0) return 0;
    {
        unsigned present;
        const uint64_t floorBits = entropy_bits_floor(stats.frequency, &present);
        if (CSCK_HUFF_HEADER_BYTES + (present + 1) / 2 + (floorBits + 7) / 8 + stats.sequenceBytes > capacity) return 0;
    }
    uint8_t lengths[256];
    code_lengths(stats.frequency, lengths, CSCK_HUFF_MAX_BITS);
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

/// Fills a decoding table of 2^`bits` entries (entry = symbol << 8 | length; INVALID_ENTRY where no code starts) for
/// the canonical code of the `k` symbols `symbols` (increasing) with lengths `lengths` (1...bits), `perLength[l]` of
/// length `l`, whose first codes `first[l]` the caller computed (and checked: Kraft sum at most 1). Built by length,
/// doubling: the table for the first `l` bits, copied after itself, is the table for `l + 1` bits except at the
/// patterns that start with a code of length `l + 1`, which no shorter code starts (a prefix code) and which were
/// still INVALID_ENTRY. So each entry is written about once, by whole-block copies, with one store per symbol.
static void fill_table(uint16_t *table, const uint8_t *symbols, const uint8_t *lengths, unsigned k,
                       const uint32_t perLength[CSCK_HUFF_MAX_BITS + 1], const uint32_t first[CSCK_HUFF_MAX_BITS + 1],
                       unsigned bits) {
    // The symbols ordered by (length, symbol): a stable counting sort.
    uint32_t at[CSCK_HUFF_MAX_BITS + 2];
    at[1] = 0;
    for (unsigned l = 1; l <= CSCK_HUFF_MAX_BITS; l++) at[l + 1] = at[l] + perLength[l];
    uint8_t ordered[256];
    for (unsigned i = 0; i < k; i++) ordered[at[lengths[i]]++] = symbols[i];
    table[0] = INVALID_ENTRY;
    uint32_t size = 1;
    unsigned i = 0;
    for (unsigned l = 1; l <= bits; l++) {
        memcpy(table + size, table, size * sizeof table[0]);
        size *= 2;
        const uint32_t code = first[l];
        for (uint32_t j = 0; j < perLength[l]; j++, i++)
            table[reverse_bits(code + j, l)] = (uint16_t)(ordered[i] << 8 | l);
    }
}

/// A Huffman decoding table (§6.6's format) and the bytes its description took.
typedef struct {
    uint64_t mask;
    uint16_t table[TABLE_SIZE];
} huff_table;

/// Reads a code description (32-byte symbol bitmap, then one length nibble per symbol) from `p` (`size` bytes
/// available) and builds its table. Sets `*descriptionBytes`. Returns 0 or a CSCK_HUFF_ error.
static ptrdiff_t build_table(const uint8_t *p, size_t size, huff_table *t, size_t *descriptionBytes) {
    if (size < 32) return CSCK_HUFF_BAD_SIZE;
    unsigned present = 0;
    for (unsigned k = 0; k < 32; k++) present += (unsigned)__builtin_popcount(p[k]);
    const size_t description = 32 + (present + 1) / 2;
    if (size < description) return CSCK_HUFF_BAD_SIZE;
    uint8_t symbols[256];
    uint8_t lengths[256];
    unsigned k = 0;
    unsigned bits = 1;
    uint32_t perLength[CSCK_HUFF_MAX_BITS + 1] = {0};
    for (unsigned byte = 0; byte < 32; byte++) {
        unsigned set = p[byte];
        while (set != 0) {
            const unsigned symbol = byte * 8 + (unsigned)__builtin_ctz(set);
            set &= set - 1;
            const unsigned l = (p[32 + k / 2] >> (4 * (k % 2))) & 15;
            if (l == 0 || l > CSCK_HUFF_MAX_BITS) return CSCK_HUFF_BAD_TABLE;
            symbols[k] = (uint8_t)symbol;
            lengths[k] = (uint8_t)l;
            perLength[l] += 1;
            if (l > bits) bits = l;
            k += 1;
        }
    }
    if (present % 2 == 1 && (p[32 + present / 2] >> 4) != 0) return CSCK_HUFF_BAD_TABLE;
    uint32_t next[CSCK_HUFF_MAX_BITS + 1] = {0};
    uint32_t code = 0;
    uint32_t space = 0;
    for (unsigned l = 1; l <= CSCK_HUFF_MAX_BITS; l++) {
        code = (code + perLength[l - 1]) << 1;
        next[l] = code;
        space += perLength[l] << (CSCK_HUFF_MAX_BITS - l);
    }
    if (space > TABLE_SIZE) return CSCK_HUFF_BAD_TABLE;
    fill_table(t->table, symbols, lengths, k, perLength, next, bits);
    t->mask = (1u << bits) - 1;
    *descriptionBytes = description;
    return 0;
}

/// A coded block's header, checked (rules 1 and 2 of §6.6), and its decoding table.
typedef struct {
    size_t literalCount;
    size_t sequenceBytes;
    size_t bitBytes;
    const uint8_t *bitStream;
    const uint8_t *sequences;
    huff_table code;
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

    // The code (rule 2), after every size check so that a refusal's reason is the first rule broken.
    size_t description;
    return build_table(payload + 8, count - 8, &b->code, &description);
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
    const uint16_t *const table = block.code.table;
    const uint64_t mask = block.code.mask;

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
    if (offset >= 128 && length >= 128) {
        // Long matches from far back (screen rows repeated from a row or more above): chunks of at most `offset`
        // bytes, none overlapping its source, with the C library's copy (its widest stores); nothing past the end.
        while (d < end) {
            const size_t chunk = (size_t)(end - d) < offset ? (size_t)(end - d) : offset;
            memcpy(d, m, chunk);
            d += chunk;
            m += chunk;
        }
    } else if (offset >= 32) {
        // 32 bytes per step, both loads before both stores (each load ends at or before `d`); the last step writes
        // at most 15 bytes past the end, as the 16-byte steps below.
        while (end - d > 16) {
            uint8_t a[16], b[16];
            memcpy(a, m, 16);
            memcpy(b, m + 16, 16);
            memcpy(d, a, 16);
            memcpy(d + 16, b, 16);
            d += 32;
            m += 32;
        }
        if (d < end) memcpy(d, m, 16);
    } else if (offset >= 16) {
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
    const uint16_t *const table = block.code.table;
    const uint64_t mask = block.code.mask;
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

// MARK: The LZ4 block rule (docs/COMPRESSED-LAYOUT.md §6.8)

ptrdiff_t csck_lz4_block_check(const uint8_t *block, size_t count, size_t capacity, size_t dictionaryCount) {
    // Invariants: i ≤ count (the read position in the block), o ≤ capacity (the output position).
    size_t i = 0;
    size_t o = 0;
    for (;;) {
        if (i >= count) return CSCK_LZ4_INVALID;
        const unsigned token = block[i++];
        size_t run = token >> 4;
        if (run == 15) {
            uint8_t b;
            do {
                if (i >= count) return CSCK_LZ4_INVALID;
                b = block[i++];
                run += b;  // stops once past `count`: no wrap
            } while (b == 255 && run <= count);
        }
        if (run > count - i) return CSCK_LZ4_INVALID;
        const size_t room = capacity - o;
        if (run == count - i) {
            // The last sequence: literals only, to the block's end.
            if (run > room) return CSCK_LZ4_INVALID;
            return (ptrdiff_t)(o + run);
        }
        if (run > room || room - run < 12 || count - i - run < 8) return CSCK_LZ4_INVALID;
        i += run;
        o += run;
        const size_t offset = (size_t)block[i] | (size_t)block[i + 1] << 8;  // count − i ≥ 8
        i += 2;
        size_t length = (token & 15) + 4;
        if ((token & 15) == 15) {
            uint8_t b;
            do {
                if (i >= count) return CSCK_LZ4_INVALID;
                b = block[i++];
                length += b;  // at most 255 × count more: no wrap
            } while (b == 255);
            if (count - i < 4) return CSCK_LZ4_INVALID;
        }
        const size_t left = capacity - o;
        if (offset == 0 || offset > o + dictionaryCount || length > left || left - length < 5) return CSCK_LZ4_INVALID;
        o += length;
    }
}

// MARK: Coded sequences (layout version 7, docs/COMPRESSED-LAYOUT.md §6.7)
//
// A "sequence-coded block" splits an LZ4 block into five streams: literals, tokens, offset low bytes, offset high
// bytes and length bytes (the literal length bytes and match length bytes, in block order), each stored verbatim or
// Huffman-coded with §6.6's table format. Its header: L (literal count), Q (sequence count, ≥ 1), E (length byte
// count), the five streams' stored byte counts, the five streams' kinds (0 stored, 1 Huffman). The stream symbol
// counts are L, Q, Q − 1, Q − 1, E; the LZ4 block B is S + L bytes with S = 3Q − 2 + E.

enum { SEQ_LITERALS = 0, SEQ_TOKENS = 1, SEQ_OFFSET_LOW = 2, SEQ_OFFSET_HIGH = 3, SEQ_LENGTHS = 4 };

/// The encoder's longest code in the literal stream and in the other four (the decoder accepts up to
/// CSCK_HUFF_MAX_BITS in every stream). A decoding table has 2^(longest code) entries and is built for every stream
/// of every block: with 11 bits, building five tables cost more than decoding a screen band's streams (terminal
/// 420v decoded at 0.29× LZ4; 9 and 8 bits: 0.53×), while the screen corpus's blocks grow by 1 % only.
#define SEQ_LITERAL_BITS 9
#define SEQ_OTHER_BITS 8


/// The checked header of a sequence-coded block: counts, and each stream's kind, start and stored size.
typedef struct {
    size_t literalCount;
    size_t sequenceCount;
    size_t lengthCount;
    size_t sequenceBytes;  // S = 3Q − 2 + E
    size_t symbols[5];
    size_t size[5];
    unsigned kind[5];
    const uint8_t *start[5];
} seq_header;

static ptrdiff_t read_seq_header(const uint8_t *payload, size_t count, size_t blockCapacity, seq_header *h) {
    if (count < CSCK_SEQ_HEADER_BYTES) return CSCK_HUFF_BAD_SIZE;
    const uint64_t L = load32(payload), Q = load32(payload + 4), E = load32(payload + 8);
    if (Q == 0) return CSCK_HUFF_BAD_SIZE;
    // All below 2^32: no sum here can wrap 64 bits.
    const uint64_t S = 3 * Q - 2 + E;
    if (L + S > blockCapacity) return CSCK_HUFF_BAD_SIZE;
    uint64_t total = CSCK_SEQ_HEADER_BYTES;
    const uint64_t symbols[5] = {L, Q, Q - 1, Q - 1, E};
    for (unsigned i = 0; i < 5; i++) {
        const uint64_t size = load32(payload + 12 + 4 * i);
        const unsigned kind = payload[32 + i];
        if (kind > 1) return CSCK_HUFF_BAD_TABLE;
        if (kind == 0 && size != symbols[i]) return CSCK_HUFF_BAD_SIZE;
        h->symbols[i] = (size_t)symbols[i];
        h->size[i] = (size_t)size;
        h->kind[i] = kind;
        h->start[i] = payload + total;  // only used once the total is checked below
        total += size;
    }
    if (total != count) return CSCK_HUFF_BAD_SIZE;
    h->literalCount = (size_t)L;
    h->sequenceCount = (size_t)Q;
    h->lengthCount = (size_t)E;
    h->sequenceBytes = (size_t)S;
    return 0;
}

/// One Huffman stream's bit reader (REFILL's state, with its own table).
typedef struct {
    uint64_t buffer;
    unsigned available;
    unsigned invalid;
    size_t position;
    size_t bitBytes;
    const uint8_t *bitStream;
    uint64_t mask;
    uint8_t *to;
    size_t left;
} bit_reader;

/// At least 56 valid bits in the reader's buffer; bytes past its stream read as zero.
static inline __attribute__((always_inline)) void reader_refill(bit_reader *r) {
    if (r->position + 8 <= r->bitBytes) {
        uint64_t word;
        memcpy(&word, r->bitStream + r->position, 8);
        r->buffer |= word << r->available;
        r->position += (63 - r->available) >> 3;
        r->available |= 56;
    } else {
        while (r->available <= 56) {
            uint64_t byte = r->position < r->bitBytes ? r->bitStream[r->position] : 0;
            r->buffer |= byte << r->available;
            r->position += 1;
            r->available += 8;
        }
    }
}

/// Decodes `n` (≤ 5) symbols of reader `r` with `table` (a refill's 56 bits hold 5 codes of ≤ 11 bits).
static inline __attribute__((always_inline)) void reader_decode(bit_reader *r, const uint16_t *table, unsigned n) {
    reader_refill(r);
    uint64_t buffer = r->buffer;
    unsigned available = r->available, invalid = r->invalid;
    const uint64_t mask = r->mask;
    uint8_t *to = r->to;
    for (unsigned k = 0; k < n; k++) {
        const uint16_t entry = table[buffer & mask];
        const unsigned l = entry & 63;
        invalid |= entry;
        to[k] = (uint8_t)(entry >> 8);
        buffer >>= l;
        available -= l;
    }
    r->buffer = buffer;
    r->available = available;
    r->invalid = invalid;
    r->to = to + n;
    r->left -= n;
}

/// Decodes the five streams of `h`: a stored stream is used where it is (`symbols[i]` points into the payload; with
/// `copyStored`, it is copied to its place in `scratch` too, for a caller that overwrites the payload), a
/// Huffman-coded one is decoded into `scratch` (literals at 0, tokens at L, offset low bytes at L + Q, high bytes at
/// L + 2Q − 1, length bytes at L + 3Q − 2: L + S bytes in all, ≤ blockCapacity ≤ the caller's space). The coded streams
/// are decoded side by side, 5 symbols of each in turn, so the processor overlaps their dependency chains (a lookup,
/// then a shift, per symbol): one stream alone decodes at a fraction of the speed.
static ptrdiff_t decode_streams(const seq_header *h, uint8_t *scratch, const uint8_t *symbols[5], int copyStored) {
    huff_table tables[5];
    bit_reader readers[5];
    unsigned codedCount = 0;
    size_t at = 0;
    for (unsigned i = 0; i < 5; i++) {
        if (h->kind[i] == 0) {
            symbols[i] = h->start[i];
            if (copyStored) {
                memcpy(scratch + at, h->start[i], h->symbols[i]);
                symbols[i] = scratch + at;
            }
        } else {
            size_t description = 0;
            ptrdiff_t status = build_table(h->start[i], h->size[i], &tables[codedCount], &description);
            if (status != 0) return status;
            bit_reader *r = &readers[codedCount];
            memset(r, 0, sizeof *r);
            r->bitStream = h->start[i] + description;
            r->bitBytes = h->size[i] - description;
            r->mask = tables[codedCount].mask;
            r->to = scratch + at;
            r->left = h->symbols[i];
            symbols[i] = scratch + at;
            codedCount += 1;
        }
        at += h->symbols[i];
    }
    // Round robin while some stream has 5 symbols left, then each stream's last 0...4.
    for (;;) {
        unsigned busy = 0;
        for (unsigned c = 0; c < codedCount; c++) {
            if (readers[c].left >= 5) {
                reader_decode(&readers[c], tables[c].table, 5);
                busy = 1;
            }
        }
        if (!busy) break;
    }
    for (unsigned c = 0; c < codedCount; c++) {
        bit_reader *r = &readers[c];
        if (r->left > 0) reader_decode(r, tables[c].table, (unsigned)r->left);
        if (r->invalid & INVALID_ENTRY) return CSCK_HUFF_BAD_CODE;
        if (r->position > r->bitBytes + 8) return CSCK_HUFF_BAD_CODE;
        if (!stream_ends_well(r->bitBytes, r->position, r->available, r->buffer)) return CSCK_HUFF_BAD_CODE;
    }
    return 0;
}

ptrdiff_t csck_seq_lz4_decode(const uint8_t *payload, size_t count, uint8_t *out, size_t capacity,
                              uint8_t *scratch, size_t scratchCapacity) {
    seq_header h;
    ptrdiff_t status = read_seq_header(payload, count, capacity, &h);
    if (status != 0) return status;
    const size_t L = h.literalCount, Q = h.sequenceCount, E = h.lengthCount;
    if (L + h.sequenceBytes > scratchCapacity) return CSCK_HUFF_BAD_SIZE;
    const uint8_t *streams[5];
    status = decode_streams(&h, scratch, streams, 1);
    if (status != 0) return status;
    const uint8_t *const literals = streams[SEQ_LITERALS];
    const uint8_t *const tokens = streams[SEQ_TOKENS];
    const uint8_t *const low = streams[SEQ_OFFSET_LOW];
    const uint8_t *const high = streams[SEQ_OFFSET_HIGH];
    const uint8_t *const lengths = streams[SEQ_LENGTHS];
    // Every write is below S + L ≤ capacity: each stream's bytes are copied at most once.
    size_t o = 0, used = 0, e = 0;
    for (size_t j = 0; j < Q; j++) {
        const uint8_t token = tokens[j];
        out[o++] = token;
        size_t run = token >> 4;
        if (run == 15) {
            uint8_t b;
            do {
                if (e >= E) return CSCK_HUFF_BAD_SEQUENCES;
                b = lengths[e++];
                out[o++] = b;
                run += b;
            } while (b == 255 && run <= L);
        }
        if (run > L - used) return CSCK_HUFF_BAD_SEQUENCES;
        memcpy(out + o, literals + used, run);
        o += run;
        used += run;
        if (j + 1 == Q) break;
        out[o++] = low[j];
        out[o++] = high[j];
        if ((token & 15) == 15) {
            uint8_t b;
            do {
                if (e >= E) return CSCK_HUFF_BAD_SEQUENCES;
                b = lengths[e++];
                out[o++] = b;
            } while (b == 255);
        }
    }
    if (used != L || e != E) return CSCK_HUFF_BAD_SEQUENCES;
    return (ptrdiff_t)o;
}

ptrdiff_t csck_seq_lz4_decompress(const uint8_t *payload, size_t count, size_t blockCapacity, uint8_t *out,
                                  size_t dictionaryCount, size_t capacity, uint8_t *scratch,
                                  size_t scratchCapacity) {
    seq_header h;
    ptrdiff_t status = read_seq_header(payload, count, blockCapacity, &h);
    if (status != 0) return status;
    const size_t L = h.literalCount, Q = h.sequenceCount, E = h.lengthCount;
    if (L + h.sequenceBytes > scratchCapacity) return CSCK_HUFF_BAD_SIZE;
    const uint8_t *streams[5];
    status = decode_streams(&h, scratch, streams, 0);
    if (status != 0) return status;
    const uint8_t *const literals = streams[SEQ_LITERALS];
    const uint8_t *const tokens = streams[SEQ_TOKENS];
    const uint8_t *const low = streams[SEQ_OFFSET_LOW];
    const uint8_t *const high = streams[SEQ_OFFSET_HIGH];
    const uint8_t *const lengths = streams[SEQ_LENGTHS];

    // The sequences, executed into `out` exactly as csck_huff_lz4_decompress executes a coded block's sequence
    // stream: `s` counts the sequence-stream bytes consumed (tokens, offsets, length bytes, in B's order), so `s + used`
    // is the read position in B before a sequence's literals.
    const size_t blockEnd = h.sequenceBytes + L;
    size_t s = 0, o = 0, used = 0, e = 0;
    for (size_t j = 0; j < Q; j++) {
        const unsigned token = tokens[j];
        s += 1;
        size_t run = token >> 4;
        if (run == 15) {
            uint8_t b;
            do {
                if (e >= E) return CSCK_HUFF_BAD_SEQUENCES;
                b = lengths[e++];
                s += 1;
                run += b;
            } while (b == 255 && run <= L);
        }
        if (run > L - used) return CSCK_HUFF_BAD_SEQUENCES;
        const size_t room = capacity - o;
        const int last = j + 1 == Q;
        if (!last) {
            if (run > room || room - run < 12 || blockEnd - (s + used) < run + 8) return CSCK_HUFF_UNDECIDED;
            if (run <= 16 && room >= 16 && used + 16 <= L) {
                memcpy(out + o, literals + used, 16);
            } else if (run <= 32 && room >= 32 && used + 32 <= L) {
                // Two 16-byte copies, the extra bytes written over later, as above.
                memcpy(out + o, literals + used, 16);
                memcpy(out + o + 16, literals + used + 16, 16);
            } else {
                memcpy(out + o, literals + used, run);
            }
        } else {
            if (run > room) return CSCK_HUFF_UNDECIDED;
            memcpy(out + o, literals + used, run);
        }
        o += run;
        used += run;
        if (last) break;
        const size_t offset = (size_t)low[j] | (size_t)high[j] << 8;
        s += 2;
        size_t length = (token & 15) + 4;
        if ((token & 15) == 15) {
            uint8_t b;
            do {
                if (e >= E) return CSCK_HUFF_BAD_SEQUENCES;
                b = lengths[e++];
                s += 1;
                length += b;
            } while (b == 255);
            if (blockEnd - (s + used) < 4) return CSCK_HUFF_UNDECIDED;
        }
        const size_t left = capacity - o;
        if (offset == 0 || offset > o + dictionaryCount || length > left || left - length < 5)
            return CSCK_HUFF_UNDECIDED;
        copy_match(out + o, offset, length, left);
        o += length;
    }
    if (used != L || e != E) return CSCK_HUFF_BAD_SEQUENCES;
    return (ptrdiff_t)o;
}

/// Writes the Huffman description (bitmap, nibbles) and bit stream of `n` symbols `data` with code `lengths` into
/// `dst`; returns the bytes written.
static size_t write_huffman(const uint8_t *data, size_t n, const uint8_t lengths[256], uint8_t *dst) {
    uint32_t codes[256] = {0};
    canonical_codes(lengths, codes);
    unsigned present = 0;
    for (unsigned s = 0; s < 256; s++) present += lengths[s] > 0;
    memset(dst, 0, 32 + (present + 1) / 2);
    unsigned k = 0;
    for (unsigned s = 0; s < 256; s++) {
        if (lengths[s] == 0) continue;
        dst[s / 8] |= (uint8_t)(1u << (s % 8));
        dst[32 + k / 2] |= (uint8_t)(lengths[s] << (4 * (k % 2)));
        k += 1;
    }
    size_t out = 32 + (present + 1) / 2;
    uint64_t accumulator = 0;
    unsigned filled = 0;
    for (size_t i = 0; i < n; i++) {
        accumulator |= (uint64_t)codes[data[i]] << filled;
        filled += lengths[data[i]];
        while (filled >= 8) {
            dst[out++] = (uint8_t)accumulator;
            accumulator >>= 8;
            filled -= 8;
        }
    }
    if (filled > 0) dst[out++] = (uint8_t)accumulator;
    return out;
}

size_t csck_seq_lz4_encode(const uint8_t *block, size_t count, uint8_t *out, size_t capacity, uint8_t *scratch,
                           unsigned streamSaving) {
    if (count == 0 || count > UINT32_MAX || capacity < CSCK_SEQ_HEADER_BYTES) return 0;
    // Pass 1: the counts (and a parse check). Pass 2: the streams into `scratch` (count bytes: they partition B).
    size_t L = 0, Q = 0, E = 0;
    for (int pass = 0; pass < 2; pass++) {
        uint8_t *lit = scratch, *tok = scratch + L, *low = tok + Q, *high = low + (Q ? Q - 1 : 0);
        uint8_t *len = high + (Q ? Q - 1 : 0);
        size_t l = 0, q = 0, e = 0, i = 0;
        while (i < count) {
            const uint8_t token = block[i++];
            if (pass) tok[q] = token;
            q += 1;
            size_t run = token >> 4;
            if (run == 15) {
                uint8_t b;
                do {
                    if (i >= count) return 0;
                    b = block[i++];
                    if (pass) len[e] = b;
                    e += 1;
                    run += b;
                } while (b == 255);
            }
            if (run > count - i) return 0;
            if (pass) memcpy(lit + l, block + i, run);
            l += run;
            i += run;
            if (i == count) break;
            if (count - i < 2) return 0;
            if (pass) {
                low[q - 1] = block[i];
                high[q - 1] = block[i + 1];
            }
            i += 2;
            if ((token & 15) == 15) {
                uint8_t b;
                do {
                    if (i >= count) return 0;
                    b = block[i++];
                    if (pass) len[e] = b;
                    e += 1;
                } while (b == 255);
            }
        }
        L = l;
        Q = q;
        E = e;
    }
    if (Q == 0) return 0;
    const size_t symbols[5] = {L, Q, Q - 1, Q - 1, E};
    uint8_t lengths[5][256];
    size_t size[5];
    unsigned kind[5];
    size_t total = CSCK_SEQ_HEADER_BYTES;
    const uint8_t *data = scratch;
    const uint8_t *starts[5];
    for (unsigned s = 0; s < 5; s++) {
        starts[s] = data;
        size[s] = symbols[s];
        kind[s] = 0;
        if (symbols[s] > 0) {
            uint32_t frequency[256] = {0};
            for (size_t i = 0; i < symbols[s]; i++) frequency[data[i]] += 1;
            // Coded only when it saves at least `streamSaving` % of the stream's symbols (below): when even the
            // entropy bound does not, the stream is stored without building its code.
            unsigned occurring;
            const uint64_t floorBits = entropy_bits_floor(frequency, &occurring);
            const size_t floorCoded = 32 + (occurring + 1) / 2 + (size_t)((floorBits + 7) / 8);
            if (!(floorCoded < symbols[s]
                  && (uint64_t)(symbols[s] - floorCoded) * 100 >= (uint64_t)symbols[s] * streamSaving)) {
                total += size[s];
                data += symbols[s];
                continue;
            }
            code_lengths(frequency, lengths[s], s == SEQ_LITERALS ? SEQ_LITERAL_BITS : SEQ_OTHER_BITS);
            uint64_t bits = 0;
            unsigned present = 0;
            for (unsigned v = 0; v < 256; v++) {
                bits += (uint64_t)frequency[v] * lengths[s][v];
                present += lengths[s][v] > 0;
            }
            const size_t coded = 32 + (present + 1) / 2 + (size_t)((bits + 7) / 8);
            // Coded only when it saves at least `streamSaving` % of the stream's symbols: each coded symbol costs
            // decode time, a stored stream none (it is used where it is).
            if (coded < symbols[s] && (uint64_t)(symbols[s] - coded) * 100 >= (uint64_t)symbols[s] * streamSaving) {
                size[s] = coded;
                kind[s] = 1;
            }
        }
        total += size[s];
        data += symbols[s];
    }
    if (total > capacity) return 0;
    store32(out, (uint32_t)L);
    store32(out + 4, (uint32_t)Q);
    store32(out + 8, (uint32_t)E);
    size_t at = CSCK_SEQ_HEADER_BYTES;
    for (unsigned s = 0; s < 5; s++) {
        store32(out + 12 + 4 * s, (uint32_t)size[s]);
        out[32 + s] = (uint8_t)kind[s];
        if (kind[s] == 0) {
            memcpy(out + at, starts[s], symbols[s]);
        } else if (write_huffman(starts[s], symbols[s], lengths[s], out + at) != size[s]) {
            return 0;
        }
        at += size[s];
    }
    return total;
}
