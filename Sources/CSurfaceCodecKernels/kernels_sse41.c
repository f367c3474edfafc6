// The SSE4.1 tier of the codec's kernels (x86-64 processors without AVX2). Every function carries
// __attribute__((target("sse4.1"))) (SSE4.1 includes SSSE3's pshufb) and runs only after csck_cpu_has_sse41().
//
// SSE has no per-lane variable shifts, so a block's fields are unpacked by width-indexed tables: a byte shuffle
// puts the two bytes that hold field i in 16-bit lane i; a multiply by 2^(16 - s_i - w) (s_i = i·w mod 8, the
// field's bit offset in those bytes) moves the field to the top of the lane and drops the bits above it; a
// shift right by 16 - w (one count per block) brings it down. The packer does the reverse with multiplies by
// powers of two (pmullw, pmulld, pmuludq) in place of AVX2's variable shifts.
#include "CSurfaceCodecKernels.h"

#include "kernels_scalar.h"

#if defined(__x86_64__)
#include <immintrin.h>

int csck_cpu_has_sse41(void) {
    __builtin_cpu_init();
    // SSE4.1 processors all have SSSE3 (pshufb); both are checked all the same.
    return __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3") ? 1 : 0;
}

/// Per width (0...8 for packed8, 0...10 for packed10): the shuffle that puts bytes ⌊i·w/8⌋ and ⌊i·w/8⌋ + 1 of
/// the block in 16-bit lane i, the multipliers 2^(16 - s_i - w) (0 for w = 0), and the shift count 16 - w.
typedef struct {
    uint8_t shuffle[16];
    uint16_t multiplier[8];
    uint64_t shift[2];
} csck_unpack_table;

#define CSCK_SH(w, i) (uint8_t)(((i) * (w)) >> 3), (uint8_t)((((i) * (w)) >> 3) + 1)
#define CSCK_MU(w, i) (uint16_t)((w) == 0 ? 0 : 1u << (16 - (((i) * (w)) & 7) - (w)))
#define CSCK_T(w)                                                                                                     \
    {{CSCK_SH(w, 0), CSCK_SH(w, 1), CSCK_SH(w, 2), CSCK_SH(w, 3), CSCK_SH(w, 4), CSCK_SH(w, 5), CSCK_SH(w, 6),        \
      CSCK_SH(w, 7)},                                                                                                 \
     {CSCK_MU(w, 0), CSCK_MU(w, 1), CSCK_MU(w, 2), CSCK_MU(w, 3), CSCK_MU(w, 4), CSCK_MU(w, 5), CSCK_MU(w, 6),        \
      CSCK_MU(w, 7)},                                                                                                 \
     {16 - (w), 0}}
static const csck_unpack_table unpackTables[11] __attribute__((aligned(16))) = {
    CSCK_T(0), CSCK_T(1), CSCK_T(2), CSCK_T(3), CSCK_T(4), CSCK_T(5),
    CSCK_T(6), CSCK_T(7), CSCK_T(8), CSCK_T(9), CSCK_T(10),
};
#undef CSCK_T
#undef CSCK_MU
#undef CSCK_SH

/// The fields of one block (w ≤ 10, the block's bytes in `v` from byte 0) in 16-bit lanes.
__attribute__((target("sse4.1"))) static inline __m128i unpack_fields(__m128i v, unsigned w) {
    const csck_unpack_table *t = &unpackTables[w];
    __m128i lanes = _mm_shuffle_epi8(v, _mm_load_si128((const __m128i *)t->shuffle));
    lanes = _mm_mullo_epi16(lanes, _mm_load_si128((const __m128i *)t->multiplier));
    return _mm_srl_epi16(lanes, _mm_load_si128((const __m128i *)t->shift));
}

/// Per 2-bit predictor pattern (bit k: block k is left-predicted): a mask of 0xFF bytes over those blocks, and
/// the mask that picks the carried sample into each block: all of block 0 (the sample carried into the pair),
/// and for block 1 the carry through block 0 only if block 0 is left-predicted.
static const uint64_t leftMasks[4][2] __attribute__((aligned(16))) = {
    {0, 0}, {~0ULL, 0}, {0, ~0ULL}, {~0ULL, ~0ULL}};
static const uint64_t carryMasks[4][2] __attribute__((aligned(16))) = {
    {~0ULL, 0}, {~0ULL, ~0ULL}, {~0ULL, 0}, {~0ULL, ~0ULL}};

