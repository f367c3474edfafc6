// The NEON tier of the codec's kernels (arm64, where NEON is baseline: no runtime check). Elsewhere this file
// compiles to nothing.
//
// A block's fields are unpacked by width-indexed tables: a byte lookup (tbl) puts the two bytes that hold field i
// in 16-bit lane i, a per-lane shift right by s_i = i·w mod 8 (ushl with a negative count) and a mask leave the
// field. The packer uses per-lane 64-bit shifts (ushl), as the AVX2 packer does.
#include "CSurfaceCodecKernels.h"

#include "kernels_scalar.h"

#if defined(__aarch64__)
#include <arm_neon.h>

/// Per width (0...8 for packed8, 0...10 for packed10): the lookup that puts bytes ⌊i·w/8⌋ and ⌊i·w/8⌋ + 1 of the
/// block in 16-bit lane i, the shift counts -s_i, and the mask 2^w - 1.
typedef struct {
    uint8_t lookup[16];
    int16_t shift[8];
    uint16_t mask[8];
} csck_neon_unpack_table;

#define CSCK_SH(w, i) (uint8_t)(((i) * (w)) >> 3), (uint8_t)((((i) * (w)) >> 3) + 1)
#define CSCK_NS(w, i) (int16_t)(-(int)(((i) * (w)) & 7))
#define CSCK_M(w) (uint16_t)((1u << (w)) - 1)
#define CSCK_T(w)                                                                                                     \
    {{CSCK_SH(w, 0), CSCK_SH(w, 1), CSCK_SH(w, 2), CSCK_SH(w, 3), CSCK_SH(w, 4), CSCK_SH(w, 5), CSCK_SH(w, 6),        \
      CSCK_SH(w, 7)},                                                                                                 \
     {CSCK_NS(w, 0), CSCK_NS(w, 1), CSCK_NS(w, 2), CSCK_NS(w, 3), CSCK_NS(w, 4), CSCK_NS(w, 5), CSCK_NS(w, 6),        \
      CSCK_NS(w, 7)},                                                                                                 \
     {CSCK_M(w), CSCK_M(w), CSCK_M(w), CSCK_M(w), CSCK_M(w), CSCK_M(w), CSCK_M(w), CSCK_M(w)}}
static const csck_neon_unpack_table unpackTables[11] __attribute__((aligned(16))) = {
    CSCK_T(0), CSCK_T(1), CSCK_T(2), CSCK_T(3), CSCK_T(4), CSCK_T(5),
    CSCK_T(6), CSCK_T(7), CSCK_T(8), CSCK_T(9), CSCK_T(10),
};
#undef CSCK_T
#undef CSCK_M
#undef CSCK_NS
#undef CSCK_SH

/// The fields of one block (w ≤ 10, the block's bytes in `v` from byte 0) in 16-bit lanes.
static inline uint16x8_t unpack_fields(uint8x16_t v, unsigned w) {
    const csck_neon_unpack_table *t = &unpackTables[w];
    uint16x8_t lanes = vreinterpretq_u16_u8(vqtbl1q_u8(v, vld1q_u8(t->lookup)));
    return vandq_u16(vshlq_u16(lanes, vld1q_s16(t->shift)), vld1q_u16(t->mask));
}

/// See kernels_sse41.c: per 2-bit predictor pattern, the left blocks' bytes, and the carry into each block.
static const uint64_t leftMasks[4][2] __attribute__((aligned(16))) = {
    {0, 0}, {~0ULL, 0}, {0, ~0ULL}, {~0ULL, ~0ULL}};
static const uint64_t carryMasks[4][2] __attribute__((aligned(16))) = {
    {~0ULL, 0}, {~0ULL, ~0ULL}, {~0ULL, 0}, {~0ULL, ~0ULL}};

