/* The codec through the C ABI: for each base format, compress an image in caller memory, decompress it whole and
 * band by band, and compare every byte; then damaged, truncated and mismatched input, small buffers and NULLs.
 *
 * usage: codec WIDTH HEIGHT [TILE_WIDTH TILE_HEIGHT]
 *
 * With a tile size the codec is made by fb_codec_create_with_options with it (0 meaning the default), and every
 * compressed image's header must state that size as docs/COMPRESSED-LAYOUT.md section 4 clamps it.
 *
 * Prints "ok FORMAT used=N raw=N" per format and "FAIL ..." for every failed check; exits 0 when nothing failed.
 */
#include "common.h"

static int failures;

#define EXPECT(condition, ...)                                                                                   \
    do {                                                                                                         \
        if (!(condition)) {                                                                                      \
            failures++;                                                                                          \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #condition);                                          \
            printf(__VA_ARGS__);                                                                                 \
            printf("\n");                                                                                        \
        }                                                                                                        \
    } while (0)

typedef struct image {
    fb_image image;
    uint64_t row_bytes[FB_MAX_PLANES];
    uint32_t rows[FB_MAX_PLANES];
    uint32_t vertical_subsampling[FB_MAX_PLANES];
    uint32_t plane_count;
} image;

/* An image of `format` in malloc'd planes whose rows are `padding` bytes longer than their payload. */
static image image_make(uint32_t format, uint32_t width, uint32_t height, uint32_t padding) {
    image result;
    memset(&result, 0, sizeof result);
    fb_format_info info;
    CHECK_OK(fb_format_get_info(format, &info, &last_error));
    result.image.format = format;
    result.image.width = width;
    result.image.height = height;
    result.plane_count = info.plane_count;
    for (uint32_t p = 0; p < info.plane_count; p++) {
        result.row_bytes[p] = (uint64_t)(width / info.horizontal_subsampling[p]) * info.bytes_per_element[p];
        result.rows[p] = height / info.vertical_subsampling[p];
        result.vertical_subsampling[p] = info.vertical_subsampling[p];
        result.image.planes[p].bytes_per_row = result.row_bytes[p] + padding;
        result.image.planes[p].data = calloc(result.rows[p] ? result.rows[p] : 1, result.row_bytes[p] + padding);
    }
    return result;
}

static void image_free(image *value) {
    for (uint32_t p = 0; p < value->plane_count; p++) free(value->image.planes[p].data);
}

static void image_fill(image *value, uint64_t k) {
    for (uint32_t p = 0; p < value->plane_count; p++) {
        for (uint32_t y = 0; y < value->rows[p]; y++) {
            uint8_t *row = (uint8_t *)value->image.planes[p].data + (uint64_t)y * value->image.planes[p].bytes_per_row;
            for (uint64_t x = 0; x < value->row_bytes[p]; x++) row[x] = pattern_byte(k, p, y, (uint32_t)x);
        }
    }
}

/* Payload bytes of plane rows [first, first + count) of `a` that differ from rows [0, count) of `b`... or from
 * the same rows of `b` when `b_first` is first. */
static uint64_t differences(const image *a, uint32_t a_first, const image *b, uint32_t b_first, uint32_t image_rows) {
    uint64_t count = 0;
    for (uint32_t p = 0; p < a->plane_count; p++) {
        const uint32_t sub = a->vertical_subsampling[p];
        const uint32_t rows = (image_rows + sub - 1) / sub;
        for (uint32_t y = 0; y < rows; y++) {
            const uint8_t *ra = (const uint8_t *)a->image.planes[p].data + (uint64_t)(a_first / sub + y) * a->image.planes[p].bytes_per_row;
            const uint8_t *rb = (const uint8_t *)b->image.planes[p].data + (uint64_t)(b_first / sub + y) * b->image.planes[p].bytes_per_row;
            for (uint64_t x = 0; x < a->row_bytes[p]; x++) count += ra[x] != rb[x];
        }
    }
    return count;
}

