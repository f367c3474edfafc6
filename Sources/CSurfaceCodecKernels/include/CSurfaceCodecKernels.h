// CSurfaceCodecKernels: the compressed-surface codec's hot loops with vector instructions, in three tiers.
//
// Written in C because Swift cannot enable instruction sets per function. On x86-64 the AVX2 functions carry
// __attribute__((target("avx2"))) and the SSE4.1 ones __attribute__((target("sse4.1"))); each runs only after
// its runtime check (csck_cpu_has_avx2, csck_cpu_has_sse41; inside the AVX2 tier, the AVX-512 packed8 decoder after
// csck_cpu_has_avx512_packed8), so the package still builds for baseline x86-64
// and as a dependency, with no global -march. On arm64 the NEON functions (NEON is baseline there: no check)
// are built instead (CSCK_HAS_NEON_KERNELS). Elsewhere no kernel is built and the Swift code uses its portable
// path. Every tier decodes and packs exactly the bytes the portable Swift code does.
#ifndef CSURFACE_CODEC_KERNELS_H
#define CSURFACE_CODEC_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#pragma clang assume_nonnull begin

#if defined(__x86_64__)
#define CSCK_HAS_X86_KERNELS 1
#else
#define CSCK_HAS_X86_KERNELS 0
#endif

/// Whether the processor runs AVX2 (cpuid, once).
int csck_cpu_has_avx2(void);

/// Bytes the decoders may read past the last width nibble and past the last predictor bit byte (whole-word loads
/// of the controls): a decoder refuses controls whose capacity does not cover them plus this slack.
#define CSCK_CONTROL_SLACK 8

/// What a pack8 kernel may store past the payload it returns (8-byte stores of the last block).
#define CSCK_PACK_SLACK 8

/// Returned by a pack8 kernel that refused its arguments (its output capacity is too small): nothing was written.
#define CSCK_PACK_REFUSED ((size_t)-1)

/// Decodes the residual blocks of a packed8 component (docs/COMPRESSED-LAYOUT.md §6.1) into `x`: height rows
/// of width bytes, `stride` bytes apart (stride ≥ width). Exactly the samples are written, nothing past a
/// row's end, so `x` may be a plane that other threads write beside this component.
///
/// Capacities (checked first; the call returns -1, having read and written nothing, when one does not hold,
/// else 0):
/// - `nibbles`: `nibbleCapacity` readable bytes, at least ⌈blocks / 2⌉ + CSCK_CONTROL_SLACK, where blocks =
///   ⌈width / 8⌉ × height; `bits`: `bitCapacity` readable bytes, at least ⌈blocks / 8⌉ + CSCK_CONTROL_SLACK. Both
///   are private copies of the payload's width nibbles and predictor bits, already validated.
/// - `x`: `xCapacity` writable bytes, at least (height − 1) × stride + width. Reads of `x` stay inside the
///   samples of the rows written so far and the row being written; row 0 reads its own bytes as "above" before
///   writing them (never selected: row 0 is left-predicted).
/// - `payload` (count bytes, position ≤ count) may be shared memory that changes meanwhile: every width is
///   clamped to 8 and every load is bounded by `count`, so a change gives wrong samples, never an out-of-bounds
///   access.
///
/// `position` is where the residual blocks start. Call only when csck_cpu_has_avx2() returned 1. Where
/// csck_cpu_has_avx512_packed8() returns 1 the blocks are decoded eight a step with AVX-512 (the same samples).
int csck_decode_packed8_avx2(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                             size_t nibbleCapacity, const uint8_t *bits, size_t bitCapacity, size_t width,
                             size_t height, uint8_t *x, size_t xCapacity, size_t stride);

/// Whether BMI2's pdep is fast here (cpuid, once): csck_pdep_is_fast for this processor.
int csck_cpu_has_fast_pdep(void);

/// Whether pdep is fast on a processor with these cpuid answers (leaf 0's vendor registers, leaf 1's eax): it
/// needs BMI2 and AVX2, and is microcoded (tens of cycles) on AMD and Hygon before family 19h (Zen 3); elsewhere
/// (Intel) it takes one cycle. On other architectures, 0.
int csck_pdep_is_fast(int hasBMI2AndAVX2, uint32_t vendorEBX, uint32_t vendorECX, uint32_t vendorEDX,
                      uint32_t signatureEAX);

