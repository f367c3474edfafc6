// The layout's 64-bit checksum (docs/COMPRESSED-LAYOUT.md §8) over several payloads at once.
//
// H keeps four u64 lanes; every 32-byte stripe steps each lane once: lane = rotl64((lane ^ word) * K, 31). One
// payload is a chain of dependent multiplies (about 5 cycles a stripe, whatever the processor's width), but the
// lanes of different payloads are independent: these kernels step several payloads' stripes together, then finish
// each payload (its last < 32 bytes and the fold) alone, exactly as the Swift reference (`Checksum.hash`) does.
#include "CSurfaceCodecKernels.h"

#include <string.h>

#define K0 0x9E3779B97F4A7C15ULL
#define K1 0xC2B2AE3D27D4EB4FULL
#define K2 0x165667B19E3779F9ULL
#define K3 0x85EBCA77C2B2AE63ULL

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint64_t step(uint64_t lane, uint64_t word, uint64_t k) {
    const uint64_t x = (lane ^ word) * k;
    return (x << 31) | (x >> 33);
}

static inline uint64_t fold(uint64_t h) {
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    return h;
}

/// The end of H for a payload of `count` bytes whose whole stripes left the lanes `lanes`: the `rest` (< 32) bytes
/// at `p` (whole words into lane 0, the last 1...7 bytes into lane 1), then the fold. Reads only p[0..<rest].
static inline uint64_t finish(const uint64_t lanes[4], const uint8_t *p, size_t rest, size_t count) {
    uint64_t a = lanes[0], b = lanes[1];
    while (rest >= 8) {
        a = step(a, load64(p), K0);
        p += 8;
        rest -= 8;
    }
    if (rest) {
        uint64_t tail = 0;
        for (size_t i = 0; i < rest; i++) tail |= (uint64_t)p[i] << (8 * i);
        b = step(b, tail, K1);
    }
    return fold(a) ^ fold(b + 1) ^ fold(lanes[2] + 2) ^ fold(lanes[3] + 3) ^ (uint64_t)count;
}

/// H of one payload, the portable way (one stripe at a time).
static uint64_t checksum1(const uint8_t *p, size_t count, uint64_t seed) {
    uint64_t l[4] = {seed ^ K0, seed ^ K1, seed ^ K2, seed ^ K3};
    const size_t stripes = count / 32;
    for (size_t i = 0; i < stripes; i++, p += 32) {
        l[0] = step(l[0], load64(p), K0);
        l[1] = step(l[1], load64(p + 8), K1);
        l[2] = step(l[2], load64(p + 16), K2);
        l[3] = step(l[3], load64(p + 24), K3);
    }
    return finish(l, p, count % 32, count);
}

/// Payloads ordered at once (longest first); a longer call goes in groups of this many.
#define GROUP 64

/// Hashes the payloads shorter than a stripe (alone, into `hashes`) and puts the indices of the others into
/// `order`, longest first (insertion sort: n <= GROUP); returns how many there are.
static size_t order_longest_first(const csck_payload *payloads, size_t n, uint64_t seed, uint64_t *hashes,
                                  uint8_t order[GROUP]) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const size_t count = payloads[i].count;
        if (count < 32) {
            hashes[i] = checksum1(payloads[i].bytes, count, seed);
            continue;
        }
        size_t at = m++;
        while (at > 0 && payloads[order[at - 1]].count < count) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = (uint8_t)i;
    }
    return m;
}