typedef struct bands {
    image *band;
    image *whole;
    uint32_t next_row;
    uint32_t calls;
    uint32_t stop_after;
    int out_of_order;
    /* When set, the callback calls back into the codec, which must refuse (not wait for itself for ever). */
    fb_codec *reenter;
    fb_status reentry_status;
} bands;

static int32_t on_band(void *context, uint32_t first_row, uint32_t row_count) {
    bands *state = context;
    if (first_row != state->next_row) state->out_of_order = 1;
    state->next_row = first_row + row_count;
    state->calls++;
    /* Copy the band into the whole image so it can be compared at the end. */
    for (uint32_t p = 0; p < state->band->plane_count; p++) {
        const uint32_t sub = state->band->vertical_subsampling[p];
        for (uint32_t y = 0; y < (row_count + sub - 1) / sub; y++) {
            memcpy((uint8_t *)state->whole->image.planes[p].data + (uint64_t)(first_row / sub + y) * state->whole->image.planes[p].bytes_per_row,
                   (uint8_t *)state->band->image.planes[p].data + (uint64_t)y * state->band->image.planes[p].bytes_per_row,
                   state->band->row_bytes[p]);
        }
    }
    if (state->reenter != NULL) {
        uint32_t rows = 0;
        uint8_t bytes[16] = {0};
        state->reentry_status = fb_codec_tile_row_height(state->reenter, bytes, sizeof bytes, state->whole->image.format,
                                                         state->whole->image.width, state->whole->image.height, &rows, NULL);
    }
    return state->stop_after != 0 && state->calls >= state->stop_after;
}

/* Decompresses into planes whose rows are `padding` bytes longer than their payload and that start `shift` bytes
 * into their allocation, every byte preset to 0xA5: strides or addresses that are not multiples of the format's
 * element size take the codec's copying path, the others let it decode in place. The image must equal `source` bit for bit,
 * and no byte outside the samples (row padding, the bytes before the plane) may change. */
static void decompress_into_odd_planes(fb_codec *codec, const uint8_t *compressed, uint64_t used, const image *source,
                                       const char *name, uint32_t padding, uint32_t shift) {
    image output = *source;
    uint8_t *allocations[FB_MAX_PLANES] = {NULL};
    uint64_t sizes[FB_MAX_PLANES] = {0};
    for (uint32_t p = 0; p < output.plane_count; p++) {
        const uint64_t stride = output.row_bytes[p] + padding;
        sizes[p] = shift + stride * output.rows[p];
        allocations[p] = malloc(sizes[p]);
        memset(allocations[p], 0xA5, sizes[p]);
        output.image.planes[p].data = allocations[p] + shift;
        output.image.planes[p].bytes_per_row = stride;
    }
    fb_status status = fb_codec_decompress(codec, compressed, used, &output.image, &last_error);
    EXPECT(status == FB_OK, "%s: padding %u shift %u gave %s: %s", name, padding, shift, fb_status_name(status),
           last_error.message);
    EXPECT(differences(source, 0, &output, 0, source->image.height) == 0, "%s: padding %u shift %u: bytes differ",
           name, padding, shift);
    uint64_t touched = 0;
    for (uint32_t p = 0; p < output.plane_count; p++) {
        const uint64_t stride = output.row_bytes[p] + padding;
        for (uint64_t i = 0; i < shift; i++) touched += allocations[p][i] != 0xA5;
        for (uint32_t y = 0; y < output.rows[p]; y++) {
            const uint8_t *row = allocations[p] + shift + (uint64_t)y * stride;
            for (uint64_t x = output.row_bytes[p]; x < stride; x++) touched += row[x] != 0xA5;
        }
        free(allocations[p]);
    }
    EXPECT(touched == 0, "%s: padding %u shift %u: %llu bytes outside the samples written", name, padding, shift,
           (unsigned long long)touched);
}