/// Whether the processor runs the AVX-512 packed8 decoder (cpuid and the OS's register state, once): AVX-512 F,
/// BW, DQ, VL and VBMI, GFNI and BMI2 (Intel from Ice Lake, AMD from Zen 4). On other architectures, 0.
int csck_cpu_has_avx512_packed8(void);

/// csck_decode_packed8_avx2 with a chosen way to unpack the blocks: with AVX-512 (`deposit` = 2: vpermb,
/// vpmultishiftqb and gf2p8affineqb, eight blocks a step; used only where csck_cpu_has_avx512_packed8() returned
/// 1, otherwise as 1), with pdep (`deposit` = 1, used only where csck_cpu_has_fast_pdep() returned 1, otherwise
/// as 0) or with byte shuffles and multiplies (`deposit` = 0). The same samples every way;
/// csck_decode_packed8_avx2 uses AVX-512 where it runs, else pdep where it is fast. For tests and benchmarks.
int csck_decode_packed8_avx2_unpacking(const uint8_t *payload, size_t count, size_t position,
                                       const uint8_t *nibbles, size_t nibbleCapacity, const uint8_t *bits,
                                       size_t bitCapacity, size_t width, size_t height, uint8_t *x, size_t xCapacity,
                                       size_t stride, int deposit);

/// Decodes the residual blocks of a packed10 component (docs/COMPRESSED-LAYOUT.md §6.2) into `x`: height rows of
/// width 16-bit samples, contiguous, under the same rules as csck_decode_packed8_avx2 (widths clamped to 10;
/// returns -1, having done nothing, when a capacity does not hold, else 0). Whole blocks of 8 samples are stored,
/// so a row's last block may write up to 7 samples past the row's end (into the next row, written after, or past
/// the last row): `xCapacity` (in samples) must be at least (height − 1) × width + ⌈width / 8⌉ × 8.
int csck_decode_packed10_avx2(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                              size_t nibbleCapacity, const uint8_t *bits, size_t bitCapacity, size_t width,
                              size_t height, uint16_t *x, size_t xCapacity);

/// csck_decode_packed10_avx2 with rows `stride` samples apart (≥ width) and `width` a multiple of 8, so that
/// exactly the samples of the rows are written (whole blocks end where the rows do): for a plane, whose other
/// bytes stay as they were. `xCapacity` (in samples) must be at least (height − 1) × stride + width; returns -1,
/// having done nothing, when it is not, when `width` is not a multiple of 8, or when a control capacity does not
/// hold, else 0. Call only when csck_cpu_has_avx2() returned 1.
int csck_decode_packed10_avx2_strided(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                                      size_t nibbleCapacity, const uint8_t *bits, size_t bitCapacity, size_t width,
                                      size_t height, uint16_t *x, size_t xCapacity, size_t stride);

/// Chooses and packs the blocks of a packed8 payload (docs/COMPRESSED-LAYOUT.md §6.1): `up` and `left` hold
/// the zig-zagged residuals of each block under each predictor (8 bytes a block, blockCount × 8 readable bytes
/// each: no read goes past them); writes the width nibbles, the predictor bits and the packed blocks to `out` and
/// returns the payload's size; `zeroBlocks` receives the number of blocks of width 0. The same bytes as the
/// portable encoder. `outCapacity` must cover the worst case plus CSCK_PACK_SLACK: ⌈blockCount / 2⌉ +
/// ⌈blockCount / 8⌉ + 8 × blockCount + CSCK_PACK_SLACK bytes; otherwise nothing is written and the call returns
/// CSCK_PACK_REFUSED. Call only when csck_cpu_has_avx2() returned 1.
size_t csck_pack8_avx2(const uint8_t *up, const uint8_t *left, size_t blockCount, uint8_t *out, size_t outCapacity,
                       size_t *zeroBlocks);

// MARK: SSE4.1 and NEON tiers (same contracts as the AVX2 functions above)

#if defined(__aarch64__)
#define CSCK_HAS_NEON_KERNELS 1
#else
#define CSCK_HAS_NEON_KERNELS 0
#endif

/// Whether the processor runs SSE4.1 (with SSSE3; cpuid, once). 0 on other architectures.
int csck_cpu_has_sse41(void);

#if defined(__x86_64__)
/// csck_decode_packed8_avx2's contract with SSE4.1. Call only when csck_cpu_has_sse41()
/// returned 1.
int csck_decode_packed8_sse41(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                             size_t nibbleCapacity, const uint8_t *bits, size_t bitCapacity, size_t width,
                             size_t height, uint8_t *x, size_t xCapacity, size_t stride);