/// Two blocks of a row: `z` holds their zig-zagged residuals (8 bytes each), `pattern` their predictor bits;
/// writes their 16 samples to `out` and returns the last one in every byte (the sample carried on).
static inline uint8x16_t decode_pair8(uint8x16_t z, const uint8_t *above, uint8_t *out, unsigned pattern,
                                      uint8x16_t previous) {
    // Block 0's last sample into block 1's bytes (out-of-range indices give 0 in block 0's bytes).
    static const uint8_t lastOfFirstIndices[16] = {255, 255, 255, 255, 255, 255, 255, 255, 7, 7, 7, 7, 7, 7, 7, 7};
    // Undo the zig-zag: d = (z >> 1) ^ -(z & 1), byte-wise.
    uint8x16_t d = veorq_u8(vshrq_n_u8(z, 1),
                            vreinterpretq_u8_s8(vnegq_s8(vreinterpretq_s8_u8(vandq_u8(z, vdupq_n_u8(1))))));
    uint8x16_t up = vaddq_u8(vld1q_u8(above), d);
    // Prefix sums within each block of 8 bytes.
    uint8x16_t s = vaddq_u8(d, vreinterpretq_u8_u64(vshlq_n_u64(vreinterpretq_u64_u8(d), 8)));
    s = vaddq_u8(s, vreinterpretq_u8_u64(vshlq_n_u64(vreinterpretq_u64_u8(s), 16)));
    s = vaddq_u8(s, vreinterpretq_u8_u64(vshlq_n_u64(vreinterpretq_u64_u8(s), 32)));
    const uint8x16_t left = vreinterpretq_u8_u64(vld1q_u64(leftMasks[pattern]));
    uint8x16_t b = vbslq_u8(left, s, up);
    // The sample carried into block 0 is `previous`; into block 1, block 0's last sample (plus `previous` if
    // block 0 is left-predicted).
    uint8x16_t carried = vaddq_u8(vqtbl1q_u8(b, vld1q_u8(lastOfFirstIndices)),
                                  vandq_u8(previous, vreinterpretq_u8_u64(vld1q_u64(carryMasks[pattern]))));
    uint8x16_t result = vaddq_u8(b, vandq_u8(carried, left));
    vst1q_u8(out, result);
    return vdupq_laneq_u8(result, 15);
}

/// The zig-zagged residuals of two blocks at `payload` (widths w0, w1), 8 bytes each.
static inline uint8x16_t unpack_pair8(const uint8_t *first, unsigned w0, const uint8_t *second, unsigned w1) {
    const uint8x8_t zero8 = vdup_n_u8(0);
    uint16x8_t f0 = unpack_fields(vcombine_u8(vld1_u8(first), zero8), w0);
    uint16x8_t f1 = unpack_fields(vcombine_u8(vld1_u8(second), zero8), w1);
    return vuzp1q_u8(vreinterpretq_u8_u16(f0), vreinterpretq_u8_u16(f1));
}

static void decode_packed8_neon_unchecked(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                              const uint8_t *bits, size_t width, size_t height, uint8_t *x, size_t stride) {
    const size_t blocksPerRow = (width + 7) >> 3;
    // Blocks wholly inside a row: the vector loops write only those, so nothing is written past a row's end.
    const size_t wholeBlocks = width >> 3;
    for (size_t y = 0; y < height; y++) {
        uint8_t *current = x + y * stride;
        // Row 0 is left-predicted throughout; its "above" is never selected (reads stay inside x).
        const uint8_t *above = y == 0 ? x : x + (y - 1) * stride;
        const unsigned forceLeft = y == 0 ? 15 : 0;
        uint8x16_t previous = vdupq_n_u8(y == 0 ? 0 : above[0]);
        const size_t firstBlock = y * blocksPerRow;
        size_t column = 0;
        // Four blocks a step (as the SSE4.1 tier, where that measured faster than two): their widths from one
        // load of the private nibbles (the copy has room past its end), one bound check for the four loads.
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
            uint8x16_t za = unpack_pair8(payload + position, w0, payload + p1, w1);
            uint8x16_t zb = unpack_pair8(payload + p2, w2, payload + p3, w3);
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
            uint8x16_t z = unpack_pair8(payload + position, w0, payload + p1, w1);
            position = p1 + w1;
            const unsigned pattern =
                (((bits[block >> 3] | (unsigned)bits[(block >> 3) + 1] << 8) >> (block & 7)) & 3) | (forceLeft & 3);
            previous = decode_pair8(z, above + column * 8, current + column * 8, pattern, previous);
        }
        const uint8_t last = vgetq_lane_u8(previous, 0);
        position = csck_decode_row8_tail(payload, count, position, nibbles, bits, firstBlock, column, width,
                                         forceLeft & 1, last, above, y > 0, current);
    }
}

