// Scalar helpers shared by the AVX2, SSE4.1 and NEON kernels (internal to CSurfaceCodecKernels): bounded loads, the
// control fields, and one block decoded or packed the portable way, for what the vector loops leave.
#ifndef CSURFACE_CODEC_KERNELS_SCALAR_H
#define CSURFACE_CODEC_KERNELS_SCALAR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/// Whether a packed decoder's capacities hold (CSurfaceCodecKernels.h): position ≤ count; the controls cover
/// ⌈blocks / 2⌉ and ⌈blocks / 8⌉ bytes plus CSCK_CONTROL_SLACK each; rows `stride` apart (≥ width), the last
/// `lastRow` units long, fit in `xCapacity` units. No arithmetic here can wrap: an overflow refuses.
static inline int csck_decode_capacities_hold(size_t count, size_t position, size_t nibbleCapacity,
                                              size_t bitCapacity, size_t width, size_t height, size_t stride,
                                              size_t lastRow, size_t xCapacity) {
    if (position > count || stride < width) return 0;
    const size_t blocksPerRow = (width >> 3) + ((width & 7) != 0);
    size_t blocks, need;
    if (__builtin_mul_overflow(blocksPerRow, height, &blocks)) return 0;
    const size_t nibbleBytes = (blocks >> 1) + (blocks & 1), bitBytes = (blocks >> 3) + ((blocks & 7) != 0);
    if (nibbleCapacity < CSCK_CONTROL_SLACK || nibbleCapacity - CSCK_CONTROL_SLACK < nibbleBytes) return 0;
    if (bitCapacity < CSCK_CONTROL_SLACK || bitCapacity - CSCK_CONTROL_SLACK < bitBytes) return 0;
    if (height == 0) return 1;
    if (__builtin_mul_overflow(height - 1, stride, &need) || __builtin_add_overflow(need, lastRow, &need)) return 0;
    return xCapacity >= need;
}

/// Whether a packed10 decoder's capacities hold: as csck_decode_capacities_hold with rows `width` apart, the last row
/// reaching ⌈width / 8⌉ × 8 samples (the kernels store whole blocks; an overflow refuses).
static inline int csck_decode10_capacities_hold(size_t count, size_t position, size_t nibbleCapacity,
                                                size_t bitCapacity, size_t width, size_t height, size_t xCapacity) {
    const size_t blocksPerRow = (width >> 3) + ((width & 7) != 0);
    if (blocksPerRow > SIZE_MAX / 8) return 0;
    return csck_decode_capacities_hold(count, position, nibbleCapacity, bitCapacity, width, height, width,
                                       blocksPerRow * 8, xCapacity);
}

/// Whether a pack8 kernel's output capacity covers the worst case plus CSCK_PACK_SLACK (CSurfaceCodecKernels.h).
static inline int csck_pack_capacity_holds(size_t blockCount, size_t outCapacity) {
    size_t need;
    if (__builtin_mul_overflow(blockCount, (size_t)8, &need)) return 0;
    const size_t controls = (blockCount >> 1) + (blockCount & 1) + (blockCount >> 3) + ((blockCount & 7) != 0);
    if (__builtin_add_overflow(need, controls + CSCK_PACK_SLACK, &need)) return 0;
    return outCapacity >= need;
}

/// 8 bytes at `offset`, zero-filled past `count`.
static inline uint64_t csck_load64(const uint8_t *p, size_t offset, size_t count) {
    uint64_t v = 0;
    if (offset <= count && count - offset >= 8) {
        memcpy(&v, p + offset, 8);
        return v;
    }
    for (size_t i = 0; offset + i < count && i < 8; i++) v |= (uint64_t)p[offset + i] << (8 * i);
    return v;
}

/// A block's width nibble, clamped to `maximum`.
static inline unsigned csck_width_of(const uint8_t *nibbles, size_t block, unsigned maximum) {
    unsigned w = (nibbles[block >> 1] >> ((block & 1) * 4)) & 15;
    return w > maximum ? maximum : w;
}

static inline unsigned csck_is_left(const uint8_t *bits, size_t block) { return (bits[block >> 3] >> (block & 7)) & 1; }

/// Byte-wise a + b (no carries between bytes).
static inline uint64_t csck_add_bytes(uint64_t a, uint64_t b) {
    const uint64_t low7 = 0x7F7F7F7F7F7F7F7FULL, high1 = 0x8080808080808080ULL;
    return ((a & low7) + (b & low7)) ^ ((a ^ b) & high1);
}

/// One packed8 block (fields of w ≤ 8 bits in `v`) the portable way (SWAR) into out[0..<8]; `above` holds the
/// 8 samples above (read only for an up block). Returns the last sample.
static inline uint8_t csck_decode_block8(uint64_t v, unsigned w, unsigned left, uint8_t previous,
                                         const uint8_t *above, uint8_t *out) {
    uint64_t w64 = w;
    uint64_t m4 = (1ULL << (4 * w64)) - 1;
    uint64_t halves = (v & m4) | ((v >> (4 * w64)) & m4) << 32;
    uint64_t m2 = ((1ULL << (2 * w64)) - 1) * 0x0000000100000001ULL;
    uint64_t quads = (halves & m2) | ((halves >> (2 * w64)) & m2) << 16;
    uint64_t m1 = ((1ULL << w64) - 1) * 0x0001000100010001ULL;
    uint64_t z = (quads & m1) | ((quads >> w64) & m1) << 8;
    uint64_t d = ((z >> 1) & 0x7F7F7F7F7F7F7F7FULL) ^ ((z & 0x0101010101010101ULL) * 0xFF);
    uint64_t result;
    if (left) {
        uint64_t s = csck_add_bytes(d, d << 8);
        s = csck_add_bytes(s, s << 16);
        s = csck_add_bytes(s, s << 32);
        result = csck_add_bytes(s, (uint64_t)previous * 0x0101010101010101ULL);
    } else {
        uint64_t a;
        memcpy(&a, above, 8);
        result = csck_add_bytes(a, d);
    }
    memcpy(out, &result, 8);
    return (uint8_t)(result >> 56);
}