/// csck_checksums_scalar for at most GROUP payloads: longest first, two payloads of near lengths a step, so that
/// their common stripes are most of both.
static void checksums_scalar_group(const csck_payload *payloads, size_t n, uint64_t seed, uint64_t *hashes) {
    uint8_t order[GROUP];
    const size_t m = order_longest_first(payloads, n, seed, hashes, order);
    size_t i = 0;
    // Two payloads a step: eight multiply chains instead of four, which fill a 64-bit multiplier that one
    // payload's four chains leave idle between their dependent steps.
    for (; i + 2 <= m; i += 2) {
        const size_t x = order[i], y = order[i + 1];
        const uint8_t *p = payloads[x].bytes, *q = payloads[y].bytes;
        const size_t pc = payloads[x].count, qc = payloads[y].count;
        uint64_t a[4] = {seed ^ K0, seed ^ K1, seed ^ K2, seed ^ K3};
        uint64_t b[4] = {seed ^ K0, seed ^ K1, seed ^ K2, seed ^ K3};
        size_t ps = pc / 32, qs = qc / 32;
        const size_t both = ps < qs ? ps : qs;
        for (size_t s = 0; s < both; s++, p += 32, q += 32) {
            a[0] = step(a[0], load64(p), K0);
            b[0] = step(b[0], load64(q), K0);
            a[1] = step(a[1], load64(p + 8), K1);
            b[1] = step(b[1], load64(q + 8), K1);
            a[2] = step(a[2], load64(p + 16), K2);
            b[2] = step(b[2], load64(q + 16), K2);
            a[3] = step(a[3], load64(p + 24), K3);
            b[3] = step(b[3], load64(q + 24), K3);
        }
        ps -= both;
        qs -= both;
        for (; ps; ps--, p += 32) {
            a[0] = step(a[0], load64(p), K0);
            a[1] = step(a[1], load64(p + 8), K1);
            a[2] = step(a[2], load64(p + 16), K2);
            a[3] = step(a[3], load64(p + 24), K3);
        }
        for (; qs; qs--, q += 32) {
            b[0] = step(b[0], load64(q), K0);
            b[1] = step(b[1], load64(q + 8), K1);
            b[2] = step(b[2], load64(q + 16), K2);
            b[3] = step(b[3], load64(q + 24), K3);
        }
        hashes[x] = finish(a, p, pc % 32, pc);
        hashes[y] = finish(b, q, qc % 32, qc);
    }
    if (i < m) hashes[order[i]] = checksum1(payloads[order[i]].bytes, payloads[order[i]].count, seed);
}