static void decode_packed10_neon_unchecked(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                               const uint8_t *bits, size_t width, size_t height, uint16_t *x) {
    const size_t blocksPerRow = (width + 7) >> 3;
    const uint16x8_t mask10 = vdupq_n_u16(0x3FF);
    const uint16x8_t ones16 = vdupq_n_u16(1);
    const uint16x8_t zero = vdupq_n_u16(0);
    for (size_t y = 0; y < height; y++) {
        uint16_t *current = x + y * width;
        const uint16_t *above = y == 0 ? x : x + (y - 1) * width;
        const unsigned forceLeft = y == 0 ? 1 : 0;
        uint16x8_t previous = vdupq_n_u16(y == 0 ? 0 : (uint16_t)(above[0] >> 6));
        const size_t firstBlock = y * blocksPerRow;
        size_t column = 0;
        for (; column < blocksPerRow; column++) {
            const size_t block = firstBlock + column;
            const unsigned w = csck_width_of(nibbles, block, 10);
            if (position + 16 > count) break;  // near the end of the payload: the careful path below
            uint16x8_t z = unpack_fields(vld1q_u8(payload + position), w);
            position += w;
            uint16x8_t d = vandq_u16(veorq_u16(vshrq_n_u16(z, 1), vsubq_u16(zero, vandq_u16(z, ones16))), mask10);
            // Both predictions, then a select (branch-free: the predictor bits are data).
            uint16x8_t s = vaddq_u16(d, vextq_u16(zero, d, 7));
            s = vaddq_u16(s, vextq_u16(zero, s, 6));
            s = vaddq_u16(s, vextq_u16(zero, s, 4));
            uint16x8_t aboveValues = vshrq_n_u16(vld1q_u16(above + column * 8), 6);
            const uint16x8_t left = vdupq_n_u16((uint16_t)(0 - (csck_is_left(bits, block) | forceLeft)));
            uint16x8_t result =
                vandq_u16(vbslq_u16(left, vaddq_u16(s, previous), vaddq_u16(aboveValues, d)), mask10);
            vst1q_u16(current + column * 8, vshlq_n_u16(result, 6));
            previous = vdupq_laneq_u16(result, 7);
        }
        uint16_t last = vgetq_lane_u16(previous, 0);
        for (; column < blocksPerRow; column++) {
            const size_t block = firstBlock + column;
            const unsigned w = csck_width_of(nibbles, block, 10);
            last = csck_decode_block10(payload, position, count, w, csck_is_left(bits, block) | forceLeft, last,
                                       above + column * 8, current + column * 8);
            position += w;
        }
    }
}

/// The bit length of the largest byte of each 64-bit lane, in that lane.
static inline uint64x2_t lane_widths(uint8x16_t v) {
    uint64x2_t f = vreinterpretq_u64_u8(v);
    f = vorrq_u64(f, vshrq_n_u64(f, 32));
    f = vorrq_u64(f, vshrq_n_u64(f, 16));
    f = vorrq_u64(f, vshrq_n_u64(f, 8));
    uint8x16_t lengths = vsubq_u8(vdupq_n_u8(8), vclzq_u8(vreinterpretq_u8_u64(f)));
    return vandq_u64(vreinterpretq_u64_u8(lengths), vdupq_n_u64(0xFF));
}