/// csck_decode_packed10_avx2's contract with SSE4.1. Call only when csck_cpu_has_sse41() returned 1.
int csck_decode_packed10_sse41(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                              size_t nibbleCapacity, const uint8_t *bits, size_t bitCapacity, size_t width,
                              size_t height, uint16_t *x, size_t xCapacity);

/// csck_pack8_avx2's contract with SSE4.1: the same bytes as the portable encoder. Call only when
/// csck_cpu_has_sse41() returned 1.
size_t csck_pack8_sse41(const uint8_t *up, const uint8_t *left, size_t blockCount, uint8_t *out, size_t outCapacity,
                        size_t *zeroBlocks);
#endif

#if defined(__aarch64__)
/// csck_decode_packed8_avx2's contract with NEON (arm64 only).
int csck_decode_packed8_neon(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                             size_t nibbleCapacity, const uint8_t *bits, size_t bitCapacity, size_t width,
                             size_t height, uint8_t *x, size_t xCapacity, size_t stride);

/// csck_decode_packed10_avx2's contract with NEON (arm64 only).
int csck_decode_packed10_neon(const uint8_t *payload, size_t count, size_t position, const uint8_t *nibbles,
                              size_t nibbleCapacity, const uint8_t *bits, size_t bitCapacity, size_t width,
                              size_t height, uint16_t *x, size_t xCapacity);

/// csck_pack8_avx2's contract with NEON (arm64 only): the same bytes as the portable encoder.
size_t csck_pack8_neon(const uint8_t *up, const uint8_t *left, size_t blockCount, uint8_t *out, size_t outCapacity,
                        size_t *zeroBlocks);
#endif

/// Whether the processor runs csck_packed8_widths_avx512 (AVX-512 F and BW, BMI2; cpuid, once). 0 on other
/// architectures.
int csck_cpu_has_avx512bw(void);

#if defined(__x86_64__)
/// The width nibbles of a packed8 payload (docs/COMPRESSED-LAYOUT.md §6.1) checked before its blocks are decoded:
/// the `count` bytes at `nibbles` (private memory; two nibbles a byte, low first) hold 2 × count widths. Writes
/// their sum to `total` and returns 1 when any exceeds 8, else 0. Reads exactly the `count` bytes (the last < 64
/// with a masked load). Call only when csck_cpu_has_avx512bw() returned 1.
int csck_packed8_widths_avx512(const uint8_t *nibbles, size_t count, uint64_t *total);
#endif

/// Interleaves `count` BGRA pixels from a tile's components (docs/COMPRESSED-LAYOUT.md §5): B = bg + g, G = g,
/// R = rg + g (modulo 256), A = a, stored as the bytes B, G, R, A at `bgra` (4 × count bytes). Every
/// architecture (SSE2 on x86-64, baseline there).
void csck_interleave_bgra(const uint8_t *g, const uint8_t *bg, const uint8_t *rg, const uint8_t *a, size_t count,
                          uint8_t *bgra);

/// Interleaves `count` chroma pairs of an 8-bit 4:2:0 tile row: `cbcr[2i] = cb[i]`, `cbcr[2i + 1] = cr[i]` (2 × count
/// bytes; reads exactly `count` bytes of each input, writes exactly 2 × count). Every architecture: with AVX-512
/// VBMI where csck_cpu_has_avx512_interleave() returns 1 (64 pairs a step, the rest masked), else SSE2 on x86-64
/// (baseline there), else pair by pair.
void csck_interleave_cbcr8(const uint8_t *cb, const uint8_t *cr, size_t count, uint8_t *cbcr);

/// Whether the processor runs the AVX-512 chroma interleave (AVX-512 F, BW, VBMI and BMI2; cpuid, once). 0 on
/// other architectures.
int csck_cpu_has_avx512_interleave(void);

/// csck_interleave_cbcr8 with a chosen path: AVX-512 when `avx512` is 1 and csck_cpu_has_avx512_interleave()
/// returns 1, otherwise SSE2 (x86-64) or pair by pair. The same bytes either way. For tests and benchmarks.
void csck_interleave_cbcr8_using(const uint8_t *cb, const uint8_t *cr, size_t count, uint8_t *cbcr, int avx512);