void csck_checksums_scalar(const csck_payload *payloads, size_t n, uint64_t seed, uint64_t *hashes) {
    for (size_t i = 0; i < n; i += GROUP) {
        const size_t group = n - i < GROUP ? n - i : GROUP;
        checksums_scalar_group(payloads + i, group, seed, hashes + i);
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

static int avx512Checksums = -1;

int csck_cpu_has_avx512_checksums(void) {
    int has = __atomic_load_n(&avx512Checksums, __ATOMIC_RELAXED);
    if (has >= 0) return has;
    __builtin_cpu_init();
    has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
          __builtin_cpu_supports("avx512vl");
    __atomic_store_n(&avx512Checksums, has, __ATOMIC_RELAXED);
    return has;
}

/// Payloads hashed at once: one 256-bit register of four lanes each. Eight chains of vpxor, vpmullq and vprolq
/// (about 5 cycles deep) keep the multipliers busy.
#define SLOTS 8

#define AVX512_TARGET "avx512f,avx512dq,avx512vl"

__attribute__((target(AVX512_TARGET), always_inline)) static inline __m256i step4(__m256i lanes, const uint8_t *p,
                                                                                  __m256i k) {
    return _mm256_rol_epi64(_mm256_mullo_epi64(_mm256_xor_si256(lanes, _mm256_loadu_si256((const void *)p)), k), 31);
}

/// Steps all SLOTS lanes `stripes` times, slot j reading from base[j] on (every base[j] has that many stripes).
__attribute__((target(AVX512_TARGET))) static void run_stripes(__m256i s[SLOTS], const uint8_t *const base[SLOTS],
                                                                size_t stripes, __m256i k) {
    __m256i s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3], s4 = s[4], s5 = s[5], s6 = s[6], s7 = s[7];
    const uint8_t *b0 = base[0], *b1 = base[1], *b2 = base[2], *b3 = base[3], *b4 = base[4], *b5 = base[5],
                  *b6 = base[6], *b7 = base[7];
    const size_t end = stripes * 32;
    for (size_t o = 0; o < end; o += 32) {
        s0 = step4(s0, b0 + o, k);
        s1 = step4(s1, b1 + o, k);
        s2 = step4(s2, b2 + o, k);
        s3 = step4(s3, b3 + o, k);
        s4 = step4(s4, b4 + o, k);
        s5 = step4(s5, b5 + o, k);
        s6 = step4(s6, b6 + o, k);
        s7 = step4(s7, b7 + o, k);
    }
    s[0] = s0, s[1] = s1, s[2] = s2, s[3] = s3, s[4] = s4, s[5] = s5, s[6] = s6, s[7] = s7;
}

/// csck_checksums_avx512 for at most GROUP payloads. The slots take the payloads longest first (the longest
/// payload bounds the time; short ones fill in beside it), each payload of at least one stripe; the shorter ones
/// are finished alone.
__attribute__((target(AVX512_TARGET))) static void checksums_group(const csck_payload *payloads, size_t n,
                                                                   uint64_t seed, uint64_t *hashes) {
    const __m256i k = _mm256_setr_epi64x((long long)K0, (long long)K1, (long long)K2, (long long)K3);
    const __m256i start = _mm256_xor_si256(_mm256_set1_epi64x((long long)seed), k);
    uint8_t order[GROUP];
    const size_t m = order_longest_first(payloads, n, seed, hashes, order);
    __m256i s[SLOTS];
    const uint8_t *base[SLOTS];
    size_t left[SLOTS];   // whole stripes still to step
    size_t which[SLOTS];  // the payload a slot hashes; n when the slot is idle
    size_t next = 0, busy = 0;
    for (size_t j = 0; j < SLOTS; j++) {
        if (next < m) {
            const size_t i = order[next++];
            s[j] = start;
            base[j] = payloads[i].bytes;
            left[j] = payloads[i].count / 32;
            which[j] = i;
            busy++;
        } else {
            which[j] = n;
        }
    }
    while (busy) {
        // Step every slot as far as the first to finish goes; idle slots read the stripes of a busy one (readable
        // for that long) and their lanes are never used.
        size_t stripes = SIZE_MAX, any = 0;
        for (size_t j = 0; j < SLOTS; j++) {
            if (which[j] < n && left[j] < stripes) stripes = left[j], any = j;
        }
        const uint8_t *from[SLOTS];
        for (size_t j = 0; j < SLOTS; j++) from[j] = which[j] < n ? base[j] : base[any];
        run_stripes(s, from, stripes, k);
        for (size_t j = 0; j < SLOTS; j++) {
            if (which[j] >= n) continue;
            base[j] += stripes * 32;
            left[j] -= stripes;
            if (left[j]) continue;
            uint64_t lanes[4];
            _mm256_storeu_si256((void *)lanes, s[j]);
            const size_t count = payloads[which[j]].count;
            hashes[which[j]] = finish(lanes, base[j], count % 32, count);
            which[j] = n;
            busy--;
            if (next < m) {
                const size_t i = order[next++];
                s[j] = start;
                base[j] = payloads[i].bytes;
                left[j] = payloads[i].count / 32;
                which[j] = i;
                busy++;
            }
        }
    }
}

__attribute__((target(AVX512_TARGET))) void csck_checksums_avx512(const csck_payload *payloads, size_t n,
                                                                  uint64_t seed, uint64_t *hashes) {
    for (size_t i = 0; i < n; i += GROUP) {
        const size_t group = n - i < GROUP ? n - i : GROUP;
        checksums_group(payloads + i, group, seed, hashes + i);
    }
}

#else

int csck_cpu_has_avx512_checksums(void) { return 0; }

#endif