static size_t pack8_neon_unchecked(const uint8_t *up, const uint8_t *left, size_t blockCount, uint8_t *out, size_t *zeroBlocks) {
    const size_t nibbleBytes = (blockCount + 1) >> 1, bitBytes = (blockCount + 7) >> 3;
    uint8_t *nibbles = out, *bits = out + nibbleBytes;
    memset(out, 0, nibbleBytes + bitBytes);
    size_t position = nibbleBytes + bitBytes, zeros = 0, block = 0;
    const uint64x2_t lanes8 = vdupq_n_u64(0x00FF00FF00FF00FFULL);
    const uint64x2_t lanes16 = vdupq_n_u64(0x0000FFFF0000FFFFULL);
    const uint64x2_t low32 = vdupq_n_u64(0xFFFFFFFFULL);
    for (; block + 2 <= blockCount; block += 2) {
        uint8x16_t u = vld1q_u8(up + block * 8);
        uint8x16_t l = vld1q_u8(left + block * 8);
        uint64x2_t wu = lane_widths(u), wl = lane_widths(l);
        // Left where strictly narrower (up on ties), as the portable encoder.
        uint64x2_t useLeft = vcgtq_u64(wu, wl);
        uint64x2_t w = vbslq_u64(useLeft, wl, wu);
        uint64x2_t c = vreinterpretq_u64_u8(vbslq_u8(vreinterpretq_u8_u64(useLeft), l, u));
        int64x2_t w1s = vreinterpretq_s64_u64(w);
        int64x2_t w2s = vaddq_s64(w1s, w1s), w4s = vaddq_s64(w2s, w2s);
        uint64x2_t pairs = vorrq_u64(vandq_u64(c, lanes8), vshlq_u64(vandq_u64(vshrq_n_u64(c, 8), lanes8), w1s));
        uint64x2_t quads =
            vorrq_u64(vandq_u64(pairs, lanes16), vshlq_u64(vandq_u64(vshrq_n_u64(pairs, 16), lanes16), w2s));
        uint64x2_t result = vorrq_u64(vandq_u64(quads, low32), vshlq_u64(vshrq_n_u64(quads, 32), w4s));
        const unsigned w0 = (unsigned)vgetq_lane_u64(w, 0), w1 = (unsigned)vgetq_lane_u64(w, 1);
        uint64_t v0 = vgetq_lane_u64(result, 0), v1 = vgetq_lane_u64(result, 1);
        memcpy(out + position, &v0, 8);
        position += w0;
        memcpy(out + position, &v1, 8);
        position += w1;
        // block is even: its two nibbles are one whole byte.
        nibbles[block >> 1] = (uint8_t)(w0 | w1 << 4);
        const unsigned leftBits =
            (unsigned)(vgetq_lane_u64(useLeft, 0) & 1) | (unsigned)(vgetq_lane_u64(useLeft, 1) & 1) << 1;
        bits[block >> 3] |= (uint8_t)(leftBits << (block & 7));
        zeros += (w0 == 0) + (w1 == 0);
    }
    position = csck_pack8_tail(up, left, block, blockCount, out, nibbles, bits, position, &zeros);
    *zeroBlocks = zeros;
    return position;
}


// MARK: The checked entry points (capacities: CSurfaceCodecKernels.h)

int csck_decode_packed8_neon(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                             size_t nibbleCapacity, const uint8_t *bits, size_t bitCapacity, size_t width,
                             size_t height, uint8_t *x, size_t xCapacity, size_t stride) {
    if (!csck_decode_capacities_hold(count, position, nibbleCapacity, bitCapacity, width, height, stride, width,
                                     xCapacity))
        return -1;
    decode_packed8_neon_unchecked(payload, count, position, nibbles, bits, width, height, x, stride);
    return 0;
}

int csck_decode_packed10_neon(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                              size_t nibbleCapacity, const uint8_t *bits, size_t bitCapacity, size_t width,
                              size_t height, uint16_t *x, size_t xCapacity) {
    if (!csck_decode10_capacities_hold(count, position, nibbleCapacity, bitCapacity, width, height, xCapacity))
        return -1;
    decode_packed10_neon_unchecked(payload, count, position, nibbles, bits, width, height, x);
    return 0;
}

size_t csck_pack8_neon(const uint8_t *up, const uint8_t *left, size_t blockCount, uint8_t *out, size_t outCapacity,
                       size_t *zeroBlocks) {
    if (!csck_pack_capacity_holds(blockCount, outCapacity)) return CSCK_PACK_REFUSED;
    return pack8_neon_unchecked(up, left, blockCount, out, zeroBlocks);
}

#endif