/// The same for 16-bit samples (x420, xf20): `cbcr[2i] = cb[i]`, `cbcr[2i + 1] = cr[i]` (2 × count samples).
void csck_interleave_cbcr16(const uint16_t *cb, const uint16_t *cr, size_t count, uint16_t *cbcr);

/// One payload to checksum: `count` bytes at `bytes` (not read when `count` is 0).
typedef struct {
    const uint8_t *bytes;
    size_t count;
} csck_payload;

/// The checksum H (docs/COMPRESSED-LAYOUT.md §8) of each of the `n` payloads, with the same `seed`, into
/// `hashes[0..<n]`: the values of the Swift reference `Checksum.hash`. Reads exactly the payloads' bytes, each
/// once (none past its `count`), so a payload may be shared memory that changes meanwhile (its hash is then
/// whatever the bytes read give). Two payloads a step, scalar; every architecture.
void csck_checksums_scalar(const csck_payload *payloads, size_t n, uint64_t seed, uint64_t *hashes);

/// Whether the processor runs csck_checksums_avx512 (AVX-512 F, DQ and VL; cpuid, once). 0 on other architectures.
int csck_cpu_has_avx512_checksums(void);

#if defined(__x86_64__)
/// csck_checksums_scalar's contract with AVX-512 (vpmullq, vprolq on 256-bit registers): the 32-byte stripes of
/// up to eight payloads a step, each payload's last < 32 bytes and fold scalar. Call only when
/// csck_cpu_has_avx512_checksums() returned 1.
void csck_checksums_avx512(const csck_payload *payloads, size_t n, uint64_t seed, uint64_t *hashes);
#endif

/// LZ4 blocks with Huffman-coded literals (docs/COMPRESSED-LAYOUT.md §6.6): the longest code, in bits.
#define CSCK_HUFF_MAX_BITS 11
/// The fixed part of a coded block's header: literal count (u32), sequence byte count (u32), a 32-byte bitmap of
/// the symbols that have a code; one code-length nibble per such symbol follows.
#define CSCK_HUFF_HEADER_BYTES 40
/// csck_huff_lz4_decode's errors: sizes that do not add up or do not fit, code lengths over 11 bits or
/// over-subscribed, a bit pattern no code starts with or a bit stream of the wrong length, a sequence stream
/// that does not parse or does not use exactly the literals.
#define CSCK_HUFF_BAD_SIZE (-1)
#define CSCK_HUFF_BAD_TABLE (-2)
#define CSCK_HUFF_BAD_CODE (-3)
#define CSCK_HUFF_BAD_SEQUENCES (-4)
/// csck_huff_lz4_decompress's answer at a sequence that breaks the LZ4 block rule (see there).
#define CSCK_HUFF_UNDECIDED (-5)

/// Splits the LZ4 block `block` (`count` bytes, as liblz4 writes it) into a coded block in `out`: its literals
/// Huffman-coded, its other bytes verbatim. Returns the coded block's size, or 0 when the block does not parse or
/// the coded block would not fit in `capacity` bytes (nothing useful is then in `out`).
size_t csck_huff_lz4_encode(const uint8_t *block, size_t count, uint8_t *out, size_t capacity);

/// Rebuilds the LZ4 block of the coded block `payload` (`count` bytes, private memory) into `out`: returns its
/// size (literal count + sequence bytes, at most `capacity`), or a negative CSCK_HUFF_ error having written at
/// most `capacity` bytes of `out`. Every bound comes from `count` and `capacity`; no input makes it read or write
/// outside them. The literals are decoded straight into their places in the block (one pass, no literal buffer).
ptrdiff_t csck_huff_lz4_decode(const uint8_t *payload, size_t count, uint8_t *out, size_t capacity);