/// Two blocks of a row: `z` holds their zig-zagged residuals (8 bytes each), `pattern` their predictor bits;
/// writes their 16 samples to `out` and returns the last one in every byte (the sample carried on).
__attribute__((target("sse4.1"))) static inline __m128i decode_pair8(__m128i z, const uint8_t *above, uint8_t *out,
                                                                     unsigned pattern, __m128i previous) {
    const __m128i low7 = _mm_set1_epi8(0x7F);
    const __m128i ones8 = _mm_set1_epi8(1);
    // Block 0's last sample into block 1's bytes (block 0's bytes zero), and byte 15 into every byte.
    const __m128i lastOfFirst = _mm_set_epi8(7, 7, 7, 7, 7, 7, 7, 7, -128, -128, -128, -128, -128, -128, -128, -128);
    const __m128i lastByte = _mm_set1_epi8(15);
    // Undo the zig-zag: d = (z >> 1) ^ -(z & 1), byte-wise.
    __m128i d = _mm_xor_si128(_mm_and_si128(_mm_srli_epi16(z, 1), low7),
                              _mm_sub_epi8(_mm_setzero_si128(), _mm_and_si128(z, ones8)));
    __m128i up = _mm_add_epi8(_mm_loadu_si128((const __m128i *)above), d);
    // Prefix sums within each block of 8 bytes.
    __m128i s = _mm_add_epi8(d, _mm_slli_epi64(d, 8));
    s = _mm_add_epi8(s, _mm_slli_epi64(s, 16));
    s = _mm_add_epi8(s, _mm_slli_epi64(s, 32));
    const __m128i left = _mm_load_si128((const __m128i *)leftMasks[pattern]);
    __m128i b = _mm_blendv_epi8(up, s, left);
    // The sample carried into block 0 is `previous`; into block 1, block 0's last sample (plus `previous` if
    // block 0 is left-predicted).
    __m128i carried = _mm_add_epi8(_mm_shuffle_epi8(b, lastOfFirst),
                                   _mm_and_si128(previous, _mm_load_si128((const __m128i *)carryMasks[pattern])));
    __m128i result = _mm_add_epi8(b, _mm_and_si128(carried, left));
    _mm_storeu_si128((__m128i *)out, result);
    return _mm_shuffle_epi8(result, lastByte);
}