/* A little-endian u32 of the compressed header (docs/COMPRESSED-LAYOUT.md section 2). */
static uint32_t header_u32(const uint8_t *bytes, uint32_t offset) {
    return (uint32_t)bytes[offset] | (uint32_t)bytes[offset + 1] << 8 | (uint32_t)bytes[offset + 2] << 16 |
           (uint32_t)bytes[offset + 3] << 24;
}

/* The tile size the codec was asked for (0: the default) and the one its headers must state. */
typedef struct tiles {
    uint32_t width;
    uint32_t height;
    uint32_t expected_width;
    uint32_t expected_height;
} tiles;

static void round_trip(fb_codec *codec, const tiles *tile, uint32_t format, const char *name, uint32_t width,
                       uint32_t height) {
    image source = image_make(format, width, height, 40);
    image_fill(&source, 7);
    uint64_t capacity = 0;
    CHECK_OK(fb_codec_compressed_capacity(codec, format, width, height, &capacity, &last_error));
    uint64_t default_capacity = 0;
    CHECK_OK(fb_codec_maximum_compressed_size(format, width, height, &default_capacity, &last_error));
    if (tile->width == 0 && tile->height == 0) {
        EXPECT(capacity == default_capacity, "%s: capacity %llu, default maximum %llu", name,
               (unsigned long long)capacity, (unsigned long long)default_capacity);
    }
    uint8_t *compressed = malloc(capacity);
    uint64_t used = 0;
    CHECK_OK(fb_codec_compress(codec, &source.image, compressed, capacity, &used, &last_error));
    EXPECT(used > 0 && used <= capacity, "%s used %llu of %llu", name, (unsigned long long)used, (unsigned long long)capacity);
    EXPECT(header_u32(compressed, 20) == tile->expected_width && header_u32(compressed, 24) == tile->expected_height,
           "%s: header states %ux%u tiles, expected %ux%u", name, header_u32(compressed, 20),
           header_u32(compressed, 24), tile->expected_width, tile->expected_height);

    /* Whole frame, into rows with other padding. */
    image output = image_make(format, width, height, 8);
    CHECK_OK(fb_codec_decompress(codec, compressed, used, &output.image, &last_error));
    EXPECT(differences(&source, 0, &output, 0, height) == 0, "%s: decompressed bytes differ", name);

    /* Strides and addresses of every residue mod 4: in place where aligned to the elements, through a copy elsewhere. */
    const uint32_t layouts[][2] = {{0, 0}, {1, 0}, {2, 0}, {4, 0}, {0, 1}, {3, 1}, {0, 2}, {64, 0}};
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        decompress_into_odd_planes(codec, compressed, used, &source, name, layouts[i][0], layouts[i][1]);
    }

    /* The compressed format as the destination's format means its base. */
    fb_format_info info;
    CHECK_OK(fb_format_get_info(format, &info, &last_error));
    image output2 = image_make(format, width, height, 0);
    output2.image.format = info.compressed_format;
    CHECK_OK(fb_codec_decompress(codec, compressed, used, &output2.image, &last_error));
    EXPECT(differences(&source, 0, &output2, 0, height) == 0, "%s: decompressed (compressed format) differ", name);

    /* Band by band. */
    uint32_t tile_rows = 0;
    CHECK_OK(fb_codec_tile_row_height(codec, compressed, used, format, width, height, &tile_rows, &last_error));
    EXPECT(tile_rows > 0 && tile_rows <= height, "%s: tile row height %u", name, tile_rows);
    EXPECT(tile_rows == (tile->expected_height < height ? tile->expected_height : height),
           "%s: tile row height %u, expected the tile height %u", name, tile_rows, tile->expected_height);
    image band = image_make(format, width, tile_rows, 16);
    image whole = image_make(format, width, height, 0);
    bands state = {&band, &whole, 0, 0, 0, 0, NULL, FB_OK};
    CHECK_OK(fb_codec_decode_rows(codec, compressed, used, height, &band.image, on_band, &state, &last_error));
    EXPECT(!state.out_of_order && state.next_row == height, "%s: bands ended at row %u", name, state.next_row);
    EXPECT(state.calls == (height + tile_rows - 1) / tile_rows, "%s: %u bands", name, state.calls);
    EXPECT(differences(&source, 0, &whole, 0, height) == 0, "%s: band-decoded bytes differ", name);

    /* The callback stops after the first band. */
    if (state.calls > 1) {
        bands stopping = {&band, &whole, 0, 0, 1, 0, codec, FB_OK};
        fb_status status = fb_codec_decode_rows(codec, compressed, used, height, &band.image, on_band, &stopping, &last_error);
        EXPECT(status == FB_ERROR_CANCELLED && stopping.calls == 1, "%s: stop gave %s after %u", name,
               fb_status_name(status), stopping.calls);
        EXPECT(stopping.reentry_status == FB_ERROR_INVALID_ARGUMENT, "%s: a call from the callback gave %s", name,
               fb_status_name(stopping.reentry_status));
    }

    /* A band lower than one tile row is refused. */
    if (tile_rows > 2) {
        image low = image_make(format, width, 2, 0);
        bands ignored = {&low, &whole, 0, 0, 0, 0, NULL, FB_OK};
        fb_status status = fb_codec_decode_rows(codec, compressed, used, height, &low.image, on_band, &ignored, &last_error);
        EXPECT(status == FB_ERROR_INVALID_ARGUMENT && ignored.calls == 0, "%s: low band gave %s", name, fb_status_name(status));
        image_free(&low);
    }

    /* Too small a destination. */
    uint64_t ignored_used = 0;
    fb_status status = fb_codec_compress(codec, &source.image, compressed, used - 1, &ignored_used, &last_error);
    EXPECT(status == FB_ERROR_BUFFER_TOO_SMALL, "%s: small capacity gave %s", name, fb_status_name(status));
    CHECK_OK(fb_codec_compress(codec, &source.image, compressed, capacity, &used, &last_error));

    /* Damage: every byte of the payload flipped in turn would take long; flip a spread of them. Each must give
     * an error or (for a flipped sample bit the checksums catch) never a crash; a header byte must be refused. */
    uint8_t *damaged = malloc(used);
    for (uint64_t position = 0; position < used; position += used / 61 + 1) {
        memcpy(damaged, compressed, used);
        damaged[position] ^= 0x5A;
        status = fb_codec_decompress(codec, damaged, used, &output.image, &last_error);
        EXPECT(status == FB_ERROR_CORRUPT_DATA || status == FB_ERROR_UNSUPPORTED_VERSION || status == FB_ERROR_FORMAT_MISMATCH,
               "%s: byte %llu flipped gave %s", name, (unsigned long long)position, fb_status_name(status));
        bands ignored = {&band, &whole, 0, 0, 0, 0, NULL, FB_OK};
        status = fb_codec_decode_rows(codec, damaged, used, height, &band.image, on_band, &ignored, &last_error);
        EXPECT(status != FB_OK, "%s: byte %llu flipped decoded by rows", name, (unsigned long long)position);
    }
    /* Truncated: the header claims more than was given. */
    status = fb_codec_decompress(codec, compressed, used / 2, &output.image, &last_error);
    EXPECT(status == FB_ERROR_CORRUPT_DATA, "%s: truncated gave %s", name, fb_status_name(status));
    /* Garbage. */
    memset(damaged, 0xFF, used);
    status = fb_codec_decompress(codec, damaged, used, &output.image, &last_error);
    EXPECT(status == FB_ERROR_CORRUPT_DATA, "%s: garbage gave %s", name, fb_status_name(status));
    /* Another size than the data's. */
    image other = image_make(format, width + 2, height, 0);
    status = fb_codec_decompress(codec, compressed, used, &other.image, &last_error);
    EXPECT(status == FB_ERROR_FORMAT_MISMATCH || status == FB_ERROR_CORRUPT_DATA, "%s: wrong size gave %s", name,
           fb_status_name(status));
    image_free(&other);
    /* The intact data still decodes after all that (no state left behind). */
    CHECK_OK(fb_codec_decompress(codec, compressed, used, &output.image, &last_error));
    EXPECT(differences(&source, 0, &output, 0, height) == 0, "%s: decompressed bytes differ after damage", name);

    printf("ok %s used=%llu raw=%llu\n", name, (unsigned long long)used,
           (unsigned long long)(source.row_bytes[0] * source.rows[0] + source.row_bytes[1] * source.rows[1]));
    free(damaged);
    free(compressed);
    image_free(&source);
    image_free(&output);
    image_free(&output2);
    image_free(&band);
    image_free(&whole);
}

