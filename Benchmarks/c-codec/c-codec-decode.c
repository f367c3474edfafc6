// c-codec-decode: the C ABI's decode path, measured. Compresses one synthetic frame (smooth areas and noise, so
// the codec uses several tile modes) with fb_codec_compress, then decodes it FRAMES times with fb_codec_decompress
// into caller planes (malloc'd, rows PADDING bytes longer than their payload), and prints the CPU time and wall
// time per decode. The first decode is checked bit-exact against the source; 3 warm-up decodes are not counted.
//
//   c-codec-decode FORMAT WIDTHxHEIGHT FRAMES [THREADS] [PADDING]
//
// The library is whichever libFrameBusC.so the loader finds (LD_LIBRARY_PATH); its path is printed.
// Build: make -C Benchmarks/c-codec FRAMEBUS_LIBDIR=<dir of libFrameBusC.so>
#define _GNU_SOURCE
#include <framebus.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t nanoseconds(clockid_t clock) {
    struct timespec now;
    clock_gettime(clock, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static uint8_t pattern_byte(uint32_t p, uint32_t y, uint32_t x) {
    uint32_t noise = x * 2654435761u ^ y * 2246822519u;
    if (((x / 64) + (y / 32)) % 5 == 0) return (uint8_t)(noise >> 13);
    return (uint8_t)(p * 101u + y / 3u + x / 5u);
}

static void check(fb_status status, const fb_error *error, const char *what) {
    if (status != FB_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, fb_status_name(status), error->message);
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s FORMAT WIDTHxHEIGHT FRAMES [THREADS] [PADDING]\n", argv[0]);
        return 64;
    }
    if (strlen(argv[1]) != 4) return 64;
    const uint32_t format = FB_FOURCC(argv[1][0], argv[1][1], argv[1][2], argv[1][3]);
    unsigned width = 0, height = 0;
    if (sscanf(argv[2], "%ux%u", &width, &height) != 2) return 64;
    const int frames = atoi(argv[3]);
    const uint32_t threads = argc > 4 ? (uint32_t)atoi(argv[4]) : 1;
    const uint64_t padding = argc > 5 ? (uint64_t)atoi(argv[5]) : 0;
    fb_error error;
    memset(&error, 0, sizeof error);

    fb_format_info info;
    check(fb_format_get_info(format, &info, &error), &error, "fb_format_get_info");
    fb_image source, output;
    memset(&source, 0, sizeof source);
    source.format = format;
    source.width = width;
    source.height = height;
    output = source;
    uint64_t row_bytes[FB_MAX_PLANES] = {0};
    uint32_t rows[FB_MAX_PLANES] = {0};
    uint64_t raw = 0;
    for (uint32_t p = 0; p < info.plane_count; p++) {
        row_bytes[p] = (uint64_t)(width / info.horizontal_subsampling[p]) * info.bytes_per_element[p];
        rows[p] = height / info.vertical_subsampling[p];
        raw += row_bytes[p] * rows[p];
        source.planes[p].bytes_per_row = row_bytes[p];
        source.planes[p].data = malloc(row_bytes[p] * rows[p]);
        output.planes[p].bytes_per_row = row_bytes[p] + padding;
        output.planes[p].data = malloc((row_bytes[p] + padding) * rows[p]);
        for (uint32_t y = 0; y < rows[p]; y++) {
            uint8_t *row = (uint8_t *)source.planes[p].data + y * row_bytes[p];
            for (uint64_t x = 0; x < row_bytes[p]; x++) row[x] = pattern_byte(p, y, (uint32_t)x);
        }
    }
    fb_codec *codec = NULL;
    check(fb_codec_create(threads, &codec, &error), &error, "fb_codec_create");
    uint64_t capacity = 0, used = 0;
    check(fb_codec_maximum_compressed_size(format, width, height, &capacity, &error), &error, "maximum size");
    uint8_t *compressed = malloc(capacity);
    check(fb_codec_compress(codec, &source, compressed, capacity, &used, &error), &error, "fb_codec_compress");

    check(fb_codec_decompress(codec, compressed, used, &output, &error), &error, "fb_codec_decompress");
    for (uint32_t p = 0; p < info.plane_count; p++) {
        for (uint32_t y = 0; y < rows[p]; y++) {
            if (memcmp((uint8_t *)source.planes[p].data + y * row_bytes[p],
                       (uint8_t *)output.planes[p].data + y * output.planes[p].bytes_per_row, row_bytes[p]) != 0) {
                fprintf(stderr, "decoded plane %u row %u differs\n", p, y);
                return 1;
            }
        }
    }
    for (int i = 0; i < 3; i++) check(fb_codec_decompress(codec, compressed, used, &output, &error), &error, "warm-up");

    const uint64_t cpu0 = nanoseconds(CLOCK_PROCESS_CPUTIME_ID), wall0 = nanoseconds(CLOCK_MONOTONIC);
    for (int i = 0; i < frames; i++) {
        check(fb_codec_decompress(codec, compressed, used, &output, &error), &error, "fb_codec_decompress");
    }
    const uint64_t cpu = nanoseconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0, wall = nanoseconds(CLOCK_MONOTONIC) - wall0;

    Dl_info where;
    const char *library = dladdr((void *)fb_codec_decompress, &where) && where.dli_fname ? where.dli_fname : "?";
    printf("format=%s size=%ux%u threads=%u padding=%llu raw=%llu compressed=%llu frames=%d cpu_us=%.1f wall_us=%.1f "
           "library=%s\n",
           argv[1], width, height, threads, (unsigned long long)padding, (unsigned long long)raw,
           (unsigned long long)used, frames, cpu / 1e3 / frames, wall / 1e3 / frames, library);
    fb_codec_destroy(codec);
    return 0;
}