__attribute__((target("sse4.1"))) static void decode_packed8_sse41_unchecked(const uint8_t *payload, size_t count,
                                                                  size_t position, const uint8_t *nibbles,
                                                                  const uint8_t *bits, size_t width, size_t height,
                                                                  uint8_t *x, size_t stride) {
    const size_t blocksPerRow = (width + 7) >> 3;
    // Blocks wholly inside a row: the vector loop writes only those, so nothing is written past a row's end.
    const size_t wholeBlocks = width >> 3;
    for (size_t y = 0; y < height; y++) {
        uint8_t *current = x + y * stride;
        // Row 0 is left-predicted throughout; its "above" is never selected (reads stay inside x).
        const uint8_t *above = y == 0 ? x : x + (y - 1) * stride;
        const unsigned forceLeft = y == 0 ? 15 : 0;
        // The sample carried into the next block, in every byte (into column 0: the sample above).
        __m128i previous = _mm_set1_epi8((char)(y == 0 ? 0 : above[0]));
        const size_t firstBlock = y * blocksPerRow;
        size_t column = 0;
        // Four blocks a step: their widths from one load of the private nibbles (the copy has room past its end),
        // one bound check for the four loads.
        for (; column + 4 <= wholeBlocks; column += 4) {
            const size_t block = firstBlock + column;
            uint32_t nib;
            memcpy(&nib, nibbles + (block >> 1), 4);
            nib >>= (block & 1) * 4;
            unsigned w0 = nib & 15, w1 = (nib >> 4) & 15, w2 = (nib >> 8) & 15, w3 = (nib >> 12) & 15;
            w0 = w0 > 8 ? 8 : w0;
            w1 = w1 > 8 ? 8 : w1;
            w2 = w2 > 8 ? 8 : w2;
            w3 = w3 > 8 ? 8 : w3;
            const size_t p1 = position + w0, p2 = p1 + w1, p3 = p2 + w2;
            if (p3 + 8 > count) break;  // near the end of the payload: the pairs and the careful path below
            __m128i za = _mm_packus_epi16(unpack_fields(_mm_loadl_epi64((const __m128i *)(payload + position)), w0),
                                          unpack_fields(_mm_loadl_epi64((const __m128i *)(payload + p1)), w1));
            __m128i zb = _mm_packus_epi16(unpack_fields(_mm_loadl_epi64((const __m128i *)(payload + p2)), w2),
                                          unpack_fields(_mm_loadl_epi64((const __m128i *)(payload + p3)), w3));
            position = p3 + w3;
            uint16_t bitWord;
            memcpy(&bitWord, bits + (block >> 3), 2);
            const unsigned pattern = ((bitWord >> (block & 7)) & 15) | forceLeft;
            previous = decode_pair8(za, above + column * 8, current + column * 8, pattern & 3, previous);
            previous = decode_pair8(zb, above + column * 8 + 16, current + column * 8 + 16, pattern >> 2, previous);
        }
        for (; column + 2 <= wholeBlocks; column += 2) {
            const size_t block = firstBlock + column;
            unsigned nib = nibbles[block >> 1];
            if (block & 1) nib = (nib >> 4) | (unsigned)nibbles[(block >> 1) + 1] << 4;
            unsigned w0 = nib & 15, w1 = (nib >> 4) & 15;
            w0 = w0 > 8 ? 8 : w0;
            w1 = w1 > 8 ? 8 : w1;
            const size_t p1 = position + w0;
            if (p1 + 8 > count) break;  // near the end of the payload: the careful path below
            __m128i z = _mm_packus_epi16(unpack_fields(_mm_loadl_epi64((const __m128i *)(payload + position)), w0),
                                         unpack_fields(_mm_loadl_epi64((const __m128i *)(payload + p1)), w1));
            position = p1 + w1;
            const unsigned pattern =
                (((bits[block >> 3] | (unsigned)bits[(block >> 3) + 1] << 8) >> (block & 7)) & 3) | (forceLeft & 3);
            previous = decode_pair8(z, above + column * 8, current + column * 8, pattern, previous);
        }
        const uint8_t last = (uint8_t)_mm_cvtsi128_si32(previous);
        position = csck_decode_row8_tail(payload, count, position, nibbles, bits, firstBlock, column, width,
                                         forceLeft & 1, last, above, y > 0, current);
    }
}

__attribute__((target("sse4.1"))) static void decode_packed10_sse41_unchecked(const uint8_t *payload, size_t count,
                                                                   size_t position, const uint8_t *nibbles,
                                                                   const uint8_t *bits, size_t width, size_t height,
                                                                   uint16_t *x) {
    const size_t blocksPerRow = (width + 7) >> 3;
    const __m128i mask10 = _mm_set1_epi16(0x3FF);
    const __m128i ones16 = _mm_set1_epi16(1);
    const __m128i zero = _mm_setzero_si128();
    const __m128i lastWord = _mm_set_epi8(15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14);
    for (size_t y = 0; y < height; y++) {
        uint16_t *current = x + y * width;
        const uint16_t *above = y == 0 ? x : x + (y - 1) * width;
        const unsigned forceLeft = y == 0 ? 1 : 0;
        __m128i previous = _mm_set1_epi16((short)(y == 0 ? 0 : above[0] >> 6));
        const size_t firstBlock = y * blocksPerRow;
        size_t column = 0;
        for (; column < blocksPerRow; column++) {
            const size_t block = firstBlock + column;
            const unsigned w = csck_width_of(nibbles, block, 10);
            if (position + 16 > count) break;  // near the end of the payload: the careful path below
            __m128i z = unpack_fields(_mm_loadu_si128((const __m128i *)(payload + position)), w);
            position += w;
            __m128i d = _mm_and_si128(
                _mm_xor_si128(_mm_srli_epi16(z, 1), _mm_sub_epi16(zero, _mm_and_si128(z, ones16))), mask10);
            // Both predictions, then a blend (branch-free: the predictor bits are data).
            __m128i s = _mm_add_epi16(d, _mm_slli_si128(d, 2));
            s = _mm_add_epi16(s, _mm_slli_si128(s, 4));
            s = _mm_add_epi16(s, _mm_slli_si128(s, 8));
            __m128i aboveValues = _mm_srli_epi16(_mm_loadu_si128((const __m128i *)(above + column * 8)), 6);
            const __m128i left = _mm_set1_epi16((short)(0 - (csck_is_left(bits, block) | forceLeft)));
            __m128i result = _mm_and_si128(
                _mm_blendv_epi8(_mm_add_epi16(aboveValues, d), _mm_add_epi16(s, previous), left), mask10);
            _mm_storeu_si128((__m128i *)(current + column * 8), _mm_slli_epi16(result, 6));
            previous = _mm_shuffle_epi8(result, lastWord);
        }
        uint16_t last = (uint16_t)_mm_extract_epi16(previous, 0);
        for (; column < blocksPerRow; column++) {
            const size_t block = firstBlock + column;
            const unsigned w = csck_width_of(nibbles, block, 10);
            last = csck_decode_block10(payload, position, count, w, csck_is_left(bits, block) | forceLeft, last,
                                       above + column * 8, current + column * 8);
            position += w;
        }
    }
}

