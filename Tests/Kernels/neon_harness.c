// Runs the NEON kernels (Sources/CSurfaceCodecKernels/kernels_neon.c) on inputs written by NEONKernelTests and
// compares every output byte with the portable Swift code's, written beside them. Built for arm64 with
// `aarch64-linux-gnu-gcc -O2 -static` and run under qemu-aarch64 by the test.
//
// Input (little-endian): records, each a u32 kind, ended by kind 0.
//   1 packed8 decode: u32 width, height, stride, count; payload[count]; expected plane[stride·height] (0xA5
//     beside the samples). The plane is decoded into stride·height + 64 bytes of 0xA5; all of it is compared.
//   2 packed10 decode: u32 width, height, count; payload[count]; expected u16[width·height].
//   3 pack8: u32 blockCount; up[blockCount·8]; left[blockCount·8]; u32 size; expected[size]; u32 zeroBlocks.
// Output: one line per kind, `KIND cases=N bytes=B different=D`, then `done`. Exit status 0 unless the input
// is malformed (mismatches are reported in the counts, for the test to judge).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "CSurfaceCodecKernels.h"

#if !defined(__aarch64__)
#error "the NEON harness is built for arm64"
#endif

static FILE *input;

static void fail(const char *what) {
    fprintf(stderr, "neon_harness: malformed input (%s)\n", what);
    exit(2);
}

static uint32_t read32(void) {
    uint8_t b[4];
    if (fread(b, 1, 4, input) != 4) fail("u32");
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/// `count` bytes from the input into a fresh allocation of `count + slack` bytes (the slack zeroed).
static uint8_t *readBytes(size_t count, size_t slack) {
    uint8_t *p = calloc(1, count + slack + 1);
    if (!p) fail("allocation");
    if (count > 0 && fread(p, 1, count, input) != count) fail("bytes");
    return p;
}

/// Byte-wise comparison: adds to *bytes and *different.
static void compare(const uint8_t *a, const uint8_t *b, size_t count, unsigned long long *bytes,
                    unsigned long long *different) {
    for (size_t i = 0; i < count; i++) *different += a[i] != b[i];
    *bytes += count;
}

/// The private copy of a payload's width nibbles and predictor bits, readable 4 bytes past each end.
static uint8_t *controls(const uint8_t *payload, size_t blocks, size_t *nibbleBytes, size_t *bitBytes) {
    *nibbleBytes = (blocks + 1) / 2;
    *bitBytes = (blocks + 7) / 8;
    uint8_t *c = calloc(1, *nibbleBytes + *bitBytes + CSCK_CONTROL_SLACK);
    if (!c) fail("allocation");
    memcpy(c, payload, *nibbleBytes + *bitBytes);
    return c;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: neon_harness INPUT\n");
        return 2;
    }
    input = fopen(argv[1], "rb");
    if (!input) {
        perror(argv[1]);
        return 2;
    }
    unsigned long long cases[4] = {0}, bytes[4] = {0}, different[4] = {0};
    for (;;) {
        const uint32_t kind = read32();
        if (kind == 0) break;
        if (kind == 1) {
            const size_t width = read32(), height = read32(), stride = read32(), count = read32();
            if (width == 0 || height == 0 || stride < width) fail("geometry");
            uint8_t *payload = readBytes(count, 0);
            uint8_t *expected = readBytes(stride * height, 0);
            const size_t blocks = (width + 7) / 8 * height;
            size_t nibbleBytes, bitBytes;
            uint8_t *c = controls(payload, blocks, &nibbleBytes, &bitBytes);
            if (nibbleBytes + bitBytes > count) fail("packed8 payload");
            uint8_t *plane = malloc(stride * height + 64);
            if (!plane) fail("allocation");
            memset(plane, 0xA5, stride * height + 64);
            // The stated capacities: the controls' slack, the plane's bytes (a refusal counts as a difference).
            different[1] += csck_decode_packed8_neon(payload, count, nibbleBytes + bitBytes, c,
                                                     nibbleBytes + bitBytes + CSCK_CONTROL_SLACK, c + nibbleBytes,
                                                     bitBytes + CSCK_CONTROL_SLACK, width, height, plane,
                                                     stride * height + 64, stride) != 0;
            compare(plane, expected, stride * height, &bytes[1], &different[1]);
            for (size_t i = 0; i < 64; i++) {
                different[1] += plane[stride * height + i] != 0xA5;
                bytes[1] += 1;
            }
            cases[1]++;
            free(plane);
            free(c);
            free(expected);
            free(payload);
        } else if (kind == 2) {
            const size_t width = read32(), height = read32(), count = read32();
            if (width == 0 || height == 0) fail("geometry");
            uint8_t *payload = readBytes(count, 0);
            uint8_t *expected = readBytes(width * height * 2, 0);
            const size_t blocks = (width + 7) / 8 * height;
            size_t nibbleBytes, bitBytes;
            uint8_t *c = controls(payload, blocks, &nibbleBytes, &bitBytes);
            if (nibbleBytes + bitBytes > count) fail("packed10 payload");
            uint16_t *x = calloc(1, width * height * 2 + 64);
            if (!x) fail("allocation");
            different[2] += csck_decode_packed10_neon(payload, count, nibbleBytes + bitBytes, c,
                                                      nibbleBytes + bitBytes + CSCK_CONTROL_SLACK, c + nibbleBytes,
                                                      bitBytes + CSCK_CONTROL_SLACK, width, height, x,
                                                      width * height + 32) != 0;
            uint8_t *got = malloc(width * height * 2);
            if (!got) fail("allocation");
            for (size_t i = 0; i < width * height; i++) {
                got[2 * i] = (uint8_t)x[i];
                got[2 * i + 1] = (uint8_t)(x[i] >> 8);
            }
            compare(got, expected, width * height * 2, &bytes[2], &different[2]);
            cases[2]++;
            free(got);
            free(x);
            free(c);
            free(expected);
            free(payload);
        } else if (kind == 3) {
            const size_t blockCount = read32();
            uint8_t *up = readBytes(blockCount * 8, 0);
            uint8_t *left = readBytes(blockCount * 8, 0);
            const size_t size = read32();
            uint8_t *expected = readBytes(size, 0);
            const size_t zeroBlocks = read32();
            // Room for the worst case (nibbles, bits, 8 bytes a block) plus CSCK_PACK_SLACK.
            const size_t room = (blockCount + 1) / 2 + (blockCount + 7) / 8 + blockCount * 8 + CSCK_PACK_SLACK;
            uint8_t *out = malloc(room);
            if (!out) fail("allocation");
            memset(out, 0xEE, room);
            size_t zeros = 0;
            const size_t written = csck_pack8_neon(up, left, blockCount, out, room, &zeros);
            if (written == CSCK_PACK_REFUSED) fail("pack8 refused its stated capacity");
            if (written != size) {
                different[3] += 1 + (written > size ? written - size : size - written);
            }
            compare(out, expected, written < size ? written : size, &bytes[3], &different[3]);
            different[3] += zeros != zeroBlocks;
            cases[3]++;
            free(out);
            free(expected);
            free(left);
            free(up);
        } else {
            fail("kind");
        }
    }
    static const char *names[4] = {"", "decode8", "decode10", "pack8"};
    for (int k = 1; k <= 3; k++) {
        printf("%s cases=%llu bytes=%llu different=%llu\n", names[k], cases[k], bytes[k], different[k]);
    }
    printf("done\n");
    return 0;
}