/// The blocks of a packed8 row from `column` on, the careful way: every load bounded by `count`, and only the
/// row's samples written (a partial last block is decoded aside). Returns the position after them.
static inline size_t csck_decode_row8_tail(const uint8_t *payload, size_t count, size_t position,
                                           const uint8_t *nibbles, const uint8_t *bits, size_t firstBlock,
                                           size_t column, size_t width, unsigned forceLeft, uint8_t last,
                                           const uint8_t *above, int hasAbove, uint8_t *current) {
    const size_t blocksPerRow = (width + 7) >> 3;
    for (; column < blocksPerRow; column++) {
        const size_t block = firstBlock + column;
        const unsigned w = csck_width_of(nibbles, block, 8);
        const uint64_t v = csck_load64(payload, position, count);
        position += w;
        uint8_t decoded[8];
        uint8_t aboveBytes[8] = {0};
        const size_t samples = width - column * 8 < 8 ? width - column * 8 : 8;
        if (hasAbove) memcpy(aboveBytes, above + column * 8, samples);
        last = csck_decode_block8(v, w, csck_is_left(bits, block) | forceLeft, last, aboveBytes, decoded);
        memcpy(current + column * 8, decoded, samples);
        if (samples < 8) last = decoded[samples - 1];
    }
    return position;
}

/// One packed10 block the portable way into out[0..<8] (values << 6): returns the last value (10 bits).
static inline uint16_t csck_decode_block10(const uint8_t *payload, size_t position, size_t count, unsigned w,
                                           unsigned left, uint16_t previous, const uint16_t *above, uint16_t *out) {
    uint16_t z[8];
    uint64_t low = csck_load64(payload, position, count);
    uint64_t high = csck_load64(payload, position + (w >> 1), count) >> ((w & 1) * 4);
    uint64_t mask = (1ULL << w) - 1;
    for (unsigned k = 0; k < 4; k++) {
        z[k] = (uint16_t)((low >> (k * w)) & mask);
        z[k + 4] = (uint16_t)((high >> (k * w)) & mask);
    }
    uint16_t value = previous;
    for (unsigned k = 0; k < 8; k++) {
        uint16_t d = (uint16_t)((z[k] >> 1) ^ (0u - (z[k] & 1u)));
        uint16_t p = left ? value : (uint16_t)(above[k] >> 6);
        value = (uint16_t)((p + d) & 0x3FF);
        out[k] = (uint16_t)(value << 6);
    }
    return value;
}

/// The bit length of the largest of 8 bytes (0...8).
static inline unsigned csck_width8(uint64_t v) {
    uint64_t folded = v | v >> 32;
    folded |= folded >> 16;
    folded |= folded >> 8;
    unsigned byte = (unsigned)(folded & 0xFF);
    return byte == 0 ? 0 : 32 - (unsigned)__builtin_clz(byte);
}

/// Packs 8 bytes, each below 2^w, into the low 8·w bits (byte i at bit w·i).
static inline uint64_t csck_compact8(uint64_t bytes, unsigned w) {
    const uint64_t lanes8 = 0x00FF00FF00FF00FFULL, lanes16 = 0x0000FFFF0000FFFFULL;
    uint64_t pairs = (bytes & lanes8) | ((bytes >> 8) & lanes8) << w;
    uint64_t quads = (pairs & lanes16) | ((pairs >> 16) & lanes16) << (2 * w);
    return (quads & 0xFFFFFFFFULL) | (quads >> 32) << (4 * w);
}

/// Packs blocks [block, blockCount) the portable way after a vector loop (see csck_pack8_*): returns the position.
static inline size_t csck_pack8_tail(const uint8_t *up, const uint8_t *left, size_t block, size_t blockCount,
                                     uint8_t *out, uint8_t *nibbles, uint8_t *bits, size_t position,
                                     size_t *zeros) {
    for (; block < blockCount; block++) {
        uint64_t u, l;
        memcpy(&u, up + block * 8, 8);
        memcpy(&l, left + block * 8, 8);
        unsigned wu = csck_width8(u), wl = csck_width8(l);
        unsigned useLeft = wl < wu;
        unsigned w = useLeft ? wl : wu;
        uint64_t v = csck_compact8(useLeft ? l : u, w);
        memcpy(out + position, &v, 8);
        position += w;
        *zeros += w == 0;
        nibbles[block >> 1] |= (uint8_t)(w << ((block & 1) * 4));
        bits[block >> 3] |= (uint8_t)(useLeft << (block & 7));
    }
    return position;
}

#endif