/// Per width w (0...8): 2^w in four 16-bit lanes, 2^(2w) in two 32-bit lanes, and 2^(4w - 1) (0 for w = 0) in
/// the low 32 bits: the multipliers that pack 8 fields of w bits (pairs, quads, halves).
static const uint64_t pairMultipliers[9] = {
#define P(w) (0x0001000100010001ULL << (w))
    P(0), P(1), P(2), P(3), P(4), P(5), P(6), P(7), P(8),
#undef P
};
static const uint64_t quadMultipliers[9] = {
#define Q(w) (0x0000000100000001ULL << (2 * (w)))
    Q(0), Q(1), Q(2), Q(3), Q(4), Q(5), Q(6), Q(7), Q(8),
#undef Q
};
static const uint64_t halfMultipliers[9] = {0, 1ULL << 3, 1ULL << 7, 1ULL << 11, 1ULL << 15, 1ULL << 19, 1ULL << 23,
                                            1ULL << 27, 1ULL << 31};

__attribute__((target("sse4.1"))) static size_t pack8_sse41_unchecked(const uint8_t *up, const uint8_t *left, size_t blockCount,
                                                          uint8_t *out, size_t *zeroBlocks) {
    const size_t nibbleBytes = (blockCount + 1) >> 1, bitBytes = (blockCount + 7) >> 3;
    uint8_t *nibbles = out, *bits = out + nibbleBytes;
    memset(out, 0, nibbleBytes + bitBytes);
    size_t position = nibbleBytes + bitBytes, zeros = 0, block = 0;
    // Bit length of a nibble, and of a high nibble (4 more unless 0).
    const __m128i lengthLow = _mm_setr_epi8(0, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4);
    const __m128i lengthHigh = _mm_setr_epi8(0, 5, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 8);
    const __m128i low4 = _mm_set1_epi8(0x0F);
    const __m128i lowByte = _mm_set1_epi64x(0xFF);
    const __m128i lowByte32 = _mm_set1_epi32(0xFF);
    const __m128i lanes8 = _mm_set1_epi16(0x00FF);
    const __m128i lanes16 = _mm_set1_epi32(0x0000FFFF);
    const __m128i low32 = _mm_set1_epi64x(0xFFFFFFFFLL);
    for (; block + 2 <= blockCount; block += 2) {
        __m128i u = _mm_loadu_si128((const __m128i *)(up + block * 8));
        __m128i l = _mm_loadu_si128((const __m128i *)(left + block * 8));
        // Both candidates' widths at once: each block's bytes ORed into 32 bits, up's in the low half of the
        // block's 64-bit lane and left's in the high half, then into one byte of each half, then its bit length.
        __m128i f = _mm_blend_epi16(_mm_or_si128(u, _mm_srli_epi64(u, 32)), _mm_or_si128(l, _mm_slli_epi64(l, 32)),
                                    0xCC);
        f = _mm_or_si128(f, _mm_srli_epi32(f, 16));
        f = _mm_or_si128(f, _mm_srli_epi32(f, 8));
        __m128i lengths = _mm_max_epu8(_mm_shuffle_epi8(lengthHigh, _mm_and_si128(_mm_srli_epi16(f, 4), low4)),
                                       _mm_shuffle_epi8(lengthLow, _mm_and_si128(f, low4)));
        lengths = _mm_and_si128(lengths, lowByte32);
        // wu and wl in the low 32 bits of each block's lane (the high halves zero).
        __m128i wu = _mm_and_si128(lengths, lowByte);
        __m128i wl = _mm_srli_epi64(lengths, 32);
        // Left where strictly narrower (up on ties), as the portable encoder; the widths are small, so a 32-bit
        // compare of the low halves, copied to the high halves, is the 64-bit compare SSE4.1 lacks.
        __m128i useLeft = _mm_shuffle_epi32(_mm_cmpgt_epi32(wu, wl), _MM_SHUFFLE(2, 2, 0, 0));
        __m128i w = _mm_blendv_epi8(wu, wl, useLeft);
        __m128i chosen = _mm_blendv_epi8(u, l, useLeft);
        const unsigned w0 = (unsigned)_mm_cvtsi128_si32(w), w1 = (unsigned)_mm_extract_epi32(w, 2);
        // Pairs of fields in 16-bit lanes, quads in 32-bit lanes, all eight in the low 8·w bits of each block:
        // each step ORs the upper part, multiplied by a power of two, onto the lower part.
        __m128i pairs = _mm_or_si128(
            _mm_and_si128(chosen, lanes8),
            _mm_mullo_epi16(_mm_srli_epi16(chosen, 8), _mm_set_epi64x((long long)pairMultipliers[w1],
                                                                      (long long)pairMultipliers[w0])));
        __m128i quads = _mm_or_si128(
            _mm_and_si128(pairs, lanes16),
            _mm_mullo_epi32(_mm_srli_epi32(pairs, 16), _mm_set_epi64x((long long)quadMultipliers[w1],
                                                                      (long long)quadMultipliers[w0])));
        // 2^(4w) does not fit 32 bits for w = 8: multiply by half of it, then double.
        __m128i highHalves = _mm_mul_epu32(_mm_srli_epi64(quads, 32), _mm_set_epi64x((long long)halfMultipliers[w1],
                                                                                      (long long)halfMultipliers[w0]));
        __m128i result = _mm_or_si128(_mm_and_si128(quads, low32), _mm_add_epi64(highHalves, highHalves));
        uint64_t v0 = (uint64_t)_mm_cvtsi128_si64(result), v1 = (uint64_t)_mm_extract_epi64(result, 1);
        memcpy(out + position, &v0, 8);
        position += w0;
        memcpy(out + position, &v1, 8);
        position += w1;
        // block is even: its two nibbles are one whole byte.
        nibbles[block >> 1] = (uint8_t)(w0 | w1 << 4);
        bits[block >> 3] |= (uint8_t)(_mm_movemask_pd(_mm_castsi128_pd(useLeft)) << (block & 7));
        zeros += (w0 == 0) + (w1 == 0);
    }
    position = csck_pack8_tail(up, left, block, blockCount, out, nibbles, bits, position, &zeros);
    *zeroBlocks = zeros;
    return position;
}

