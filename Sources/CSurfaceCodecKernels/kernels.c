#include "CSurfaceCodecKernels.h"
#include "kernels_scalar.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

int csck_cpu_has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") ? 1 : 0;
}

/// Per 4-bit predictor pattern of a group of four blocks (bit k: block k is left-predicted), the masks that
/// resolve the carries of the group at once. With x_k the last byte of block k before its carry and n_k the
/// last sample of block k (n_k = x_k + (left_k ? n_(k-1) : 0), n_(-1) the sample carried into the group):
/// - left: 0xFF over the left blocks;
/// - sums: lane k ≥ 1 selects the bytes x_m...x_(k-1) that add up to n_(k-1) without the carried sample (none
///   when block k is up-predicted, whose carry is 0); lane 0 selects the bytes that add up to n_3 likewise;
/// - carried: 0xFF over block k when n_(k-1) includes the sample carried into the group (blocks 0...k all left);
/// - through: 0xFF everywhere when n_3 includes it (all four blocks left).
typedef struct {
    uint64_t left[4];
    uint64_t sums[4];
    uint64_t carried[4];
    uint64_t through[4];
} CarryMasks;

static const CarryMasks carryMasks[16] __attribute__((aligned(32))) = {
    // blocks 0...3: up up up up
    {{0, 0, 0, 0},
     {0x00000000FF000000, 0, 0, 0},
     {0, 0, 0, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: left up up up
    {{~0ULL, 0, 0, 0},
     {0x00000000FF000000, 0, 0, 0},
     {~0ULL, 0, 0, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: up left up up
    {{0, ~0ULL, 0, 0},
     {0x00000000FF000000, 0x00000000000000FF, 0, 0},
     {0, 0, 0, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: left left up up
    {{~0ULL, ~0ULL, 0, 0},
     {0x00000000FF000000, 0x00000000000000FF, 0, 0},
     {~0ULL, ~0ULL, 0, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: up up left up
    {{0, 0, ~0ULL, 0},
     {0x00000000FF000000, 0, 0x000000000000FF00, 0},
     {0, 0, 0, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: left up left up
    {{~0ULL, 0, ~0ULL, 0},
     {0x00000000FF000000, 0, 0x000000000000FF00, 0},
     {~0ULL, 0, 0, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: up left left up
    {{0, ~0ULL, ~0ULL, 0},
     {0x00000000FF000000, 0x00000000000000FF, 0x000000000000FFFF, 0},
     {0, 0, 0, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: left left left up
    {{~0ULL, ~0ULL, ~0ULL, 0},
     {0x00000000FF000000, 0x00000000000000FF, 0x000000000000FFFF, 0},
     {~0ULL, ~0ULL, ~0ULL, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: up up up left
    {{0, 0, 0, ~0ULL},
     {0x00000000FFFF0000, 0, 0, 0x0000000000FF0000},
     {0, 0, 0, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: left up up left
    {{~0ULL, 0, 0, ~0ULL},
     {0x00000000FFFF0000, 0, 0, 0x0000000000FF0000},
     {~0ULL, 0, 0, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: up left up left
    {{0, ~0ULL, 0, ~0ULL},
     {0x00000000FFFF0000, 0x00000000000000FF, 0, 0x0000000000FF0000},
     {0, 0, 0, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: left left up left
    {{~0ULL, ~0ULL, 0, ~0ULL},
     {0x00000000FFFF0000, 0x00000000000000FF, 0, 0x0000000000FF0000},
     {~0ULL, ~0ULL, 0, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: up up left left
    {{0, 0, ~0ULL, ~0ULL},
     {0x00000000FFFFFF00, 0, 0x000000000000FF00, 0x0000000000FFFF00},
     {0, 0, 0, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: left up left left
    {{~0ULL, 0, ~0ULL, ~0ULL},
     {0x00000000FFFFFF00, 0, 0x000000000000FF00, 0x0000000000FFFF00},
     {~0ULL, 0, 0, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: up left left left
    {{0, ~0ULL, ~0ULL, ~0ULL},
     {0x00000000FFFFFFFF, 0x00000000000000FF, 0x000000000000FFFF, 0x0000000000FFFFFF},
     {0, 0, 0, 0},
     {0, 0, 0, 0}},
    // blocks 0...3: left left left left
    {{~0ULL, ~0ULL, ~0ULL, ~0ULL},
     {0x00000000FFFFFFFF, 0x00000000000000FF, 0x000000000000FFFF, 0x0000000000FFFFFF},
     {~0ULL, ~0ULL, ~0ULL, ~0ULL},
     {~0ULL, ~0ULL, ~0ULL, ~0ULL}},
};

/// Per width nibble, the mask that deposits w-bit fields into the low bits of 8 bytes (pdep); widths above 8
/// are clamped to 8.
static const uint64_t depositMasks[16] = {
    0,
    0x0101010101010101ULL,
    0x0303030303030303ULL,
    0x0707070707070707ULL,
    0x0F0F0F0F0F0F0F0FULL,
    0x1F1F1F1F1F1F1F1FULL,
    0x3F3F3F3F3F3F3F3FULL,
    0x7F7F7F7F7F7F7F7FULL,
    ~0ULL,
    ~0ULL,
    ~0ULL,
    ~0ULL,
    ~0ULL,
    ~0ULL,
    ~0ULL,
    ~0ULL,
};

/// Whether BMI2's pdep is fast here: -1 until checked.
static int fastDeposit = -1;

int csck_pdep_is_fast(int hasBMI2AndAVX2, uint32_t vendorEBX, uint32_t vendorECX, uint32_t vendorEDX,
                      uint32_t signatureEAX) {
    if (!hasBMI2AndAVX2) return 0;
    // "AuthenticAMD" and "HygonGenuine" (ebx, edx, ecx): pdep is microcoded before Zen 3 (family 19h).
    const int amd = vendorEBX == 0x68747541 && vendorEDX == 0x69746e65 && vendorECX == 0x444d4163;
    const int hygon = vendorEBX == 0x6f677948 && vendorEDX == 0x6e65476e && vendorECX == 0x656e6975;
    if (!amd && !hygon) return 1;
    const uint32_t base = (signatureEAX >> 8) & 15;
    const uint32_t family = base == 15 ? base + ((signatureEAX >> 20) & 0xFF) : base;
    return family >= 0x19;
}

int csck_cpu_has_fast_pdep(void) {
    int fast = __atomic_load_n(&fastDeposit, __ATOMIC_RELAXED);
    if (fast >= 0) return fast;
    __builtin_cpu_init();
    const int supported = __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("avx2");
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0, signature = 0;
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) {
        unsigned vendorEBX = ebx, vendorECX = ecx, vendorEDX = edx;
        if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) signature = eax;
        fast = csck_pdep_is_fast(supported, vendorEBX, vendorECX, vendorEDX, signature);
    } else {
        fast = 0;
    }
    __atomic_store_n(&fastDeposit, fast, __ATOMIC_RELAXED);
    return fast;
}

/// Per width nibble (widths above 8 clamped to 8), how a block is unpacked without pdep: a byte shuffle puts the
/// two bytes holding field i (bits w·i ... w·i + w - 1 of the block) in 16-bit lane i, a multiply by 2^(8 - s)
/// (s = w·i mod 8) moves the field to the lane's high byte, and a mask keeps its w bits.
typedef struct {
    uint8_t control[16];
    uint16_t multipliers[8];
    uint16_t masks[8];
} UnpackShuffle;

static const UnpackShuffle unpackShuffles[16] __attribute__((aligned(16))) = {
    // width 0
    {{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1},
     {0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100},
     {0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000}},
    // width 1
    {{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1},
     {0x0100, 0x0080, 0x0040, 0x0020, 0x0010, 0x0008, 0x0004, 0x0002},
     {0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100}},
    // width 2
    {{0, 1, 0, 1, 0, 1, 0, 1, 1, 2, 1, 2, 1, 2, 1, 2},
     {0x0100, 0x0040, 0x0010, 0x0004, 0x0100, 0x0040, 0x0010, 0x0004},
     {0x0300, 0x0300, 0x0300, 0x0300, 0x0300, 0x0300, 0x0300, 0x0300}},
    // width 3
    {{0, 1, 0, 1, 0, 1, 1, 2, 1, 2, 1, 2, 2, 3, 2, 3},
     {0x0100, 0x0020, 0x0004, 0x0080, 0x0010, 0x0002, 0x0040, 0x0008},
     {0x0700, 0x0700, 0x0700, 0x0700, 0x0700, 0x0700, 0x0700, 0x0700}},
    // width 4
    {{0, 1, 0, 1, 1, 2, 1, 2, 2, 3, 2, 3, 3, 4, 3, 4},
     {0x0100, 0x0010, 0x0100, 0x0010, 0x0100, 0x0010, 0x0100, 0x0010},
     {0x0F00, 0x0F00, 0x0F00, 0x0F00, 0x0F00, 0x0F00, 0x0F00, 0x0F00}},
    // width 5
    {{0, 1, 0, 1, 1, 2, 1, 2, 2, 3, 3, 4, 3, 4, 4, 5},
     {0x0100, 0x0008, 0x0040, 0x0002, 0x0010, 0x0080, 0x0004, 0x0020},
     {0x1F00, 0x1F00, 0x1F00, 0x1F00, 0x1F00, 0x1F00, 0x1F00, 0x1F00}},
    // width 6
    {{0, 1, 0, 1, 1, 2, 2, 3, 3, 4, 3, 4, 4, 5, 5, 6},
     {0x0100, 0x0004, 0x0010, 0x0040, 0x0100, 0x0004, 0x0010, 0x0040},
     {0x3F00, 0x3F00, 0x3F00, 0x3F00, 0x3F00, 0x3F00, 0x3F00, 0x3F00}},
    // width 7
    {{0, 1, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7},
     {0x0100, 0x0002, 0x0004, 0x0008, 0x0010, 0x0020, 0x0040, 0x0080},
     {0x7F00, 0x7F00, 0x7F00, 0x7F00, 0x7F00, 0x7F00, 0x7F00, 0x7F00}},
    // width 8
    {{0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8},
     {0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100},
     {0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00}},
    // width 9 (clamped to 8)
    {{0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8},
     {0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100},
     {0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00}},
    // width 10 (clamped to 8)
    {{0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8},
     {0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100},
     {0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00}},
    // width 11 (clamped to 8)
    {{0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8},
     {0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100},
     {0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00}},
    // width 12 (clamped to 8)
    {{0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8},
     {0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100},
     {0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00}},
    // width 13 (clamped to 8)
    {{0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8},
     {0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100},
     {0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00}},
    // width 14 (clamped to 8)
    {{0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8},
     {0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100},
     {0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00}},
    // width 15 (clamped to 8)
    {{0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8},
     {0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100},
     {0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00, 0xFF00}},
};

/// One block's fields by byte shuffle and multiply (see unpackShuffles), each in the high byte of a 16-bit lane;
/// reads 16 bytes at `p`.
__attribute__((target("avx2"), always_inline)) static inline __m128i unpack_shuffled(const uint8_t *p, unsigned w) {
    const UnpackShuffle *table = &unpackShuffles[w];
    const __m128i pairs =
        _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)p), _mm_load_si128((const __m128i *)table->control));
    return _mm_and_si128(_mm_mullo_epi16(pairs, _mm_load_si128((const __m128i *)table->multipliers)),
                         _mm_load_si128((const __m128i *)table->masks));
}

/// Four blocks at p0...p3 (widths w0...w3) unpacked by shuffles, their fields one a byte: blocks 0 and 2, 1 and 3
/// side by side in 256-bit registers, the fields (high bytes of 16-bit lanes) then packed to bytes, blocks 0, 1
/// in the low 128 bits and 2, 3 in the high. Reads 16 bytes at each of p0...p3.
__attribute__((target("avx2"), always_inline)) static inline __m256i
unpack4_shuffled(const uint8_t *payload, size_t p0, size_t p1, size_t p2, size_t p3, unsigned w0, unsigned w1,
                 unsigned w2, unsigned w3) {
    const __m256i h02 = _mm256_inserti128_si256(_mm256_castsi128_si256(unpack_shuffled(payload + p0, w0)),
                                                unpack_shuffled(payload + p2, w2), 1);
    const __m256i h13 = _mm256_inserti128_si256(_mm256_castsi128_si256(unpack_shuffled(payload + p1, w1)),
                                                unpack_shuffled(payload + p3, w3), 1);
    return _mm256_packus_epi16(_mm256_srli_epi16(h02, 8), _mm256_srli_epi16(h13, 8));
}

/// BMI2's pdep, as an instruction of its own so that the decoder around it needs no bmi2 target (the other
/// variant must not use BMI2 instructions). Run only where csck_cpu_has_fast_pdep() returned 1.
static inline uint64_t deposit64(uint64_t source, uint64_t mask) {
    uint64_t result;
    __asm__("pdepq %2, %1, %0" : "=r"(result) : "r"(source), "r"(mask));
    return result;
}

/// Four unpacked blocks (z: their fields, one a byte) through the zig-zag and the predictors, stored at `out`;
/// `pattern` has bit k set when block k is left-predicted. Returns the sample carried out, in every byte.
__attribute__((target("avx2"), always_inline)) static inline __m256i predict4(__m256i z, const uint8_t *above,
                                                                               uint8_t *out, unsigned pattern,
                                                                               __m256i previous) {
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i zero = _mm256_setzero_si256();
    // The last byte of each block (byte 7 of each 64-bit lane) to bytes 0...3 of every 64-bit lane, in two steps:
    // within each 128-bit lane here (blocks 0, 1 to bytes 0, 1; blocks 2, 3 to bytes 2, 3), then across.
    const __m256i gatherLast = _mm256_setr_epi8(7, 15, -1, -1, -1, -1, -1, -1, 7, 15, -1, -1, -1, -1, -1, -1, -1, -1,
                                                7, 15, -1, -1, -1, -1, -1, -1, 7, 15, -1, -1, -1, -1);
    // Byte 0 of 64-bit lanes 1...3 to the whole lane; lane 0 (which holds n_3's sum) to zeros.
    const __m256i spreadSums = _mm256_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, 8, 8, 8, 8, 8, 8, 8, 8, 0, 0, 0, 0, 0,
                                                0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8);
    // Undo the zig-zag, d = (z >> 1) ^ -(z & 1) byte-wise, in four operations: (z + 1) >> 1, negated where z is
    // odd (the sign operand has each byte's bit 0 as its sign bit, and is never 0).
    __m256i d = _mm256_sign_epi8(_mm256_avg_epu8(z, zero), _mm256_or_si256(_mm256_slli_epi16(z, 7), ones8));
    __m256i up = _mm256_add_epi8(_mm256_loadu_si256((const __m256i *)above), d);
    // Prefix sums within each block of 8 bytes.
    __m256i s = _mm256_add_epi8(d, _mm256_slli_epi64(d, 8));
    s = _mm256_add_epi8(s, _mm256_slli_epi64(s, 16));
    s = _mm256_add_epi8(s, _mm256_slli_epi64(s, 32));
    const CarryMasks *masks = &carryMasks[pattern];
    // Each block before its carry: the up result, or the prefix sums of a left block.
    __m256i b = _mm256_blendv_epi8(up, s, _mm256_load_si256((const __m256i *)masks->left));
    // The carries: each n_k is a sum of some of the x_k (one psadbw over masked copies of them) plus,
    // when the left run reaches back into the previous group, the sample carried in. Only the last
    // two operations depend on the previous group.
    __m256i lasts = _mm256_shuffle_epi8(b, gatherLast);
    lasts = _mm256_or_si256(lasts, _mm256_permute2x128_si256(lasts, lasts, 0x01));
    __m256i sums = _mm256_sad_epu8(_mm256_and_si256(lasts, _mm256_load_si256((const __m256i *)masks->sums)), zero);
    __m256i carried = _mm256_add_epi8(b, _mm256_shuffle_epi8(sums, spreadSums));
    __m256i last = _mm256_broadcastb_epi8(_mm256_castsi256_si128(sums));
    _mm256_storeu_si256(
        (__m256i *)out,
        _mm256_add_epi8(carried, _mm256_and_si256(previous, _mm256_load_si256((const __m256i *)masks->carried))));
    return _mm256_add_epi8(last, _mm256_and_si256(previous, _mm256_load_si256((const __m256i *)masks->through)));
}

/// The packed8 decoder, with the blocks unpacked by pdep (deposit = 1) or by byte shuffles and multiplies
/// (deposit = 0), eight blocks a step, then four; the blocks these steps leave (a row's end, the payload's end)
/// are decoded one at a time with bounded loads.
__attribute__((target("avx2"), always_inline)) static inline void
decode_packed8(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles, const uint8_t *bits,
               size_t width, size_t height, uint8_t *x, size_t stride, const int deposit) {
    const size_t blocksPerRow = (width + 7) >> 3;
    // Blocks wholly inside a row: the vector loop writes only those, so nothing is written past a row's end.
    const size_t wholeBlocks = width >> 3;
    for (size_t y = 0; y < height; y++) {
        uint8_t *current = x + y * stride;
        // Row 0 is left-predicted throughout; its "above" is never selected (reads stay inside x).
        const uint8_t *above = y == 0 ? x : x + (y - 1) * stride;
        const unsigned forceLeft = y == 0 ? 15 : 0;
        // The sample carried into the next block, in every byte.
        __m256i previous = _mm256_set1_epi8((char)(y == 0 ? 0 : above[0]));
        const size_t firstBlock = y * blocksPerRow;
        size_t column = 0;
        // Eight blocks a step: one load of their width nibbles and predictor bits.
        for (; column + 8 <= wholeBlocks; column += 8) {
            const size_t block = firstBlock + column;
            // Eight width nibbles from the private controls (the slot has room past their end).
            uint64_t nib;
            memcpy(&nib, nibbles + (block >> 1), 8);
            nib >>= (block & 1) * 4;
            const unsigned w0 = nib & 15, w1 = (nib >> 4) & 15, w2 = (nib >> 8) & 15, w3 = (nib >> 12) & 15;
            const unsigned w4 = (nib >> 16) & 15, w5 = (nib >> 20) & 15, w6 = (nib >> 24) & 15, w7 = (nib >> 28) & 15;
            uint16_t bitWord;
            memcpy(&bitWord, bits + (block >> 3), 2);
            const unsigned pattern = (unsigned)(bitWord >> (block & 7));
            // Eight up-predicted blocks of width 0 (flat screen content): the row above, and its last sample
            // carried; no payload byte is read.
            if ((uint32_t)nib == 0 && ((pattern & 0xFF) | forceLeft) == 0) {
                _mm256_storeu_si256((__m256i *)(current + column * 8),
                                    _mm256_loadu_si256((const __m256i *)(above + column * 8)));
                _mm256_storeu_si256((__m256i *)(current + column * 8 + 32),
                                    _mm256_loadu_si256((const __m256i *)(above + column * 8 + 32)));
                previous = _mm256_set1_epi8((char)above[column * 8 + 63]);
                continue;
            }
            const size_t p1 = position + w0, p2 = p1 + w1, p3 = p2 + w2, p4 = p3 + w3, p5 = p4 + w4, p6 = p5 + w5;
            const size_t p7 = p6 + w6;
            // Near the end of the payload, the steps below (pdep reads 8 bytes a block, shuffles 16).
            if (p7 + (deposit ? 8 : 16) > count) break;
            __m256i z0, z1;
            if (deposit) {
                uint64_t v0, v1, v2, v3, v4, v5, v6, v7;
                memcpy(&v0, payload + position, 8);
                memcpy(&v1, payload + p1, 8);
                memcpy(&v2, payload + p2, 8);
                memcpy(&v3, payload + p3, 8);
                memcpy(&v4, payload + p4, 8);
                memcpy(&v5, payload + p5, 8);
                memcpy(&v6, payload + p6, 8);
                memcpy(&v7, payload + p7, 8);
                // Each w-bit field to the low bits of its byte.
                z0 = _mm256_set_epi64x(
                    (long long)deposit64(v3, depositMasks[w3]), (long long)deposit64(v2, depositMasks[w2]),
                    (long long)deposit64(v1, depositMasks[w1]), (long long)deposit64(v0, depositMasks[w0]));
                z1 = _mm256_set_epi64x(
                    (long long)deposit64(v7, depositMasks[w7]), (long long)deposit64(v6, depositMasks[w6]),
                    (long long)deposit64(v5, depositMasks[w5]), (long long)deposit64(v4, depositMasks[w4]));
            } else {
                z0 = unpack4_shuffled(payload, position, p1, p2, p3, w0, w1, w2, w3);
                z1 = unpack4_shuffled(payload, p4, p5, p6, p7, w4, w5, w6, w7);
            }
            position = p7 + w7;
            previous = predict4(z0, above + column * 8, current + column * 8, (pattern & 15) | forceLeft, previous);
            previous = predict4(z1, above + column * 8 + 32, current + column * 8 + 32,
                                ((pattern >> 4) & 15) | forceLeft, previous);
        }
        for (; column + 4 <= wholeBlocks; column += 4) {
            const size_t block = firstBlock + column;
            // Four width nibbles from the private controls (the slot has room past their end).
            uint32_t nib;
            memcpy(&nib, nibbles + (block >> 1), 4);
            nib >>= (block & 1) * 4;
            const unsigned w0 = nib & 15, w1 = (nib >> 4) & 15, w2 = (nib >> 8) & 15, w3 = (nib >> 12) & 15;
            const size_t p1 = position + w0, p2 = p1 + w1, p3 = p2 + w2;
            // Near the end of the payload, the careful path below (pdep reads 8 bytes a block, shuffles 16).
            if (p3 + (deposit ? 8 : 16) > count) break;
            __m256i z;
            if (deposit) {
                uint64_t v0, v1, v2, v3;
                memcpy(&v0, payload + position, 8);
                memcpy(&v1, payload + p1, 8);
                memcpy(&v2, payload + p2, 8);
                memcpy(&v3, payload + p3, 8);
                // Each w-bit field to the low bits of its byte.
                z = _mm256_set_epi64x((long long)deposit64(v3, depositMasks[w3]),
                                      (long long)deposit64(v2, depositMasks[w2]),
                                      (long long)deposit64(v1, depositMasks[w1]),
                                      (long long)deposit64(v0, depositMasks[w0]));
            } else {
                z = unpack4_shuffled(payload, position, p1, p2, p3, w0, w1, w2, w3);
            }
            position = p3 + w3;
            uint16_t bitWord;
            memcpy(&bitWord, bits + (block >> 3), 2);
            previous = predict4(z, above + column * 8, current + column * 8,
                                ((bitWord >> (block & 7)) & 15) | forceLeft, previous);
        }
        // The blocks the vector steps leave (near the payload's end, a partial last block) the careful way.
        const uint8_t last = (uint8_t)_mm256_extract_epi8(previous, 0);
        position = csck_decode_row8_tail(payload, count, position, nibbles, bits, firstBlock, column, width,
                                         forceLeft & 1, last, above, y > 0, current);
    }
}

__attribute__((target("avx2"))) static void decode_packed8_deposit(const uint8_t *payload, size_t count,
                                                                       size_t position, const uint8_t *nibbles,
                                                                       const uint8_t *bits, size_t width,
                                                                       size_t height, uint8_t *x, size_t stride) {
    decode_packed8(payload, count, position, nibbles, bits, width, height, x, stride, 1);
}

__attribute__((target("avx2"))) static void decode_packed8_shuffles(const uint8_t *payload, size_t count,
                                                                 size_t position, const uint8_t *nibbles,
                                                                 const uint8_t *bits, size_t width, size_t height,
                                                                 uint8_t *x, size_t stride) {
    decode_packed8(payload, count, position, nibbles, bits, width, height, x, stride, 0);
}

// MARK: packed8 with AVX-512 (VBMI, GFNI): eight blocks a step in one 512-bit register

/// Whether the processor runs the AVX-512 packed8 decoder (cpuid and the OS's register state, once): AVX-512 F,
/// BW, DQ, VL and VBMI, GFNI and BMI2.
static int avx512Packed8 = -1;

int csck_cpu_has_avx512_packed8(void) {
    int has = __atomic_load_n(&avx512Packed8, __ATOMIC_RELAXED);
    if (has >= 0) return has;
    __builtin_cpu_init();
    has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
          __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2") &&
          __builtin_cpu_supports("gfni") && __builtin_cpu_supports("bmi2");
    __atomic_store_n(&avx512Packed8, has, __ATOMIC_RELAXED);
    return has;
}

/// Per width (0...8), the GF(2) matrix (gf2p8affineqb) that keeps a field's low w bits and undoes the zig-zag at
/// once: output bit i (row i in byte 7 − i) is bit i + 1 (when i + 1 < w) xor bit 0 (when w > 0), so that
/// d = ((z & (2^w − 1)) >> 1) ^ −(z & 1), as csck_decode_block8 computes it. Entries 9...15 repeat width 8.
static const uint64_t zigzagMatrices[16] __attribute__((aligned(64))) = {
    0x0000000000000000ULL, 0x0101010101010101ULL, 0x0301010101010101ULL, 0x0305010101010101ULL,
    0x0305090101010101ULL, 0x0305091101010101ULL, 0x0305091121010101ULL, 0x0305091121410101ULL,
    0x0305091121418101ULL, 0x0305091121418101ULL, 0x0305091121418101ULL, 0x0305091121418101ULL,
    0x0305091121418101ULL, 0x0305091121418101ULL, 0x0305091121418101ULL, 0x0305091121418101ULL,
};

/// Per width (0...8), vpmultishiftqb's control: byte j selects the 8 bits at bit j·w of the block. Entries 9...15
/// repeat width 8.
static const uint64_t fieldShifts[16] __attribute__((aligned(64))) = {
    0x0000000000000000ULL, 0x0706050403020100ULL, 0x0E0C0A0806040200ULL, 0x15120F0C09060300ULL,
    0x1C1814100C080400ULL, 0x231E19140F0A0500ULL, 0x2A241E18120C0600ULL, 0x312A231C150E0700ULL,
    0x3830282018100800ULL, 0x3830282018100800ULL, 0x3830282018100800ULL, 0x3830282018100800ULL,
    0x3830282018100800ULL, 0x3830282018100800ULL, 0x3830282018100800ULL, 0x3830282018100800ULL,
};

/// Per 8-bit predictor pattern of a step (bit k: block k is left-predicted), which bytes of `lasts` lane k adds
/// up to the carry into block k: with position 0 standing for the sample carried into the step and position
/// m + 1 for x_m (block m's last sample before its carry), lane k takes positions p...k, where p − 1 is the last
/// up-predicted block before k (p = 0 when there is none: the carried sample is then added apart, so position 0
/// is never taken). Bit 8·k + p of the entry. Indexed by the pattern's low 7 bits: block 7's own predictor changes
/// no carry (a carry goes only into the blocks after the one it comes from; whether block 7 takes its carry is the
/// masked add in predict8_avx512), so the table for bit 7 set would repeat this one.
static const uint64_t carryRuns[128] __attribute__((aligned(64))) = {
    0x8040201008040200ULL, 0x8040201008040200ULL, 0x8040201008060200ULL, 0x8040201008060200ULL,
    0x804020100C040200ULL, 0x804020100C040200ULL, 0x804020100E060200ULL, 0x804020100E060200ULL,
    0x8040201808040200ULL, 0x8040201808040200ULL, 0x8040201808060200ULL, 0x8040201808060200ULL,
    0x8040201C0C040200ULL, 0x8040201C0C040200ULL, 0x8040201E0E060200ULL, 0x8040201E0E060200ULL,
    0x8040301008040200ULL, 0x8040301008040200ULL, 0x8040301008060200ULL, 0x8040301008060200ULL,
    0x804030100C040200ULL, 0x804030100C040200ULL, 0x804030100E060200ULL, 0x804030100E060200ULL,
    0x8040381808040200ULL, 0x8040381808040200ULL, 0x8040381808060200ULL, 0x8040381808060200ULL,
    0x80403C1C0C040200ULL, 0x80403C1C0C040200ULL, 0x80403E1E0E060200ULL, 0x80403E1E0E060200ULL,
    0x8060201008040200ULL, 0x8060201008040200ULL, 0x8060201008060200ULL, 0x8060201008060200ULL,
    0x806020100C040200ULL, 0x806020100C040200ULL, 0x806020100E060200ULL, 0x806020100E060200ULL,
    0x8060201808040200ULL, 0x8060201808040200ULL, 0x8060201808060200ULL, 0x8060201808060200ULL,
    0x8060201C0C040200ULL, 0x8060201C0C040200ULL, 0x8060201E0E060200ULL, 0x8060201E0E060200ULL,
    0x8070301008040200ULL, 0x8070301008040200ULL, 0x8070301008060200ULL, 0x8070301008060200ULL,
    0x807030100C040200ULL, 0x807030100C040200ULL, 0x807030100E060200ULL, 0x807030100E060200ULL,
    0x8078381808040200ULL, 0x8078381808040200ULL, 0x8078381808060200ULL, 0x8078381808060200ULL,
    0x807C3C1C0C040200ULL, 0x807C3C1C0C040200ULL, 0x807E3E1E0E060200ULL, 0x807E3E1E0E060200ULL,
    0xC040201008040200ULL, 0xC040201008040200ULL, 0xC040201008060200ULL, 0xC040201008060200ULL,
    0xC04020100C040200ULL, 0xC04020100C040200ULL, 0xC04020100E060200ULL, 0xC04020100E060200ULL,
    0xC040201808040200ULL, 0xC040201808040200ULL, 0xC040201808060200ULL, 0xC040201808060200ULL,
    0xC040201C0C040200ULL, 0xC040201C0C040200ULL, 0xC040201E0E060200ULL, 0xC040201E0E060200ULL,
    0xC040301008040200ULL, 0xC040301008040200ULL, 0xC040301008060200ULL, 0xC040301008060200ULL,
    0xC04030100C040200ULL, 0xC04030100C040200ULL, 0xC04030100E060200ULL, 0xC04030100E060200ULL,
    0xC040381808040200ULL, 0xC040381808040200ULL, 0xC040381808060200ULL, 0xC040381808060200ULL,
    0xC0403C1C0C040200ULL, 0xC0403C1C0C040200ULL, 0xC0403E1E0E060200ULL, 0xC0403E1E0E060200ULL,
    0xE060201008040200ULL, 0xE060201008040200ULL, 0xE060201008060200ULL, 0xE060201008060200ULL,
    0xE06020100C040200ULL, 0xE06020100C040200ULL, 0xE06020100E060200ULL, 0xE06020100E060200ULL,
    0xE060201808040200ULL, 0xE060201808040200ULL, 0xE060201808060200ULL, 0xE060201808060200ULL,
    0xE060201C0C040200ULL, 0xE060201C0C040200ULL, 0xE060201E0E060200ULL, 0xE060201E0E060200ULL,
    0xF070301008040200ULL, 0xF070301008040200ULL, 0xF070301008060200ULL, 0xF070301008060200ULL,
    0xF07030100C040200ULL, 0xF07030100C040200ULL, 0xF07030100E060200ULL, 0xF07030100E060200ULL,
    0xF878381808040200ULL, 0xF878381808040200ULL, 0xF878381808060200ULL, 0xF878381808060200ULL,
    0xFC7C3C1C0C040200ULL, 0xFC7C3C1C0C040200ULL, 0xFE7E3E1E0E060200ULL, 0xFE7E3E1E0E060200ULL,
};

/// Per 8-bit predictor pattern of a step (bit k: block k is left-predicted), 0xFF over the bytes of the left blocks
/// (a load where pdep and a multiply were: measured, a step's scalar work is part of its cost).
static const uint64_t leftBlockBytes[256] __attribute__((aligned(64))) = {
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x000000000000FF00ULL, 0x000000000000FFFFULL,
    0x0000000000FF0000ULL, 0x0000000000FF00FFULL, 0x0000000000FFFF00ULL, 0x0000000000FFFFFFULL,
    0x00000000FF000000ULL, 0x00000000FF0000FFULL, 0x00000000FF00FF00ULL, 0x00000000FF00FFFFULL,
    0x00000000FFFF0000ULL, 0x00000000FFFF00FFULL, 0x00000000FFFFFF00ULL, 0x00000000FFFFFFFFULL,
    0x000000FF00000000ULL, 0x000000FF000000FFULL, 0x000000FF0000FF00ULL, 0x000000FF0000FFFFULL,
    0x000000FF00FF0000ULL, 0x000000FF00FF00FFULL, 0x000000FF00FFFF00ULL, 0x000000FF00FFFFFFULL,
    0x000000FFFF000000ULL, 0x000000FFFF0000FFULL, 0x000000FFFF00FF00ULL, 0x000000FFFF00FFFFULL,
    0x000000FFFFFF0000ULL, 0x000000FFFFFF00FFULL, 0x000000FFFFFFFF00ULL, 0x000000FFFFFFFFFFULL,
    0x0000FF0000000000ULL, 0x0000FF00000000FFULL, 0x0000FF000000FF00ULL, 0x0000FF000000FFFFULL,
    0x0000FF0000FF0000ULL, 0x0000FF0000FF00FFULL, 0x0000FF0000FFFF00ULL, 0x0000FF0000FFFFFFULL,
    0x0000FF00FF000000ULL, 0x0000FF00FF0000FFULL, 0x0000FF00FF00FF00ULL, 0x0000FF00FF00FFFFULL,
    0x0000FF00FFFF0000ULL, 0x0000FF00FFFF00FFULL, 0x0000FF00FFFFFF00ULL, 0x0000FF00FFFFFFFFULL,
    0x0000FFFF00000000ULL, 0x0000FFFF000000FFULL, 0x0000FFFF0000FF00ULL, 0x0000FFFF0000FFFFULL,
    0x0000FFFF00FF0000ULL, 0x0000FFFF00FF00FFULL, 0x0000FFFF00FFFF00ULL, 0x0000FFFF00FFFFFFULL,
    0x0000FFFFFF000000ULL, 0x0000FFFFFF0000FFULL, 0x0000FFFFFF00FF00ULL, 0x0000FFFFFF00FFFFULL,
    0x0000FFFFFFFF0000ULL, 0x0000FFFFFFFF00FFULL, 0x0000FFFFFFFFFF00ULL, 0x0000FFFFFFFFFFFFULL,
    0x00FF000000000000ULL, 0x00FF0000000000FFULL, 0x00FF00000000FF00ULL, 0x00FF00000000FFFFULL,
    0x00FF000000FF0000ULL, 0x00FF000000FF00FFULL, 0x00FF000000FFFF00ULL, 0x00FF000000FFFFFFULL,
    0x00FF0000FF000000ULL, 0x00FF0000FF0000FFULL, 0x00FF0000FF00FF00ULL, 0x00FF0000FF00FFFFULL,
    0x00FF0000FFFF0000ULL, 0x00FF0000FFFF00FFULL, 0x00FF0000FFFFFF00ULL, 0x00FF0000FFFFFFFFULL,
    0x00FF00FF00000000ULL, 0x00FF00FF000000FFULL, 0x00FF00FF0000FF00ULL, 0x00FF00FF0000FFFFULL,
    0x00FF00FF00FF0000ULL, 0x00FF00FF00FF00FFULL, 0x00FF00FF00FFFF00ULL, 0x00FF00FF00FFFFFFULL,
    0x00FF00FFFF000000ULL, 0x00FF00FFFF0000FFULL, 0x00FF00FFFF00FF00ULL, 0x00FF00FFFF00FFFFULL,
    0x00FF00FFFFFF0000ULL, 0x00FF00FFFFFF00FFULL, 0x00FF00FFFFFFFF00ULL, 0x00FF00FFFFFFFFFFULL,
    0x00FFFF0000000000ULL, 0x00FFFF00000000FFULL, 0x00FFFF000000FF00ULL, 0x00FFFF000000FFFFULL,
    0x00FFFF0000FF0000ULL, 0x00FFFF0000FF00FFULL, 0x00FFFF0000FFFF00ULL, 0x00FFFF0000FFFFFFULL,
    0x00FFFF00FF000000ULL, 0x00FFFF00FF0000FFULL, 0x00FFFF00FF00FF00ULL, 0x00FFFF00FF00FFFFULL,
    0x00FFFF00FFFF0000ULL, 0x00FFFF00FFFF00FFULL, 0x00FFFF00FFFFFF00ULL, 0x00FFFF00FFFFFFFFULL,
    0x00FFFFFF00000000ULL, 0x00FFFFFF000000FFULL, 0x00FFFFFF0000FF00ULL, 0x00FFFFFF0000FFFFULL,
    0x00FFFFFF00FF0000ULL, 0x00FFFFFF00FF00FFULL, 0x00FFFFFF00FFFF00ULL, 0x00FFFFFF00FFFFFFULL,
    0x00FFFFFFFF000000ULL, 0x00FFFFFFFF0000FFULL, 0x00FFFFFFFF00FF00ULL, 0x00FFFFFFFF00FFFFULL,
    0x00FFFFFFFFFF0000ULL, 0x00FFFFFFFFFF00FFULL, 0x00FFFFFFFFFFFF00ULL, 0x00FFFFFFFFFFFFFFULL,
    0xFF00000000000000ULL, 0xFF000000000000FFULL, 0xFF0000000000FF00ULL, 0xFF0000000000FFFFULL,
    0xFF00000000FF0000ULL, 0xFF00000000FF00FFULL, 0xFF00000000FFFF00ULL, 0xFF00000000FFFFFFULL,
    0xFF000000FF000000ULL, 0xFF000000FF0000FFULL, 0xFF000000FF00FF00ULL, 0xFF000000FF00FFFFULL,
    0xFF000000FFFF0000ULL, 0xFF000000FFFF00FFULL, 0xFF000000FFFFFF00ULL, 0xFF000000FFFFFFFFULL,
    0xFF0000FF00000000ULL, 0xFF0000FF000000FFULL, 0xFF0000FF0000FF00ULL, 0xFF0000FF0000FFFFULL,
    0xFF0000FF00FF0000ULL, 0xFF0000FF00FF00FFULL, 0xFF0000FF00FFFF00ULL, 0xFF0000FF00FFFFFFULL,
    0xFF0000FFFF000000ULL, 0xFF0000FFFF0000FFULL, 0xFF0000FFFF00FF00ULL, 0xFF0000FFFF00FFFFULL,
    0xFF0000FFFFFF0000ULL, 0xFF0000FFFFFF00FFULL, 0xFF0000FFFFFFFF00ULL, 0xFF0000FFFFFFFFFFULL,
    0xFF00FF0000000000ULL, 0xFF00FF00000000FFULL, 0xFF00FF000000FF00ULL, 0xFF00FF000000FFFFULL,
    0xFF00FF0000FF0000ULL, 0xFF00FF0000FF00FFULL, 0xFF00FF0000FFFF00ULL, 0xFF00FF0000FFFFFFULL,
    0xFF00FF00FF000000ULL, 0xFF00FF00FF0000FFULL, 0xFF00FF00FF00FF00ULL, 0xFF00FF00FF00FFFFULL,
    0xFF00FF00FFFF0000ULL, 0xFF00FF00FFFF00FFULL, 0xFF00FF00FFFFFF00ULL, 0xFF00FF00FFFFFFFFULL,
    0xFF00FFFF00000000ULL, 0xFF00FFFF000000FFULL, 0xFF00FFFF0000FF00ULL, 0xFF00FFFF0000FFFFULL,
    0xFF00FFFF00FF0000ULL, 0xFF00FFFF00FF00FFULL, 0xFF00FFFF00FFFF00ULL, 0xFF00FFFF00FFFFFFULL,
    0xFF00FFFFFF000000ULL, 0xFF00FFFFFF0000FFULL, 0xFF00FFFFFF00FF00ULL, 0xFF00FFFFFF00FFFFULL,
    0xFF00FFFFFFFF0000ULL, 0xFF00FFFFFFFF00FFULL, 0xFF00FFFFFFFFFF00ULL, 0xFF00FFFFFFFFFFFFULL,
    0xFFFF000000000000ULL, 0xFFFF0000000000FFULL, 0xFFFF00000000FF00ULL, 0xFFFF00000000FFFFULL,
    0xFFFF000000FF0000ULL, 0xFFFF000000FF00FFULL, 0xFFFF000000FFFF00ULL, 0xFFFF000000FFFFFFULL,
    0xFFFF0000FF000000ULL, 0xFFFF0000FF0000FFULL, 0xFFFF0000FF00FF00ULL, 0xFFFF0000FF00FFFFULL,
    0xFFFF0000FFFF0000ULL, 0xFFFF0000FFFF00FFULL, 0xFFFF0000FFFFFF00ULL, 0xFFFF0000FFFFFFFFULL,
    0xFFFF00FF00000000ULL, 0xFFFF00FF000000FFULL, 0xFFFF00FF0000FF00ULL, 0xFFFF00FF0000FFFFULL,
    0xFFFF00FF00FF0000ULL, 0xFFFF00FF00FF00FFULL, 0xFFFF00FF00FFFF00ULL, 0xFFFF00FF00FFFFFFULL,
    0xFFFF00FFFF000000ULL, 0xFFFF00FFFF0000FFULL, 0xFFFF00FFFF00FF00ULL, 0xFFFF00FFFF00FFFFULL,
    0xFFFF00FFFFFF0000ULL, 0xFFFF00FFFFFF00FFULL, 0xFFFF00FFFFFFFF00ULL, 0xFFFF00FFFFFFFFFFULL,
    0xFFFFFF0000000000ULL, 0xFFFFFF00000000FFULL, 0xFFFFFF000000FF00ULL, 0xFFFFFF000000FFFFULL,
    0xFFFFFF0000FF0000ULL, 0xFFFFFF0000FF00FFULL, 0xFFFFFF0000FFFF00ULL, 0xFFFFFF0000FFFFFFULL,
    0xFFFFFF00FF000000ULL, 0xFFFFFF00FF0000FFULL, 0xFFFFFF00FF00FF00ULL, 0xFFFFFF00FF00FFFFULL,
    0xFFFFFF00FFFF0000ULL, 0xFFFFFF00FFFF00FFULL, 0xFFFFFF00FFFFFF00ULL, 0xFFFFFF00FFFFFFFFULL,
    0xFFFFFFFF00000000ULL, 0xFFFFFFFF000000FFULL, 0xFFFFFFFF0000FF00ULL, 0xFFFFFFFF0000FFFFULL,
    0xFFFFFFFF00FF0000ULL, 0xFFFFFFFF00FF00FFULL, 0xFFFFFFFF00FFFF00ULL, 0xFFFFFFFF00FFFFFFULL,
    0xFFFFFFFFFF000000ULL, 0xFFFFFFFFFF0000FFULL, 0xFFFFFFFFFF00FF00ULL, 0xFFFFFFFFFF00FFFFULL,
    0xFFFFFFFFFFFF0000ULL, 0xFFFFFFFFFFFF00FFULL, 0xFFFFFFFFFFFFFF00ULL, 0xFFFFFFFFFFFFFFFFULL,
};

/// Per 8-bit predictor pattern, 0xFF over the bytes of the run of left blocks from block 0 (the blocks that take the
/// sample carried into the step).
static const uint64_t leftRunBytes[256] __attribute__((aligned(64))) = {
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x00000000FFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000FFFFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x00000000FFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000FFFFFFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x00000000FFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000FFFFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x00000000FFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x00FFFFFFFFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x00000000FFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000FFFFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x00000000FFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000FFFFFFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x00000000FFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000FFFFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x00000000FFFFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x0000000000FFFFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0x000000000000FFFFULL,
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x0000000000000000ULL, 0xFFFFFFFFFFFFFFFFULL,
};

/// Steps (of eight blocks) a chunk of a row: 2 KiB of unpacked residuals.
#define AVX512_CHUNK_STEPS 32

#define CSCK_AVX512_PACKED8_TARGET "avx2,avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx512vbmi2,gfni,bmi2"

/// Eight unpacked blocks (d: their residuals, block k in lane k) through the predictors: `above` holds the 64
/// samples above, `left` has bit k set when block k is left-predicted, `previous` the sample carried in (in every
/// byte; it receives the sample carried out). Returns the 64 samples.
/// - Each block before its carry: above + d (up), or d's prefix sums within the block (left).
/// - The carries: block k, when left, adds n_(k−1) = x_(p−1) + ... + x_(k−1) (x_m: block m's last sample
///   before its carry; p − 1 the last up block before k, see carryRuns), plus the sample carried in when blocks
///   0...k are all left. One vpermb gathers the x_m into every lane (only the run's bytes kept), one vpsadbw sums
///   them, one vpshufb spreads each sum over its block (zeros over up blocks).
/// - The sample carried out is byte 63 of the result, spread by one vpermb. Only that vpermb and the last add
///   (masked: the run of left blocks from block 0) depend on the previous step; measured, the one operation fewer
///   a step outweighs the longer chain (while a version that also gathered the carried sample into the sums, one
///   add fewer again but four operations on the chain, was slower).
__attribute__((target(CSCK_AVX512_PACKED8_TARGET), always_inline)) static inline __m512i
predict8_avx512(__m512i d, __m512i above, unsigned left, __m512i *previous) {
    // vpshufb control: byte 0 of each lane over the lane (shuffles stay in 128-bit halves).
    const __m512i spreadLow = _mm512_set_epi64(0x0808080808080808LL, 0, 0x0808080808080808LL, 0,
                                               0x0808080808080808LL, 0, 0x0808080808080808LL, 0);
    // Byte p of every lane: byte 8·p − 1 (x_(p−1)); and byte 63 everywhere.
    const __m512i gatherLasts = _mm512_set1_epi64(0x372F271F170F0700LL);
    const __m512i lastByte = _mm512_set1_epi8(63);
    __m512i s = _mm512_add_epi8(d, _mm512_slli_epi64(d, 8));
    s = _mm512_add_epi8(s, _mm512_slli_epi64(s, 16));
    s = _mm512_add_epi8(s, _mm512_slli_epi64(s, 32));
    // Every byte of the left blocks; of the run of left blocks from block 0 (which takes the sample carried in).
    const uint64_t leftBytes = leftBlockBytes[left];
    const uint64_t throughBytes = leftRunBytes[left];
    const __m512i b = _mm512_mask_add_epi8(s, (__mmask64)~leftBytes, above, d);
    const __m512i sums =
        _mm512_sad_epu8(_mm512_maskz_permutexvar_epi8((__mmask64)carryRuns[left & 0x7F], gatherLasts, b),
                        _mm512_setzero_si512());
    const __m512i partial = _mm512_mask_add_epi8(b, (__mmask64)leftBytes, b, _mm512_shuffle_epi8(sums, spreadLow));
    const __m512i result = _mm512_mask_add_epi8(partial, (__mmask64)throughBytes, partial, *previous);
    // The sample carried out is the step's last sample (which has taken the sample carried in when all eight
    // blocks are left): one vpermb, not a permute and a masked add.
    *previous = _mm512_permutexvar_epi8(lastByte, result);
    return result;
}

/// The packed8 decoder with AVX-512: eight blocks (64 samples, block k in 64-bit lane k) a step.
/// - Unpacking: the eight widths (nibbles clamped to 8) are spread to bytes by pdep, and their prefix sums (one
///   multiply) give each block's offset; the 64 payload bytes from the step's position (those past `count`
///   masked off, read as zeros, never touched) are loaded once, vpermb gives each block its 8 bytes, vpmultishiftqb
///   puts field j in byte j, and one gf2p8affineqb keeps the field's w bits and undoes the zig-zag.
/// - Prediction: up blocks add the row above; left blocks take their prefix sums within the block, then the
///   carries between blocks (n_k = x_k + left_k · n_(k−1), x_k the block's last sample before its carry) are a
///   segmented scan over the lanes in three shift-and-masked-add steps. One add and one vpermb depend on the
///   previous step.
/// - A row's last step (fewer than eight blocks, a partial last block) masks its loads and stores to the row, so
///   nothing is written past a row's end and no other path is needed.
__attribute__((target(CSCK_AVX512_PACKED8_TARGET))) static void
decode_packed8_avx512(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                      const uint8_t *bits, size_t width, size_t height, uint8_t *x, size_t stride) {
    const size_t blocksPerRow = (width + 7) >> 3;
    const __m512i matricesLow = _mm512_load_si512((const void *)zigzagMatrices);
    const __m512i matricesHigh = _mm512_load_si512((const void *)(zigzagMatrices + 8));
    const __m512i shiftsLow = _mm512_load_si512((const void *)fieldShifts);
    const __m512i shiftsHigh = _mm512_load_si512((const void *)(fieldShifts + 8));
    // Byte j of lane k: k (spreads byte k of a word over lane k), and j (a block's byte offsets).
    const __m512i laneOfByte = _mm512_set_epi64(0x0707070707070707LL, 0x0606060606060606LL, 0x0505050505050505LL,
                                                0x0404040404040404LL, 0x0303030303030303LL, 0x0202020202020202LL,
                                                0x0101010101010101LL, 0);
    const __m512i byteInLane = _mm512_set1_epi64(0x0706050403020100LL);
    const __m512i zero = _mm512_setzero_si512();
    // The residuals of a chunk of steps, unpacked (private: the first pass writes them, the second reads them).
    __m512i unpacked[AVX512_CHUNK_STEPS];
    for (size_t y = 0; y < height; y++) {
        uint8_t *current = x + y * stride;
        // Row 0 is left-predicted throughout; its "above" is never selected (reads stay inside x).
        const uint8_t *above = y == 0 ? x : x + (y - 1) * stride;
        const unsigned forceLeft = y == 0 ? 0xFF : 0;
        // The sample carried into the next block, in every byte.
        __m512i previous = _mm512_set1_epi8((char)(y == 0 ? 0 : above[0]));
        const size_t firstBlock = y * blocksPerRow;
        // A row in chunks of up to CHUNK_STEPS steps, two passes each: the first unpacks the steps' residuals
        // into `unpacked` (steps independent of each other but for the payload position, one add), the second
        // predicts from there. Split so, the long dependency chains of the two halves overlap across steps.
        for (size_t chunk = 0; chunk < blocksPerRow; chunk += 8 * AVX512_CHUNK_STEPS) {
            const size_t chunkEnd =
                blocksPerRow - chunk < 8 * AVX512_CHUNK_STEPS ? blocksPerRow : chunk + 8 * AVX512_CHUNK_STEPS;
            const unsigned nibbleShift = (unsigned)(firstBlock & 1) * 4;
            for (size_t column = chunk; column < chunkEnd; column += 8) {
                const size_t block = firstBlock + column;
                // The step's width nibbles from the private controls (the slot has room past their end); those
                // of blocks past the row's end (in its last step) are dropped.
                uint64_t nib;
                memcpy(&nib, nibbles + (block >> 1), 8);
                nib >>= nibbleShift;
                nib &= chunkEnd - column >= 8 ? 0xFFFFFFFFULL : (1ULL << (4 * (chunkEnd - column))) - 1;
                __m512i *slot = &unpacked[(column - chunk) >> 3];
                // Eight blocks of width 0 (flat screen content): zeros; no payload byte is read.
                if (nib == 0) {
                    _mm512_store_si512((void *)slot, zero);
                    continue;
                }
                // Widths one a byte. A nibble above 8 (which the decoder refuses before any kernel runs) advances
                // the position by its value, as the AVX2 steps do, and takes 8 bytes: wrong samples, no access
                // outside the payload.
                const uint64_t widths = _pdep_u64(nib, 0x0F0F0F0F0F0F0F0FULL);
                // The step's payload bytes: 64 from `position`, those at or past `count` masked off (zeros).
                __m512i window;
                if (position <= count && count - position >= 64) {
                    window = _mm512_loadu_si512((const void *)(payload + position));
                } else {
                    const size_t start = position < count ? position : count;
                    window = _mm512_maskz_loadu_epi8(((__mmask64)1 << (count - start)) - 1,
                                                     (const void *)(payload + start));
                }
                position += (size_t)((widths * 0x0101010101010101ULL) >> 56);
                // Block k's w bytes, in order, to the low bytes of lane k (vpexpandb), zeros above them.
                const __m128i widthWord = _mm_cvtsi64_si128((long long)widths);
                const __mmask64 fieldBytes = _mm512_cmplt_epu8_mask(
                    byteInLane, _mm512_permutexvar_epi8(laneOfByte, _mm512_castsi128_si512(widthWord)));
                const __m512i blockBytes = _mm512_maskz_expand_epi8(fieldBytes, window);
                const __m512i widthLanes = _mm512_cvtepu8_epi64(widthWord);
                const __m512i fields = _mm512_multishift_epi64_epi8(
                    _mm512_permutex2var_epi64(shiftsLow, widthLanes, shiftsHigh), blockBytes);
                _mm512_store_si512((void *)slot,
                                   _mm512_gf2p8affine_epi64_epi8(
                                       fields, _mm512_permutex2var_epi64(matricesLow, widthLanes, matricesHigh), 0));
            }
            const unsigned bitShift = (unsigned)(firstBlock & 7);
            for (size_t column = chunk; column < chunkEnd; column += 8) {
                const size_t block = firstBlock + column;
                uint16_t bitWord;
                memcpy(&bitWord, bits + (block >> 3), 2);
                const unsigned left = (((unsigned)bitWord >> bitShift) | forceLeft) & 0xFF;
                const __m512i d = _mm512_load_si512((const void *)&unpacked[(column - chunk) >> 3]);
                if (width - column * 8 >= 64) {
                    // Eight up-predicted blocks of residual 0 (flat screen content): the row above.
                    if (left == 0 && _mm512_test_epi64_mask(d, d) == 0) {
                        const __m512i row = _mm512_loadu_si512((const void *)(above + column * 8));
                        _mm512_storeu_si512((void *)(current + column * 8), row);
                        previous = _mm512_set1_epi8((char)above[column * 8 + 63]);
                        continue;
                    }
                    const __m512i aboveBytes = _mm512_loadu_si512((const void *)(above + column * 8));
                    _mm512_storeu_si512((void *)(current + column * 8),
                                        predict8_avx512(d, aboveBytes, left, &previous));
                } else {
                    // The row's last step: only the row's samples are read above and written.
                    const __mmask64 rowBytes = _bzhi_u64(~0ULL, (unsigned)(width - column * 8));
                    const __m512i aboveBytes = _mm512_maskz_loadu_epi8(rowBytes, (const void *)(above + column * 8));
                    _mm512_mask_storeu_epi8((void *)(current + column * 8), rowBytes,
                                            predict8_avx512(d, aboveBytes, left, &previous));
                }
            }
        }
    }
}

int csck_decode_packed8_avx2_unpacking(const uint8_t *payload, size_t count, size_t position,
                                       const uint8_t *nibbles, size_t nibbleCapacity, const uint8_t *bits,
                                       size_t bitCapacity, size_t width, size_t height, uint8_t *x, size_t xCapacity,
                                       size_t stride, int deposit) {
    if (!csck_decode_capacities_hold(count, position, nibbleCapacity, bitCapacity, width, height, stride, width,
                                     xCapacity))
        return -1;
    if (deposit == 2 && csck_cpu_has_avx512_packed8())
        decode_packed8_avx512(payload, count, position, nibbles, bits, width, height, x, stride);
    else if (deposit && csck_cpu_has_fast_pdep())
        decode_packed8_deposit(payload, count, position, nibbles, bits, width, height, x, stride);
    else
        decode_packed8_shuffles(payload, count, position, nibbles, bits, width, height, x, stride);
    return 0;
}

int csck_decode_packed8_avx2(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                             size_t nibbleCapacity, const uint8_t *bits, size_t bitCapacity, size_t width,
                             size_t height, uint8_t *x, size_t xCapacity, size_t stride) {
    return csck_decode_packed8_avx2_unpacking(payload, count, position, nibbles, nibbleCapacity, bits, bitCapacity,
                                              width, height, x, xCapacity, stride,
                                              csck_cpu_has_avx512_packed8() ? 2 : 1);
}

/// Per 2-bit predictor pattern (bit k: block k is left-predicted), a mask over the 128-bit lanes of those blocks.
static const uint64_t leftMasks2[4][4] __attribute__((aligned(32))) = {
    {0, 0, 0, 0},
    {~0ULL, ~0ULL, 0, 0},
    {0, 0, ~0ULL, ~0ULL},
    {~0ULL, ~0ULL, ~0ULL, ~0ULL},
};


/// Per 2-bit predictor pattern of a pair of blocks, 0xFFFF over the 128-bit lane of each block whose carry
/// includes the sample carried into the pair (blocks 0...k all left), and over both lanes when the pair's last
/// sample does (both left).
static const uint64_t carriedMasks2[4][2][4] __attribute__((aligned(32))) = {
    {{0, 0, 0, 0}, {0, 0, 0, 0}},
    {{~0ULL, ~0ULL, 0, 0}, {0, 0, 0, 0}},
    {{0, 0, 0, 0}, {0, 0, 0, 0}},
    {{~0ULL, ~0ULL, ~0ULL, ~0ULL}, {~0ULL, ~0ULL, ~0ULL, ~0ULL}},
};

/// Per width nibble (widths above 10 clamped to 10), how a packed10 block is unpacked without pdep: the block's
/// first 16 bytes in both 128-bit lanes, a byte shuffle puts the three bytes holding field i (bits w·i ...
/// w·i + w - 1) in 32-bit lane i, a variable shift by s = w·i mod 8 and a mask keep the field.
typedef struct {
    uint8_t control[32];
    uint32_t shifts[8];
    uint32_t masks[8];
} UnpackShuffle10;

static const UnpackShuffle10 unpackShuffles10[16] __attribute__((aligned(32))) = {
    // width 0
    {{0, 1, 2, 0x80, 0, 1, 2, 0x80, 0, 1, 2, 0x80, 0, 1, 2, 0x80,
      0, 1, 2, 0x80, 0, 1, 2, 0x80, 0, 1, 2, 0x80, 0, 1, 2, 0x80},
     {0, 0, 0, 0, 0, 0, 0, 0},
     {0x000, 0x000, 0x000, 0x000, 0x000, 0x000, 0x000, 0x000}},
    // width 1
    {{0, 1, 2, 0x80, 0, 1, 2, 0x80, 0, 1, 2, 0x80, 0, 1, 2, 0x80,
      0, 1, 2, 0x80, 0, 1, 2, 0x80, 0, 1, 2, 0x80, 0, 1, 2, 0x80},
     {0, 1, 2, 3, 4, 5, 6, 7},
     {0x001, 0x001, 0x001, 0x001, 0x001, 0x001, 0x001, 0x001}},
    // width 2
    {{0, 1, 2, 0x80, 0, 1, 2, 0x80, 0, 1, 2, 0x80, 0, 1, 2, 0x80,
      1, 2, 3, 0x80, 1, 2, 3, 0x80, 1, 2, 3, 0x80, 1, 2, 3, 0x80},
     {0, 2, 4, 6, 0, 2, 4, 6},
     {0x003, 0x003, 0x003, 0x003, 0x003, 0x003, 0x003, 0x003}},
    // width 3
    {{0, 1, 2, 0x80, 0, 1, 2, 0x80, 0, 1, 2, 0x80, 1, 2, 3, 0x80,
      1, 2, 3, 0x80, 1, 2, 3, 0x80, 2, 3, 4, 0x80, 2, 3, 4, 0x80},
     {0, 3, 6, 1, 4, 7, 2, 5},
     {0x007, 0x007, 0x007, 0x007, 0x007, 0x007, 0x007, 0x007}},
    // width 4
    {{0, 1, 2, 0x80, 0, 1, 2, 0x80, 1, 2, 3, 0x80, 1, 2, 3, 0x80,
      2, 3, 4, 0x80, 2, 3, 4, 0x80, 3, 4, 5, 0x80, 3, 4, 5, 0x80},
     {0, 4, 0, 4, 0, 4, 0, 4},
     {0x00F, 0x00F, 0x00F, 0x00F, 0x00F, 0x00F, 0x00F, 0x00F}},
    // width 5
    {{0, 1, 2, 0x80, 0, 1, 2, 0x80, 1, 2, 3, 0x80, 1, 2, 3, 0x80,
      2, 3, 4, 0x80, 3, 4, 5, 0x80, 3, 4, 5, 0x80, 4, 5, 6, 0x80},
     {0, 5, 2, 7, 4, 1, 6, 3},
     {0x01F, 0x01F, 0x01F, 0x01F, 0x01F, 0x01F, 0x01F, 0x01F}},
    // width 6
    {{0, 1, 2, 0x80, 0, 1, 2, 0x80, 1, 2, 3, 0x80, 2, 3, 4, 0x80,
      3, 4, 5, 0x80, 3, 4, 5, 0x80, 4, 5, 6, 0x80, 5, 6, 7, 0x80},
     {0, 6, 4, 2, 0, 6, 4, 2},
     {0x03F, 0x03F, 0x03F, 0x03F, 0x03F, 0x03F, 0x03F, 0x03F}},
    // width 7
    {{0, 1, 2, 0x80, 0, 1, 2, 0x80, 1, 2, 3, 0x80, 2, 3, 4, 0x80,
      3, 4, 5, 0x80, 4, 5, 6, 0x80, 5, 6, 7, 0x80, 6, 7, 8, 0x80},
     {0, 7, 6, 5, 4, 3, 2, 1},
     {0x07F, 0x07F, 0x07F, 0x07F, 0x07F, 0x07F, 0x07F, 0x07F}},
    // width 8
    {{0, 1, 2, 0x80, 1, 2, 3, 0x80, 2, 3, 4, 0x80, 3, 4, 5, 0x80,
      4, 5, 6, 0x80, 5, 6, 7, 0x80, 6, 7, 8, 0x80, 7, 8, 9, 0x80},
     {0, 0, 0, 0, 0, 0, 0, 0},
     {0x0FF, 0x0FF, 0x0FF, 0x0FF, 0x0FF, 0x0FF, 0x0FF, 0x0FF}},
    // width 9
    {{0, 1, 2, 0x80, 1, 2, 3, 0x80, 2, 3, 4, 0x80, 3, 4, 5, 0x80,
      4, 5, 6, 0x80, 5, 6, 7, 0x80, 6, 7, 8, 0x80, 7, 8, 9, 0x80},
     {0, 1, 2, 3, 4, 5, 6, 7},
     {0x1FF, 0x1FF, 0x1FF, 0x1FF, 0x1FF, 0x1FF, 0x1FF, 0x1FF}},
    // width 10
    {{0, 1, 2, 0x80, 1, 2, 3, 0x80, 2, 3, 4, 0x80, 3, 4, 5, 0x80,
      5, 6, 7, 0x80, 6, 7, 8, 0x80, 7, 8, 9, 0x80, 8, 9, 10, 0x80},
     {0, 2, 4, 6, 0, 2, 4, 6},
     {0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF}},
    // width 11 (clamped to 10)
    {{0, 1, 2, 0x80, 1, 2, 3, 0x80, 2, 3, 4, 0x80, 3, 4, 5, 0x80,
      5, 6, 7, 0x80, 6, 7, 8, 0x80, 7, 8, 9, 0x80, 8, 9, 10, 0x80},
     {0, 2, 4, 6, 0, 2, 4, 6},
     {0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF}},
    // width 12 (clamped to 10)
    {{0, 1, 2, 0x80, 1, 2, 3, 0x80, 2, 3, 4, 0x80, 3, 4, 5, 0x80,
      5, 6, 7, 0x80, 6, 7, 8, 0x80, 7, 8, 9, 0x80, 8, 9, 10, 0x80},
     {0, 2, 4, 6, 0, 2, 4, 6},
     {0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF}},
    // width 13 (clamped to 10)
    {{0, 1, 2, 0x80, 1, 2, 3, 0x80, 2, 3, 4, 0x80, 3, 4, 5, 0x80,
      5, 6, 7, 0x80, 6, 7, 8, 0x80, 7, 8, 9, 0x80, 8, 9, 10, 0x80},
     {0, 2, 4, 6, 0, 2, 4, 6},
     {0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF}},
    // width 14 (clamped to 10)
    {{0, 1, 2, 0x80, 1, 2, 3, 0x80, 2, 3, 4, 0x80, 3, 4, 5, 0x80,
      5, 6, 7, 0x80, 6, 7, 8, 0x80, 7, 8, 9, 0x80, 8, 9, 10, 0x80},
     {0, 2, 4, 6, 0, 2, 4, 6},
     {0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF}},
    // width 15 (clamped to 10)
    {{0, 1, 2, 0x80, 1, 2, 3, 0x80, 2, 3, 4, 0x80, 3, 4, 5, 0x80,
      5, 6, 7, 0x80, 6, 7, 8, 0x80, 7, 8, 9, 0x80, 8, 9, 10, 0x80},
     {0, 2, 4, 6, 0, 2, 4, 6},
     {0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF, 0x3FF}},
};

/// One packed10 block's fields by shuffle, shift and mask (see unpackShuffles10), one per 32-bit lane; reads 16
/// bytes at `p`.
__attribute__((target("avx2"), always_inline)) static inline __m256i unpack10_shuffled(const uint8_t *p,
                                                                                        unsigned w) {
    const UnpackShuffle10 *table = &unpackShuffles10[w];
    const __m256i bytes = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    const __m256i pieces = _mm256_shuffle_epi8(bytes, _mm256_load_si256((const __m256i *)table->control));
    const __m256i fields = _mm256_srlv_epi32(pieces, _mm256_load_si256((const __m256i *)table->shifts));
    return _mm256_and_si256(fields, _mm256_load_si256((const __m256i *)table->masks));
}

/// Two packed10 blocks at p0, p1 (widths w0, w1) unpacked by shuffles: block 0's fields in the low 128 bits,
/// block 1's in the high, one per 16-bit lane. Reads 16 bytes at p0 and at p1.
__attribute__((target("avx2"), always_inline)) static inline __m256i
unpack10x2_shuffled(const uint8_t *payload, size_t p0, size_t p1, unsigned w0, unsigned w1) {
    // packus interleaves the two blocks' 128-bit halves (0 low, 1 low | 0 high, 1 high); vpermq restores the order.
    const __m256i packed =
        _mm256_packus_epi32(unpack10_shuffled(payload + p0, w0), unpack10_shuffled(payload + p1, w1));
    return _mm256_permute4x64_epi64(packed, 0xD8);
}

/// Two unpacked 10-bit blocks (z: their fields, one per 16-bit lane) through the zig-zag and the predictors,
/// stored at `out` (as value << 6); `pattern` has bit k set when block k is left-predicted. Returns the value
/// carried out, in every lane (modulo 2^16: only its low 10 bits count).
__attribute__((target("avx2"), always_inline)) static inline __m256i predict2(__m256i z, const uint16_t *above,
                                                                               uint16_t *out, unsigned pattern,
                                                                               __m256i previous) {
    const __m256i ones16 = _mm256_set1_epi16(1);
    const __m256i zero = _mm256_setzero_si256();
    // The last 16-bit value of each 128-bit lane, copied to the whole lane.
    const __m256i lastWord = _mm256_set_epi8(15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14,
                                             15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14);
    __m256i d = _mm256_xor_si256(_mm256_srli_epi16(z, 1), _mm256_sub_epi16(zero, _mm256_and_si256(z, ones16)));
    __m256i aboveValues = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)above), 6);
    __m256i up = _mm256_add_epi16(aboveValues, d);
    // Prefix sums within each block (a 128-bit lane).
    __m256i s = _mm256_add_epi16(d, _mm256_slli_si256(d, 2));
    s = _mm256_add_epi16(s, _mm256_slli_si256(s, 4));
    s = _mm256_add_epi16(s, _mm256_slli_si256(s, 8));
    const __m256i left = _mm256_load_si256((const __m256i *)leftMasks2[pattern]);
    __m256i b = _mm256_blendv_epi8(up, s, left);
    // The carries: block 1 gets x_0 (the last value of block 0 before its carry) when it is left, both
    // blocks get the sample carried into the pair when their left run reaches back to it. The pair's
    // last value is lane 1's x_1 + (left_1 ? x_0 : 0) plus that sample when both are left: only the
    // last two operations depend on the previous pair.
    __m256i lasts = _mm256_shuffle_epi8(b, lastWord);
    __m256i carried = _mm256_add_epi16(
        b, _mm256_and_si256(left, _mm256_permute2x128_si256(lasts, lasts, 0x08)));
    __m256i n = _mm256_shuffle_epi8(carried, lastWord);
    __m256i last = _mm256_permute2x128_si256(n, n, 0x11);
    __m256i result = _mm256_add_epi16(
        carried, _mm256_and_si256(previous, _mm256_load_si256((const __m256i *)carriedMasks2[pattern][0])));
    _mm256_storeu_si256((__m256i *)out, _mm256_slli_epi16(result, 6));
    return _mm256_add_epi16(
        last, _mm256_and_si256(previous, _mm256_load_si256((const __m256i *)carriedMasks2[pattern][1])));
}

/// The packed10 decoder: blocks unpacked by byte shuffles and 32-bit shifts (faster here than pdep, and without
/// pdep's cost on AMD before Zen 3), four blocks a step, then two (one per 128-bit lane), then one at a time with
/// bounded loads. Values are kept modulo 2^16 and only their low 10 bits are used: every sum is the same modulo
/// 2^10, and the stored samples (value << 6) drop the rest.
__attribute__((target("avx2"))) static void decode_packed10_avx2_unchecked(const uint8_t *payload, size_t count,
                                                                 size_t position, const uint8_t *nibbles,
                                                                 const uint8_t *bits, size_t width, size_t height,
                                                                 uint16_t *x, size_t stride) {
    const size_t blocksPerRow = (width + 7) >> 3;
    for (size_t y = 0; y < height; y++) {
        uint16_t *current = x + y * stride;
        const uint16_t *above = y == 0 ? x : x + (y - 1) * stride;
        const unsigned forceLeft = y == 0 ? 3 : 0;
        __m256i previous = _mm256_set1_epi16((short)(y == 0 ? 0 : above[0] >> 6));
        const size_t firstBlock = y * blocksPerRow;
        size_t column = 0;
        // Four blocks a step: one load of their width nibbles and predictor bits.
        for (; column + 4 <= blocksPerRow; column += 4) {
            const size_t block = firstBlock + column;
            uint32_t nib;
            memcpy(&nib, nibbles + (block >> 1), 4);
            nib >>= (block & 1) * 4;
            unsigned w0 = nib & 15, w1 = (nib >> 4) & 15, w2 = (nib >> 8) & 15, w3 = (nib >> 12) & 15;
            w0 = w0 > 10 ? 10 : w0;
            w1 = w1 > 10 ? 10 : w1;
            w2 = w2 > 10 ? 10 : w2;
            w3 = w3 > 10 ? 10 : w3;
            uint16_t bitWord;
            memcpy(&bitWord, bits + (block >> 3), 2);
            const unsigned pattern = (unsigned)(bitWord >> (block & 7));
            // Four up-predicted blocks of width 0 (flat screen content): the row above, as it is (its values
            // are stored << 6 with the low bits zero), and its last value carried; no payload byte is read.
            if ((nib & 0xFFFF) == 0 && ((pattern & 15) | forceLeft) == 0) {
                _mm256_storeu_si256((__m256i *)(current + column * 8),
                                    _mm256_loadu_si256((const __m256i *)(above + column * 8)));
                _mm256_storeu_si256((__m256i *)(current + column * 8 + 16),
                                    _mm256_loadu_si256((const __m256i *)(above + column * 8 + 16)));
                previous = _mm256_set1_epi16((short)(above[column * 8 + 31] >> 6));
                continue;
            }
            const size_t p1 = position + w0, p2 = p1 + w1, p3 = p2 + w2;
            if (p3 + 16 > count) break;  // near the end of the payload: the steps below
            const __m256i z0 = unpack10x2_shuffled(payload, position, p1, w0, w1);
            const __m256i z1 = unpack10x2_shuffled(payload, p2, p3, w2, w3);
            position = p3 + w3;
            previous = predict2(z0, above + column * 8, current + column * 8, (pattern & 3) | forceLeft, previous);
            previous = predict2(z1, above + column * 8 + 16, current + column * 8 + 16,
                                ((pattern >> 2) & 3) | forceLeft, previous);
        }
        for (; column + 2 <= blocksPerRow; column += 2) {
            const size_t block = firstBlock + column;
            uint16_t nib;
            memcpy(&nib, nibbles + (block >> 1), 2);
            nib = (uint16_t)(nib >> ((block & 1) * 4));
            unsigned w0 = nib & 15, w1 = (nib >> 4) & 15;
            w0 = w0 > 10 ? 10 : w0;
            w1 = w1 > 10 ? 10 : w1;
            const size_t p1 = position + w0;
            if (p1 + 16 > count) break;  // near the end of the payload: the careful path below
            const __m256i z = unpack10x2_shuffled(payload, position, p1, w0, w1);
            position = p1 + w1;
            uint16_t bitWord;
            memcpy(&bitWord, bits + (block >> 3), 2);
            previous = predict2(z, above + column * 8, current + column * 8,
                                ((bitWord >> (block & 7)) & 3) | forceLeft, previous);
        }
        uint16_t last = (uint16_t)(_mm256_extract_epi16(previous, 0) & 0x3FF);
        for (; column < blocksPerRow; column++) {
            const size_t block = firstBlock + column;
            const unsigned w = csck_width_of(nibbles, block, 10);
            last = csck_decode_block10(payload, position, count, w, csck_is_left(bits, block) | (forceLeft & 1),
                                       last, above + column * 8, current + column * 8);
            position += w;
        }
    }
}

__attribute__((target("avx2"))) static size_t pack8_avx2_unchecked(const uint8_t *up, const uint8_t *left, size_t blockCount,
                                                        uint8_t *out, size_t *zeroBlocks) {
    const size_t nibbleBytes = (blockCount + 1) >> 1, bitBytes = (blockCount + 7) >> 3;
    uint8_t *nibbles = out, *bits = out + nibbleBytes;
    memset(out, 0, nibbleBytes + bitBytes);
    size_t position = nibbleBytes + bitBytes, zeros = 0, block = 0;
    // Bit length of a nibble, and of a high nibble (4 more unless 0).
    const __m256i lengthLow = _mm256_setr_epi8(0, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 0, 1, 2, 2, 3, 3, 3, 3, 4,
                                               4, 4, 4, 4, 4, 4, 4);
    const __m256i lengthHigh = _mm256_setr_epi8(0, 5, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 8, 0, 5, 6, 6, 7, 7, 7,
                                                7, 8, 8, 8, 8, 8, 8, 8, 8);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i lowByte = _mm256_set1_epi64x(0xFF);
    const __m256i lanes8 = _mm256_set1_epi64x(0x00FF00FF00FF00FFLL);
    const __m256i lanes16 = _mm256_set1_epi64x(0x0000FFFF0000FFFFLL);
    const __m256i low32 = _mm256_set1_epi64x(0xFFFFFFFFLL);
    _Alignas(32) uint64_t packed[4];
    _Alignas(32) uint64_t widths[4];
    for (; block + 4 <= blockCount; block += 4) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(up + block * 8));
        __m256i l = _mm256_loadu_si256((const __m256i *)(left + block * 8));
#define WIDTHS(v, out)                                                                                                \
    do {                                                                                                              \
        __m256i f = _mm256_or_si256(v, _mm256_srli_epi64(v, 32));                                                     \
        f = _mm256_or_si256(f, _mm256_srli_epi64(f, 16));                                                             \
        f = _mm256_or_si256(f, _mm256_srli_epi64(f, 8));                                                              \
        __m256i hi = _mm256_shuffle_epi8(lengthHigh, _mm256_and_si256(_mm256_srli_epi16(f, 4), low4));                \
        __m256i lo = _mm256_shuffle_epi8(lengthLow, _mm256_and_si256(f, low4));                                       \
        out = _mm256_and_si256(_mm256_max_epu8(hi, lo), lowByte);                                                     \
    } while (0)
        __m256i wu, wl;
        WIDTHS(u, wu);
        WIDTHS(l, wl);
#undef WIDTHS
        // Left where strictly narrower (up on ties), as the portable encoder.
        __m256i useLeft = _mm256_cmpgt_epi64(wu, wl);
        __m256i w = _mm256_blendv_epi8(wu, wl, useLeft);
        __m256i chosen = _mm256_blendv_epi8(u, l, useLeft);
        __m256i w2 = _mm256_add_epi64(w, w), w4 = _mm256_add_epi64(w2, w2);
        __m256i pairs = _mm256_or_si256(_mm256_and_si256(chosen, lanes8),
                                        _mm256_sllv_epi64(_mm256_and_si256(_mm256_srli_epi64(chosen, 8), lanes8), w));
        __m256i quads = _mm256_or_si256(_mm256_and_si256(pairs, lanes16),
                                        _mm256_sllv_epi64(_mm256_and_si256(_mm256_srli_epi64(pairs, 16), lanes16), w2));
        __m256i result =
            _mm256_or_si256(_mm256_and_si256(quads, low32), _mm256_sllv_epi64(_mm256_srli_epi64(quads, 32), w4));
        _mm256_store_si256((__m256i *)packed, result);
        _mm256_store_si256((__m256i *)widths, w);
        for (unsigned k = 0; k < 4; k++) {
            memcpy(out + position, &packed[k], 8);
            position += widths[k];
        }
        // block is a multiple of 4: its four nibbles are two whole bytes, its four bits half a byte.
        unsigned group = (unsigned)(widths[0] | widths[1] << 4 | widths[2] << 8 | widths[3] << 12);
        nibbles[block >> 1] = (uint8_t)group;
        if ((block >> 1) + 1 < nibbleBytes) nibbles[(block >> 1) + 1] = (uint8_t)(group >> 8);
        bits[block >> 3] |= (uint8_t)(_mm256_movemask_pd(_mm256_castsi256_pd(useLeft)) << (block & 7));
        zeros += (unsigned)__builtin_popcount(
            (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(w, _mm256_setzero_si256()))));
    }
    position = csck_pack8_tail(up, left, block, blockCount, out, nibbles, bits, position, &zeros);
    *zeroBlocks = zeros;
    return position;
}

// MARK: The checked entry points (capacities: CSurfaceCodecKernels.h)

int csck_decode_packed10_avx2(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                              size_t nibbleCapacity, const uint8_t *bits, size_t bitCapacity, size_t width,
                              size_t height, uint16_t *x, size_t xCapacity) {
    if (!csck_decode10_capacities_hold(count, position, nibbleCapacity, bitCapacity, width, height, xCapacity))
        return -1;
    decode_packed10_avx2_unchecked(payload, count, position, nibbles, bits, width, height, x, width);
    return 0;
}

int csck_decode_packed10_avx2_strided(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                                      size_t nibbleCapacity, const uint8_t *bits, size_t bitCapacity, size_t width,
                                      size_t height, uint16_t *x, size_t xCapacity, size_t stride) {
    if ((width & 7) != 0 ||
        !csck_decode_capacities_hold(count, position, nibbleCapacity, bitCapacity, width, height, stride, width,
                                     xCapacity))
        return -1;
    decode_packed10_avx2_unchecked(payload, count, position, nibbles, bits, width, height, x, stride);
    return 0;
}

size_t csck_pack8_avx2(const uint8_t *up, const uint8_t *left, size_t blockCount, uint8_t *out, size_t outCapacity,
                       size_t *zeroBlocks) {
    if (!csck_pack_capacity_holds(blockCount, outCapacity)) return CSCK_PACK_REFUSED;
    return pack8_avx2_unchecked(up, left, blockCount, out, zeroBlocks);
}

#else

int csck_cpu_has_avx2(void) { return 0; }

int csck_cpu_has_fast_pdep(void) { return 0; }

int csck_cpu_has_avx512_packed8(void) { return 0; }

int csck_pdep_is_fast(int hasBMI2AndAVX2, uint32_t vendorEBX, uint32_t vendorECX, uint32_t vendorEDX,
                      uint32_t signatureEAX) {
    (void)hasBMI2AndAVX2, (void)vendorEBX, (void)vendorECX, (void)vendorEDX, (void)signatureEAX;
    return 0;
}

#endif

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

// The BGRA tile scatter: pixel i is B = bg[i] + g[i], G = g[i], R = rg[i] + g[i], A = a[i] (bytes, modulo 256),
// stored as the bytes B, G, R, A. SSE2 (baseline x86-64, no runtime check) 16 pixels a step; the rest, and every
// other architecture, byte by byte (compilers vectorise that loop for NEON).
void csck_interleave_bgra(const uint8_t *g, const uint8_t *bg, const uint8_t *rg, const uint8_t *a, size_t count,
                          uint8_t *bgra) {
    size_t i = 0;
#if defined(__x86_64__)
    for (; i + 16 <= count; i += 16) {
        const __m128i green = _mm_loadu_si128((const __m128i *)(g + i));
        const __m128i blue = _mm_add_epi8(_mm_loadu_si128((const __m128i *)(bg + i)), green);
        const __m128i red = _mm_add_epi8(_mm_loadu_si128((const __m128i *)(rg + i)), green);
        const __m128i alpha = _mm_loadu_si128((const __m128i *)(a + i));
        const __m128i bgLow = _mm_unpacklo_epi8(blue, green), bgHigh = _mm_unpackhi_epi8(blue, green);
        const __m128i raLow = _mm_unpacklo_epi8(red, alpha), raHigh = _mm_unpackhi_epi8(red, alpha);
        _mm_storeu_si128((__m128i *)(bgra + 4 * i), _mm_unpacklo_epi16(bgLow, raLow));
        _mm_storeu_si128((__m128i *)(bgra + 4 * i + 16), _mm_unpackhi_epi16(bgLow, raLow));
        _mm_storeu_si128((__m128i *)(bgra + 4 * i + 32), _mm_unpacklo_epi16(bgHigh, raHigh));
        _mm_storeu_si128((__m128i *)(bgra + 4 * i + 48), _mm_unpackhi_epi16(bgHigh, raHigh));
    }
#endif
    for (; i < count; i++) {
        const uint8_t green = g[i];
        bgra[4 * i] = (uint8_t)(bg[i] + green);
        bgra[4 * i + 1] = green;
        bgra[4 * i + 2] = (uint8_t)(rg[i] + green);
        bgra[4 * i + 3] = a[i];
    }
}

#if defined(__x86_64__)
/// Whether the processor runs the AVX-512 chroma interleave (AVX-512 F, BW and VBMI, BMI2; cpuid and the OS's
/// register state, once).
static int avx512Interleave = -1;

int csck_cpu_has_avx512_interleave(void) {
    int has = __atomic_load_n(&avx512Interleave, __ATOMIC_RELAXED);
    if (has >= 0) return has;
    __builtin_cpu_init();
    has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("bmi2");
    __atomic_store_n(&avx512Interleave, has, __ATOMIC_RELAXED);
    return has;
}

/// Whether the processor runs csck_packed8_widths_avx512 (AVX-512 F and BW, BMI2; cpuid and the OS's register
/// state, once).
static int avx512BW = -1;

int csck_cpu_has_avx512bw(void) {
    int has = __atomic_load_n(&avx512BW, __ATOMIC_RELAXED);
    if (has >= 0) return has;
    __builtin_cpu_init();
    has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("bmi2");
    __atomic_store_n(&avx512BW, has, __ATOMIC_RELAXED);
    return has;
}

/// 128 width nibbles a step: the low and high nibbles of 64 bytes apart (and, shift), their byte sums (at most
/// 30) summed by vpsadbw into four 64-bit lanes, and their running maximum; the last < 64 bytes by a masked load
/// (lanes past `count` read as zeros, never touched).
__attribute__((target("avx512f,avx512bw,bmi2"))) int csck_packed8_widths_avx512(const uint8_t *nibbles,
                                                                                size_t count, uint64_t *total) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i zero = _mm512_setzero_si512();
    __m512i sums = zero, widest = zero;
    size_t i = 0;
    for (; i < count; i += 64) {
        const __m512i pairs = count - i >= 64
                                  ? _mm512_loadu_si512((const void *)(nibbles + i))
                                  : _mm512_maskz_loadu_epi8(_bzhi_u64(~0ULL, (unsigned)(count - i)),
                                                            (const void *)(nibbles + i));
        const __m512i low = _mm512_and_si512(pairs, low4);
        const __m512i high = _mm512_and_si512(_mm512_srli_epi16(pairs, 4), low4);
        widest = _mm512_max_epu8(widest, _mm512_max_epu8(low, high));
        sums = _mm512_add_epi64(sums, _mm512_sad_epu8(_mm512_add_epi8(low, high), zero));
    }
    *total = (uint64_t)_mm512_reduce_add_epi64(sums);
    return _mm512_cmpgt_epu8_mask(widest, _mm512_set1_epi8(8)) != 0;
}

/// vpermt2b's controls for the chroma interleave: output byte 2i takes cb[i] (index i), byte 2i + 1 takes cr[i]
/// (index 64 + i); pairs 0...31 make the first 64 bytes, pairs 32...63 the second.
static const uint8_t cbcrLowPairs[64] __attribute__((aligned(64))) = {
    0, 64, 1, 65, 2, 66, 3, 67, 4, 68, 5, 69, 6, 70, 7, 71,
    8, 72, 9, 73, 10, 74, 11, 75, 12, 76, 13, 77, 14, 78, 15, 79,
    16, 80, 17, 81, 18, 82, 19, 83, 20, 84, 21, 85, 22, 86, 23, 87,
    24, 88, 25, 89, 26, 90, 27, 91, 28, 92, 29, 93, 30, 94, 31, 95,
};
static const uint8_t cbcrHighPairs[64] __attribute__((aligned(64))) = {
    32, 96, 33, 97, 34, 98, 35, 99, 36, 100, 37, 101, 38, 102, 39, 103,
    40, 104, 41, 105, 42, 106, 43, 107, 44, 108, 45, 109, 46, 110, 47, 111,
    48, 112, 49, 113, 50, 114, 51, 115, 52, 116, 53, 117, 54, 118, 55, 119,
    56, 120, 57, 121, 58, 122, 59, 123, 60, 124, 61, 125, 62, 126, 63, 127,
};

/// The chroma interleave with AVX-512 VBMI: 64 pairs a step (two loads, two vpermt2b, two stores); the last < 64
/// pairs the same way with masked loads and stores, so nothing is read past `count` bytes of `cb` and `cr` (masked
/// lanes never fault) and nothing is written past the 2 × count bytes of `cbcr`.
__attribute__((target("avx512f,avx512bw,avx512vbmi,bmi2"))) static void
interleave_cbcr8_avx512(const uint8_t *cb, const uint8_t *cr, size_t count, uint8_t *cbcr) {
    const __m512i lowPairs = _mm512_load_si512((const void *)cbcrLowPairs);
    const __m512i highPairs = _mm512_load_si512((const void *)cbcrHighPairs);
    size_t i = 0;
    for (; i + 64 <= count; i += 64) {
        const __m512i b = _mm512_loadu_si512((const void *)(cb + i));
        const __m512i r = _mm512_loadu_si512((const void *)(cr + i));
        _mm512_storeu_si512((void *)(cbcr + 2 * i), _mm512_permutex2var_epi8(b, lowPairs, r));
        _mm512_storeu_si512((void *)(cbcr + 2 * i + 64), _mm512_permutex2var_epi8(b, highPairs, r));
    }
    if (i < count) {
        const unsigned rest = (unsigned)(count - i);
        const __mmask64 pairs = _bzhi_u64(~0ULL, rest);
        const __m512i b = _mm512_maskz_loadu_epi8(pairs, (const void *)(cb + i));
        const __m512i r = _mm512_maskz_loadu_epi8(pairs, (const void *)(cr + i));
        _mm512_mask_storeu_epi8((void *)(cbcr + 2 * i), _bzhi_u64(~0ULL, rest >= 32 ? 64 : 2 * rest),
                                _mm512_permutex2var_epi8(b, lowPairs, r));
        if (rest > 32)
            _mm512_mask_storeu_epi8((void *)(cbcr + 2 * i + 64), _bzhi_u64(~0ULL, 2 * rest - 64),
                                    _mm512_permutex2var_epi8(b, highPairs, r));
    }
}
#else
int csck_cpu_has_avx512_interleave(void) { return 0; }

int csck_cpu_has_avx512bw(void) { return 0; }
#endif

/// The chroma interleave with SSE2 (baseline x86-64) 32 pairs a step, then 16; the rest, and every other
/// architecture, pair by pair.
static void interleave_cbcr8_sse2(const uint8_t *cb, const uint8_t *cr, size_t count, uint8_t *cbcr) {
    size_t i = 0;
#if defined(__x86_64__)
    for (; i + 32 <= count; i += 32) {
        const __m128i b0 = _mm_loadu_si128((const __m128i *)(cb + i));
        const __m128i r0 = _mm_loadu_si128((const __m128i *)(cr + i));
        const __m128i b1 = _mm_loadu_si128((const __m128i *)(cb + i + 16));
        const __m128i r1 = _mm_loadu_si128((const __m128i *)(cr + i + 16));
        _mm_storeu_si128((__m128i *)(cbcr + 2 * i), _mm_unpacklo_epi8(b0, r0));
        _mm_storeu_si128((__m128i *)(cbcr + 2 * i + 16), _mm_unpackhi_epi8(b0, r0));
        _mm_storeu_si128((__m128i *)(cbcr + 2 * i + 32), _mm_unpacklo_epi8(b1, r1));
        _mm_storeu_si128((__m128i *)(cbcr + 2 * i + 48), _mm_unpackhi_epi8(b1, r1));
    }
    for (; i + 16 <= count; i += 16) {
        const __m128i b = _mm_loadu_si128((const __m128i *)(cb + i));
        const __m128i r = _mm_loadu_si128((const __m128i *)(cr + i));
        _mm_storeu_si128((__m128i *)(cbcr + 2 * i), _mm_unpacklo_epi8(b, r));
        _mm_storeu_si128((__m128i *)(cbcr + 2 * i + 16), _mm_unpackhi_epi8(b, r));
    }
#endif
    for (; i < count; i++) {
        cbcr[2 * i] = cb[i];
        cbcr[2 * i + 1] = cr[i];
    }
}

void csck_interleave_cbcr8_using(const uint8_t *cb, const uint8_t *cr, size_t count, uint8_t *cbcr, int avx512) {
#if defined(__x86_64__)
    if (avx512 && csck_cpu_has_avx512_interleave()) {
        interleave_cbcr8_avx512(cb, cr, count, cbcr);
        return;
    }
#else
    (void)avx512;
#endif
    interleave_cbcr8_sse2(cb, cr, count, cbcr);
}

void csck_interleave_cbcr8(const uint8_t *cb, const uint8_t *cr, size_t count, uint8_t *cbcr) {
    csck_interleave_cbcr8_using(cb, cr, count, cbcr, 1);
}

void csck_interleave_cbcr16(const uint16_t *cb, const uint16_t *cr, size_t count, uint16_t *cbcr) {
    size_t i = 0;
#if defined(__x86_64__)
    for (; i + 16 <= count; i += 16) {
        const __m128i b0 = _mm_loadu_si128((const __m128i *)(cb + i));
        const __m128i r0 = _mm_loadu_si128((const __m128i *)(cr + i));
        const __m128i b1 = _mm_loadu_si128((const __m128i *)(cb + i + 8));
        const __m128i r1 = _mm_loadu_si128((const __m128i *)(cr + i + 8));
        _mm_storeu_si128((__m128i *)(cbcr + 2 * i), _mm_unpacklo_epi16(b0, r0));
        _mm_storeu_si128((__m128i *)(cbcr + 2 * i + 8), _mm_unpackhi_epi16(b0, r0));
        _mm_storeu_si128((__m128i *)(cbcr + 2 * i + 16), _mm_unpacklo_epi16(b1, r1));
        _mm_storeu_si128((__m128i *)(cbcr + 2 * i + 24), _mm_unpackhi_epi16(b1, r1));
    }
#endif
    for (; i < count; i++) {
        cbcr[2 * i] = cb[i];
        cbcr[2 * i + 1] = cr[i];
    }
}
