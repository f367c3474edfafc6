/* Shared by the C test programs: a known pattern both sides compute, a hash, and small helpers. */
#ifndef FRAMEBUS_TEST_COMMON_H
#define FRAMEBUS_TEST_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "framebus.h"

/* The byte at (frame `k`, plane `p`, row `y`, byte `x` of the row's payload): what the publisher writes and the
 * subscriber expects. Smooth areas and noise, so the codec uses several tile modes. */
static inline uint8_t pattern_byte(uint64_t k, uint32_t p, uint32_t y, uint32_t x) {
    uint32_t noise = (uint32_t)(x * 2654435761u ^ y * 2246822519u ^ (uint32_t)k * 3266489917u);
    if (((x / 32) + (y / 16)) % 3 == 0) return (uint8_t)(noise >> 13);
    return (uint8_t)(k * 29u + p * 101u + y * 7u + x / 4u);
}

/* FNV-1a 64 over the payload bytes of each row of each plane (padding excluded). */
static inline uint64_t hash_rows(uint64_t hash, const uint8_t *data, uint64_t bytes_per_row, uint64_t row_bytes,
                                 uint32_t rows) {
    for (uint32_t y = 0; y < rows; y++) {
        const uint8_t *row = data + (uint64_t)y * bytes_per_row;
        for (uint64_t x = 0; x < row_bytes; x++) {
            hash ^= row[x];
            hash *= 1099511628211ull;
        }
    }
    return hash;
}

#define HASH_SEED 14695981039346656037ull

/* A FourCC from its four characters ("420v"), or 0. */
static inline uint32_t fourcc_from_string(const char *text) {
    if (text == NULL || strlen(text) != 4) return 0;
    return FB_FOURCC(text[0], text[1], text[2], text[3]);
}

/* The error the CHECK_OK calls pass (`&last_error`). */
static fb_error last_error;

/* Exits with status 2 and a message when `call` does not return FB_OK. */
#define CHECK_OK(call)                                                                                           \
    do {                                                                                                         \
        memset(&last_error, 0, sizeof last_error);                                                               \
        fb_status check_status_ = (call);                                                                        \
        if (check_status_ != FB_OK) {                                                                            \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, fb_status_name(check_status_),  \
                    last_error.message);                                                                         \
            exit(2);                                                                                             \
        }                                                                                                        \
    } while (0)

#endif