// MARK: The checked entry points (capacities: CSurfaceCodecKernels.h)

int csck_decode_packed8_sse41(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                             size_t nibbleCapacity, const uint8_t *bits, size_t bitCapacity, size_t width,
                             size_t height, uint8_t *x, size_t xCapacity, size_t stride) {
    if (!csck_decode_capacities_hold(count, position, nibbleCapacity, bitCapacity, width, height, stride, width,
                                     xCapacity))
        return -1;
    decode_packed8_sse41_unchecked(payload, count, position, nibbles, bits, width, height, x, stride);
    return 0;
}

int csck_decode_packed10_sse41(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                              size_t nibbleCapacity, const uint8_t *bits, size_t bitCapacity, size_t width,
                              size_t height, uint16_t *x, size_t xCapacity) {
    if (!csck_decode10_capacities_hold(count, position, nibbleCapacity, bitCapacity, width, height, xCapacity))
        return -1;
    decode_packed10_sse41_unchecked(payload, count, position, nibbles, bits, width, height, x);
    return 0;
}

size_t csck_pack8_sse41(const uint8_t *up, const uint8_t *left, size_t blockCount, uint8_t *out, size_t outCapacity,
                       size_t *zeroBlocks) {
    if (!csck_pack_capacity_holds(blockCount, outCapacity)) return CSCK_PACK_REFUSED;
    return pack8_sse41_unchecked(up, left, blockCount, out, zeroBlocks);
}


#else

int csck_cpu_has_sse41(void) { return 0; }


#endif