/* Makes a codec with these options; returns its status, with the message in `error`. */
static fb_status create_with(uint32_t threads, uint32_t tile_width, uint32_t tile_height, uint32_t reserved,
                             fb_codec **codec, fb_error *error) {
    fb_codec_options options;
    memset(&options, 0x5A, sizeof options);
    fb_codec_options_init(&options);
    options.thread_count = threads;
    options.tile_width = tile_width;
    options.tile_height = tile_height;
    options.reserved[3] = reserved;
    *codec = NULL;
    return fb_codec_create_with_options(&options, codec, error);
}

/* Every tile size no image could use is refused at creation with FB_ERROR_INVALID_ARGUMENT and a message, and
 * nothing is made; the edges of what is valid are accepted. */
static void refuses_invalid_options(void) {
    const struct {
        uint32_t threads, width, height, reserved;
        fb_status expected;
    } cases[] = {
        {1, 3, 64, 0, FB_ERROR_INVALID_ARGUMENT},          /* odd width */
        {1, 64, 5, 0, FB_ERROR_INVALID_ARGUMENT},          /* odd height */
        {1, 1, 2, 0, FB_ERROR_INVALID_ARGUMENT},           /* below 2 */
        {1, 2, 1, 0, FB_ERROR_INVALID_ARGUMENT},           /* below 2 */
        {1, 0, 1, 0, FB_ERROR_INVALID_ARGUMENT},           /* below 2, with a full width */
        {1, 4097, 0, 0, FB_ERROR_INVALID_ARGUMENT},        /* odd, with the default height */
        {1, 4096, 1026, 0, FB_ERROR_INVALID_ARGUMENT},     /* 2^22 + 8192 pixels */
        {1, 4096, 2048, 0, FB_ERROR_INVALID_ARGUMENT},     /* 2^23 pixels */
        {1, UINT32_MAX - 1, UINT32_MAX - 1, 0, FB_ERROR_INVALID_ARGUMENT}, /* the product overflows 32 bits */
        {1, UINT32_MAX, 2, 0, FB_ERROR_INVALID_ARGUMENT},  /* odd and huge */
        {257, 0, 0, 0, FB_ERROR_INVALID_ARGUMENT},         /* too many threads */
        {1, 0, 0, 1, FB_ERROR_INVALID_ARGUMENT},           /* a reserved field set */
        {1, 4096, 1024, 0, FB_OK},                         /* exactly 2^22 */
        {1, 2, 2, 0, FB_OK},                               /* the smallest */
        {1, 0, 1u << 30, 0, FB_OK},                        /* full width, clamped per image */
        {256, 0, 0, 0, FB_OK},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fb_codec *codec = NULL;
        fb_error error;
        memset(&error, 0, sizeof error);
        fb_status status = create_with(cases[i].threads, cases[i].width, cases[i].height, cases[i].reserved, &codec,
                                       &error);
        EXPECT(status == cases[i].expected, "options %u threads %ux%u reserved %u gave %s", cases[i].threads,
               cases[i].width, cases[i].height, cases[i].reserved, fb_status_name(status));
        if (cases[i].expected != FB_OK) {
            EXPECT(error.code == FB_ERROR_INVALID_ARGUMENT && error.message[0] != 0 && codec == NULL,
                   "options %ux%u: code %d message \"%s\"", cases[i].width, cases[i].height, error.code,
                   error.message);
        } else {
            EXPECT(codec != NULL, "options %ux%u: no codec", cases[i].width, cases[i].height);
        }
        if (status == FB_OK) fb_codec_destroy(codec);
    }
    /* The effort: FB_CODEC_EFFORT_FAST (the default) and FB_CODEC_EFFORT_BEST are made, any other value refused. */
    const uint32_t efforts[] = {FB_CODEC_EFFORT_FAST, FB_CODEC_EFFORT_BEST, 2, UINT32_MAX};
    for (size_t i = 0; i < sizeof efforts / sizeof efforts[0]; i++) {
        fb_codec_options options;
        fb_codec_options_init(&options);
        options.thread_count = 1;
        options.effort = efforts[i];
        fb_codec *codec = NULL;
        fb_error error;
        memset(&error, 0, sizeof error);
        const fb_status status = fb_codec_create_with_options(&options, &codec, &error);
        const fb_status expected = efforts[i] <= FB_CODEC_EFFORT_BEST ? FB_OK : FB_ERROR_INVALID_ARGUMENT;
        EXPECT(status == expected, "effort %u gave %s", efforts[i], fb_status_name(status));
        EXPECT((codec != NULL) == (status == FB_OK), "effort %u: codec %p", efforts[i], (void *)codec);
        if (status == FB_OK) fb_codec_destroy(codec);
    }
    fb_codec *codec = NULL;
    EXPECT(fb_codec_create_with_options(NULL, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "NULL out_codec");
    /* NULL options: the defaults. */
    CHECK_OK(fb_codec_create_with_options(NULL, &codec, &last_error));
    fb_codec_destroy(codec);
    uint64_t size = 0;
    EXPECT(fb_codec_compressed_capacity(NULL, FB_FORMAT_420V, 64, 64, &size, NULL) == FB_ERROR_INVALID_ARGUMENT,
           "capacity of NULL codec");
    fb_codec_options_init(NULL);
    fb_codec_options defaults;
    memset(&defaults, 0xFF, sizeof defaults);
    fb_codec_options_init(&defaults);
    fb_codec_options zero;
    memset(&zero, 0, sizeof zero);
    EXPECT(memcmp(&defaults, &zero, sizeof zero) == 0, "fb_codec_options_init leaves something not 0");
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 5) {
        fprintf(stderr, "usage: codec WIDTH HEIGHT [TILE_WIDTH TILE_HEIGHT]\n");
        return 64;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    const uint32_t width = (uint32_t)strtoul(argv[1], NULL, 10);
    const uint32_t height = (uint32_t)strtoul(argv[2], NULL, 10);
    tiles tile = {0, 0, 0, 0};
    fb_codec *codec = NULL;
    if (argc == 5) {
        tile.width = (uint32_t)strtoul(argv[3], NULL, 10);
        tile.height = (uint32_t)strtoul(argv[4], NULL, 10);
        fb_codec_options options;
        fb_codec_options_init(&options);
        options.thread_count = 2;
        options.tile_width = tile.width;
        options.tile_height = tile.height;
        CHECK_OK(fb_codec_create_with_options(&options, &codec, &last_error));
    } else {
        CHECK_OK(fb_codec_create(2, &codec, &last_error));
    }
    /* docs/COMPRESSED-LAYOUT.md section 4: each side clamped to the image's, rounded up to even. */
    const uint32_t even_width = (width + 1) & ~1u, even_height = (height + 1) & ~1u;
    tile.expected_width = tile.width == 0 || tile.width > even_width ? even_width : tile.width;
    const uint32_t asked_height = tile.height == 0 ? 64 : tile.height;
    tile.expected_height = asked_height > even_height ? even_height : asked_height;

    const struct {
        uint32_t format;
        const char *name;
    } formats[] = {{FB_FORMAT_420V, "420v"}, {FB_FORMAT_420F, "420f"}, {FB_FORMAT_X420, "x420"},
                   {FB_FORMAT_XF20, "xf20"}, {FB_FORMAT_BGRA, "BGRA"}};
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        round_trip(codec, &tile, formats[i].format, formats[i].name, width, height);
    }

    /* Arguments. */
    image source = image_make(FB_FORMAT_420V, width, height, 0);
    uint8_t bytes[64] = {0};
    uint64_t used = 0;
    fb_error error;
    memset(&error, 0, sizeof error);
    EXPECT(fb_codec_compress(NULL, &source.image, bytes, sizeof bytes, &used, &error) == FB_ERROR_INVALID_ARGUMENT &&
               error.code == FB_ERROR_INVALID_ARGUMENT && error.message[0] != 0,
           "NULL codec");
    EXPECT(fb_codec_compress(codec, NULL, bytes, sizeof bytes, &used, NULL) == FB_ERROR_INVALID_ARGUMENT, "NULL source");
    EXPECT(fb_codec_compress(codec, &source.image, NULL, 0, &used, NULL) == FB_ERROR_INVALID_ARGUMENT, "NULL destination");
    EXPECT(fb_codec_decompress(codec, NULL, 10, &source.image, NULL) == FB_ERROR_INVALID_ARGUMENT, "NULL source");
    EXPECT(fb_codec_decompress(codec, bytes, 0, &source.image, NULL) == FB_ERROR_INVALID_ARGUMENT, "empty source");
    EXPECT(fb_codec_decompress(codec, bytes, sizeof bytes, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "NULL destination");
    EXPECT(fb_codec_decode_rows(codec, bytes, sizeof bytes, height, &source.image, NULL, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT,
           "NULL callback");
    image odd = image_make(FB_FORMAT_420V, width, height, 0);
    odd.image.width = width - 1;
    EXPECT(fb_codec_compress(codec, &odd.image, bytes, sizeof bytes, &used, NULL) == FB_ERROR_INVALID_ARGUMENT, "odd width");
    odd.image.width = width;
    odd.image.format = FB_FOURCC('n', 'o', 'p', 'e');
    EXPECT(fb_codec_compress(codec, &odd.image, bytes, sizeof bytes, &used, NULL) == FB_ERROR_FORMAT_MISMATCH, "unknown format");
    odd.image.format = FB_FORMAT_COMPRESSED_420V;
    EXPECT(fb_codec_compress(codec, &odd.image, bytes, sizeof bytes, &used, NULL) == FB_ERROR_FORMAT_MISMATCH, "compressed source");
    odd.image.format = FB_FORMAT_420V;
    void *odd_chroma = odd.image.planes[1].data;
    odd.image.planes[1].data = NULL;
    EXPECT(fb_codec_compress(codec, &odd.image, bytes, sizeof bytes, &used, NULL) == FB_ERROR_INVALID_ARGUMENT, "NULL plane");
    odd.image.planes[1].data = odd_chroma;
    odd.image.planes[0].bytes_per_row = 1;
    EXPECT(fb_codec_compress(codec, &odd.image, bytes, sizeof bytes, &used, NULL) == FB_ERROR_INVALID_ARGUMENT, "short rows");
    odd.image.planes[0].bytes_per_row = UINT64_MAX / 2;
    EXPECT(fb_codec_compress(codec, &odd.image, bytes, sizeof bytes, &used, NULL) == FB_ERROR_INVALID_ARGUMENT, "huge stride");
    uint64_t size = 0;
    EXPECT(fb_codec_maximum_compressed_size(FB_FORMAT_420V, 0, 0, &size, NULL) == FB_ERROR_INVALID_ARGUMENT, "zero size");
    EXPECT(fb_codec_maximum_compressed_size(FB_FORMAT_420V, 1u << 31, 2, &size, NULL) == FB_ERROR_INVALID_ARGUMENT, "huge size");
    EXPECT(fb_codec_create(1, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "NULL out_codec");
    refuses_invalid_options();
    fb_codec_destroy(NULL);
    image_free(&source);
    image_free(&odd);
    fb_codec_destroy(codec);
    printf("failures=%d\n", failures);
    return failures == 0 ? 0 : 1;
}