/// Decodes the coded block `payload` (`count` bytes, private memory) without building its LZ4 block B: all its
/// literals are decoded from the Huffman stream into `scratch` (private, `scratchCapacity` ≥ `blockCapacity` bytes,
/// so L always fits), then the sequence stream is executed straight into `out` (at most `capacity` bytes), each
/// sequence's literals copied from `scratch` to where they land. B is at most `blockCapacity` bytes (§6.6 rule 1).
/// Matches may reach the `dictionaryCount` bytes right before `out` (liblz4's prefix dictionary, §6.5). Returns the
/// decoded size; or a CSCK_HUFF_BAD_ error when rules 1–4 of §6.6 fail (wherever csck_huff_lz4_decode fails, though
/// not always with the same code); or CSCK_HUFF_UNDECIDED at a sequence liblz4 might refuse (offset 0 or before the
/// dictionary, a match ending in the output's last 5 bytes, a non-last sequence's literals ending within 12 bytes of
/// the output's end or 8 of B's end, match length bytes in B's last 4, literals past the output's end: exactly where
/// B breaks the LZ4 block rule of §6.8): the caller then rebuilds B (csck_huff_lz4_decode) and checks it with
/// csck_lz4_block_check, which refuses it. Everything else it decodes
/// exactly as liblz4 decodes B, so blocks liblz4's encoders make never get that answer. Whatever it returns, it has
/// read only `payload[0..<count]`, `scratch`, the dictionary and `out`, and written only `scratch[0..<L]` and
/// `out[0..<capacity]`.
ptrdiff_t csck_huff_lz4_decompress(const uint8_t *payload, size_t count, size_t blockCapacity, uint8_t *out,
                                   size_t dictionaryCount, size_t capacity, uint8_t *scratch,
                                   size_t scratchCapacity);

/// LZ4 blocks with coded sequences (docs/COMPRESSED-LAYOUT.md §6.7, layout version 7): the fixed header of a
/// sequence-coded block: literal count L, sequence count Q, length byte count E (u32 each), the stored byte count
/// of each of the five streams (literals, tokens, offset low bytes, offset high bytes, length bytes; u32 each), then
/// each stream's kind (u8: 0 stored, 1 Huffman-coded as §6.6). The streams follow in that order.
#define CSCK_SEQ_HEADER_BYTES 37

/// Splits the LZ4 block `block` (`count` bytes, as liblz4 writes it) into a sequence-coded block in `out`, each
/// stream Huffman-coded where that makes it at least `streamSaving` percent smaller, else stored. `scratch`: `count`
/// private bytes. Returns the block's size, or 0 when the block does not parse or the result would not fit in
/// `capacity` bytes (`out` is written only when it fits).
size_t csck_seq_lz4_encode(const uint8_t *block, size_t count, uint8_t *out, size_t capacity, uint8_t *scratch,
                           unsigned streamSaving);

/// Rebuilds the LZ4 block B of the sequence-coded block `payload` (`count` bytes, private memory) into `out`
/// (`capacity` bytes; B must fit), its five streams first decoded into `scratch` (`scratchCapacity` bytes, private;
/// B's size suffices). Returns B's size, or a negative CSCK_HUFF_ error. Every bound comes from `count`,
/// `capacity` and `scratchCapacity`.
ptrdiff_t csck_seq_lz4_decode(const uint8_t *payload, size_t count, uint8_t *out, size_t capacity,
                              uint8_t *scratch, size_t scratchCapacity);

/// csck_huff_lz4_decompress for a sequence-coded block: its five streams decoded into `scratch` (L + S bytes ≤
/// `blockCapacity` ≤ `scratchCapacity`), then the sequences executed into `out` with the same checks, the same
/// CSCK_HUFF_UNDECIDED cases (the caller then rebuilds B with csck_seq_lz4_decode for liblz4) and the same bounds.
ptrdiff_t csck_seq_lz4_decompress(const uint8_t *payload, size_t count, size_t blockCapacity, uint8_t *out,
                                  size_t dictionaryCount, size_t capacity, uint8_t *scratch,
                                  size_t scratchCapacity);

/// The LZ4 block rule of docs/COMPRESSED-LAYOUT.md §6.8: whether `block` (`count` bytes, private memory) is a valid
/// LZ4 block for an output of at most `capacity` bytes with `dictionaryCount` bytes of dictionary right before it.
/// Walks the sequences without copying anything: every length within the block, every non-last sequence's literals
/// ending at most `capacity` − 12 in the output and at most `count` − 8 in the block, match length bytes ending at
/// most `count` − 4 in the block, offsets 1…(output position + `dictionaryCount`), matches ending at most
/// `capacity` − 5, the last sequence's literals ending exactly at the block's end and within `capacity`. Returns the
/// decoded size, or CSCK_LZ4_INVALID. A block it accepts decodes the same with any conforming LZ4 decoder (liblz4's
/// LZ4_decompress_safe and LZ4_decompress_safe_usingDict, prefix or external dictionary alike).
#define CSCK_LZ4_INVALID (-1)
ptrdiff_t csck_lz4_block_check(const uint8_t *block, size_t count, size_t capacity, size_t dictionaryCount);

#pragma clang assume_nonnull end

#endif
