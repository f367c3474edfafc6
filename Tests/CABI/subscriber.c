/* A C subscriber for the cross-process tests.
 *
 * usage: subscriber PATH ACCEPT QUEUE_DEPTH HOLD [async] [slice]
 *
 * ACCEPT: comma-separated FourCCs ("420v" or "&8v0,420v"). QUEUE_DEPTH 0 is latest-only. The first HOLD frames
 * are kept until the stream ends and then released from another thread; the others are released at once, or with
 * "async" by a second thread while this one goes on receiving (as GStreamer frees buffers). "slice" sets
 * wait_slice_us to 100 (the waiting thread asks for a short scheduler slice).
 * Every frame is checked byte for byte against the known pattern (a compressed frame after fb_codec_decompress,
 * and again band by band with fb_codec_decode_rows), and its descriptor is mapped to check the planes' offsets.
 * Prints one line per event:
 *   connected format=F max_held=N
 *   frame seq=S k=K ok=0|1 hash=H disc=0|1 color=P,T,M,C pts_ns=N duration_ns=N fd=0|1 bands=0|1
 *   drop reason=R first=F last=L count=C
 *   end status=NAME
 *   closed                                (next_event after the end returned FB_ERROR_CLOSED)
 *   stats delivered=D late=L out=O disc=C held=H
 *   latency frames=N p50_us=.. p99_us=.. max_us=.. library_p50_us=..   (publish stamp to the return of
 *           fb_subscriber_next_event, and the library's own publish-to-take median, for comparison)
 * Exits 0 when every frame matched and the stream ended, 1 if a frame did not match, 2 on an API error, 3 if the
 * stream did not end within 60 s.
 */
#include <pthread.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static fb_codec *codec;

/* Counts the payload bytes of plane `p` that differ from frame k's pattern. */
static uint64_t mismatches(uint64_t k, uint32_t p, const uint8_t *data, uint64_t bytes_per_row, uint64_t row_bytes,
                           uint32_t first_row, uint32_t rows) {
    uint64_t bad = 0;
    for (uint32_t y = 0; y < rows; y++) {
        const uint8_t *row = data + (uint64_t)y * bytes_per_row;
        for (uint64_t x = 0; x < row_bytes; x++) bad += row[x] != pattern_byte(k, p, first_row + y, (uint32_t)x);
    }
    return bad;
}

/* A decoded image in private memory, rows padded by 24 bytes so strides differ from the publisher's. */
typedef struct decoded {
    fb_image image;
    uint64_t row_bytes[FB_MAX_PLANES];
    uint32_t rows[FB_MAX_PLANES];
    uint32_t plane_count;
    uint32_t vertical_subsampling[FB_MAX_PLANES];
} decoded;

static void decoded_make(decoded *out, uint32_t format, uint32_t width, uint32_t height) {
    fb_format_info format_info;
    CHECK_OK(fb_format_get_info(format, &format_info, &last_error));
    memset(out, 0, sizeof *out);
    out->image.format = format_info.base_format;
    out->image.width = width;
    out->image.height = height;
    fb_format_info base_info;
    CHECK_OK(fb_format_get_info(format_info.base_format, &base_info, &last_error));
    out->plane_count = base_info.plane_count;
    for (uint32_t p = 0; p < base_info.plane_count; p++) {
        out->row_bytes[p] = (uint64_t)(width / base_info.horizontal_subsampling[p]) * base_info.bytes_per_element[p];
        out->rows[p] = height / base_info.vertical_subsampling[p];
        out->vertical_subsampling[p] = base_info.vertical_subsampling[p];
        out->image.planes[p].bytes_per_row = out->row_bytes[p] + 24;
        out->image.planes[p].data = calloc(out->rows[p], out->row_bytes[p] + 24);
    }
}

static void decoded_free(decoded *image) {
    for (uint32_t p = 0; p < image->plane_count; p++) free(image->image.planes[p].data);
}

typedef struct band_check {
    decoded *band;
    uint64_t k;
    uint64_t bad;
    uint32_t next_row;
    uint32_t calls;
} band_check;

static int32_t on_band(void *context, uint32_t first_row, uint32_t row_count) {
    band_check *check = context;
    if (first_row != check->next_row) check->bad++;
    check->next_row = first_row + row_count;
    check->calls++;
    for (uint32_t p = 0; p < check->band->plane_count; p++) {
        const uint32_t sub = check->band->vertical_subsampling[p];
        check->bad += mismatches(check->k, p, check->band->image.planes[p].data, check->band->image.planes[p].bytes_per_row,
                                 check->band->row_bytes[p], first_row / sub, (row_count + sub - 1) / sub);
    }
    return 0;
}

/* Maps the frame's descriptor and compares it with the pointers the library gave. */
static int descriptor_matches(const fb_frame *frame, const fb_frame_info *info) {
    int fd = fb_frame_dup_fd(frame, &last_error);
    if (fd < 0) {
        fprintf(stderr, "fb_frame_dup_fd: %s\n", last_error.message);
        return 0;
    }
    struct stat status;
    int ok = fstat(fd, &status) == 0 && (uint64_t)status.st_size >= info->allocation_size;
    void *mapping = ok ? mmap(NULL, info->allocation_size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (mapping == MAP_FAILED) ok = 0;
    if (ok && info->plane_count == 0) {
        ok = memcmp(mapping, info->compressed_data, info->bytes_used) == 0;
    }
    for (uint32_t p = 0; ok && p < info->plane_count; p++) {
        ok = memcmp((const uint8_t *)mapping + info->planes[p].offset, info->planes[p].data, info->planes[p].byte_count) == 0;
    }
    /* The descriptor is read-only: a writable mapping must be refused. */
    void *writable = mmap(NULL, info->allocation_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (writable != MAP_FAILED) {
        ok = 0;
        munmap(writable, info->allocation_size);
    }
    if (mapping != MAP_FAILED) munmap(mapping, info->allocation_size);
    close(fd);
    return ok;
}

static int check_frame(const fb_frame *frame, const fb_frame_info *info, uint64_t k, uint64_t *hash_out, int *bands_ok) {
    uint64_t bad = 0;
    uint64_t hash = HASH_SEED;
    *bands_ok = 1;
    if (info->plane_count > 0) {
        for (uint32_t p = 0; p < info->plane_count; p++) {
            const fb_plane *plane = &info->planes[p];
            const uint64_t row_bytes = (uint64_t)plane->width * plane->bytes_per_element;
            bad += mismatches(k, p, plane->data, plane->bytes_per_row, row_bytes, 0, plane->height);
            hash = hash_rows(hash, plane->data, plane->bytes_per_row, row_bytes, plane->height);
        }
    } else {
        decoded image;
        decoded_make(&image, info->format, info->width, info->height);
        CHECK_OK(fb_codec_decompress(codec, info->compressed_data, info->bytes_used, &image.image, &last_error));
        for (uint32_t p = 0; p < image.plane_count; p++) {
            bad += mismatches(k, p, image.image.planes[p].data, image.image.planes[p].bytes_per_row, image.row_bytes[p], 0,
                              image.rows[p]);
            hash = hash_rows(hash, image.image.planes[p].data, image.image.planes[p].bytes_per_row, image.row_bytes[p],
                             image.rows[p]);
        }
        decoded_free(&image);

        /* Band by band: two tile rows at a time. */
        uint32_t tile_rows = 0;
        CHECK_OK(fb_codec_tile_row_height(codec, info->compressed_data, info->bytes_used, info->format, info->width,
                                          info->height, &tile_rows, &last_error));
        uint32_t band_rows = tile_rows * 2 < info->height ? tile_rows * 2 : info->height;
        decoded band;
        decoded_make(&band, info->format, info->width, band_rows);
        band_check check = {&band, k, 0, 0, 0};
        CHECK_OK(fb_codec_decode_rows(codec, info->compressed_data, info->bytes_used, info->height, &band.image, on_band,
                                      &check, &last_error));
        *bands_ok = check.bad == 0 && check.next_row == info->height && check.calls > 0;
        decoded_free(&band);
    }
    *hash_out = hash;
    (void)frame;
    return bad == 0;
}

static uint64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static int compare_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Publish-to-C latencies (the publisher's CLOCK_MONOTONIC stamp to the return of fb_subscriber_next_event). */
static uint64_t latencies[100000];
static size_t latency_count;

typedef struct held_frames {
    fb_frame **frames;
    size_t count;
} held_frames;

/* Releases the frames whose pointers arrive through a pipe, until it closes. */
static void *release_from_pipe(void *argument) {
    const int fd = *(int *)argument;
    fb_frame *frame;
    for (;;) {
        ssize_t got = read(fd, &frame, sizeof frame);
        if (got == (ssize_t)sizeof frame) {
            fb_frame_release(frame);
        } else if (got < 0 && errno == EINTR) {
            continue;
        } else {
            break;
        }
    }
    return NULL;
}

static void *release_all(void *argument) {
    held_frames *held = argument;
    for (size_t i = 0; i < held->count; i++) fb_frame_release(held->frames[i]);
    return NULL;
}

int main(int argc, char **argv) {
    int releases_async = 0, asks_slice = 0, bad_usage = argc < 5;
    for (int i = 5; i < argc; i++) {
        if (strcmp(argv[i], "async") == 0) releases_async = 1;
        else if (strcmp(argv[i], "slice") == 0) asks_slice = 1;
        else bad_usage = 1;
    }
    if (bad_usage) {
        fprintf(stderr, "usage: subscriber PATH ACCEPT QUEUE_DEPTH HOLD [async] [slice]\n");
        return 64;
    }
    int release_pipe[2] = {-1, -1};
    pthread_t async_releaser;
    if (releases_async) {
        if (pipe(release_pipe) != 0) return 2;
        pthread_create(&async_releaser, NULL, release_from_pipe, &release_pipe[0]);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint32_t accepted[16];
    size_t accepted_count = 0;
    for (char *token = strtok(argv[2], ","); token != NULL && accepted_count < 16; token = strtok(NULL, ",")) {
        accepted[accepted_count++] = fourcc_from_string(token);
    }
    fb_subscriber_options options;
    fb_subscriber_options_init(&options);
    options.path = argv[1];
    options.accepted_formats = accepted;
    options.accepted_format_count = accepted_count;
    options.queue_depth = (uint32_t)strtoul(argv[3], NULL, 10);
    options.connect_timeout_ns = 60ll * 1000000000ll;
    options.wait_slice_us = asks_slice ? 100 : 0;
    const size_t hold = strtoul(argv[4], NULL, 10);

    CHECK_OK(fb_codec_create(1, &codec, &last_error));
    fb_subscriber *subscriber = NULL;
    CHECK_OK(fb_subscriber_create(&options, &subscriber, &last_error));

    held_frames held = {calloc(hold + 1, sizeof(fb_frame *)), 0};
    int all_ok = 1, ended = 0;
    for (int polls = 0; polls < 600 && !ended; polls++) {
        fb_event event;
        memset(&last_error, 0, sizeof last_error);
        fb_status status = fb_subscriber_next_event(subscriber, 100000000, &event, &last_error);
        if (status == FB_ERROR_TIMED_OUT) continue;
        CHECK_OK(status);
        polls = 0;
        switch (event.type) {
        case FB_EVENT_CONNECTED:
            printf("connected format=%c%c%c%c max_held=%u granted=%u\n", (char)(event.session.format >> 24),
                   (char)(event.session.format >> 16), (char)(event.session.format >> 8), (char)event.session.format,
                   event.session.maximum_held_frames, event.session.granted_queue_depth);
            break;
        case FB_EVENT_FRAME: {
            const uint64_t received = monotonic_ns();
            fb_frame_info info;
            CHECK_OK(fb_frame_get_info(event.frame, &info, &last_error));
            if (info.publish_time_ns != 0 && received >= info.publish_time_ns && latency_count < 100000) {
                latencies[latency_count++] = received - info.publish_time_ns;
            }
            const uint64_t k = (uint64_t)info.presentation_time.value;
            uint64_t hash = 0;
            int bands_ok = 0;
            const int ok = info.presentation_time.timescale == 30 && check_frame(event.frame, &info, k, &hash, &bands_ok);
            const int fd_ok = descriptor_matches(event.frame, &info);
            all_ok = all_ok && ok && fd_ok && bands_ok;
            printf("frame seq=%llu k=%llu ok=%d hash=%016llx disc=%d color=%u,%u,%u,%u pts_ns=%lld duration_ns=%lld "
                   "fd=%d bands=%d\n",
                   (unsigned long long)info.sequence, (unsigned long long)k, ok, (unsigned long long)hash,
                   (info.flags & FB_FRAME_FLAG_DISCONTINUITY) != 0, info.colorimetry.primaries,
                   info.colorimetry.transfer, info.colorimetry.matrix, info.colorimetry.chroma_location,
                   (long long)info.presentation_time_ns, (long long)info.duration_ns, fd_ok, bands_ok);
            if (held.count < hold) {
                held.frames[held.count++] = event.frame;
            } else if (release_pipe[1] >= 0) {
                if (write(release_pipe[1], &event.frame, sizeof event.frame) != (ssize_t)sizeof event.frame) return 2;
            } else {
                fb_frame_release(event.frame);
            }
            break;
        }
        case FB_EVENT_DROP:
            printf("drop reason=%u first=%llu last=%llu count=%llu\n", event.drop.reason,
                   (unsigned long long)event.drop.first_sequence, (unsigned long long)event.drop.last_sequence,
                   (unsigned long long)event.drop.frame_count);
            break;
        case FB_EVENT_END:
            printf("end status=%s\n", fb_status_name(event.end_status));
            ended = 1;
            break;
        default:
            fprintf(stderr, "unknown event type %u\n", event.type);
            return 2;
        }
    }
    if (!ended) return 3;
    if (release_pipe[1] >= 0) {
        close(release_pipe[1]);
        pthread_join(async_releaser, NULL);
        close(release_pipe[0]);
    }

    /* Frames are released from another thread, as GStreamer frees buffers. */
    pthread_t releaser;
    pthread_create(&releaser, NULL, release_all, &held);
    pthread_join(releaser, NULL);

    fb_event event;
    if (fb_subscriber_next_event(subscriber, 1000000000, &event, NULL) == FB_ERROR_CLOSED) printf("closed\n");
    fb_subscriber_statistics statistics;
    CHECK_OK(fb_subscriber_get_statistics(subscriber, &statistics, &last_error));
    printf("stats delivered=%llu late=%llu out=%llu disc=%llu held=%llu\n", (unsigned long long)statistics.delivered,
           (unsigned long long)statistics.dropped_frame_was_late, (unsigned long long)statistics.dropped_out_of_buffers,
           (unsigned long long)statistics.dropped_discontinuity, (unsigned long long)statistics.held_now);
    if (latency_count > 0) {
        qsort(latencies, latency_count, sizeof latencies[0], compare_u64);
        printf("latency frames=%zu p50_us=%.1f p99_us=%.1f max_us=%.1f library_p50_us=%.1f\n", latency_count,
               latencies[latency_count / 2] / 1e3, latencies[latency_count * 99 / 100] / 1e3,
               latencies[latency_count - 1] / 1e3, statistics.latency_p50_ns / 1e3);
    }
    fb_subscriber_destroy(subscriber);
    fb_codec_destroy(codec);
    free(held.frames);
    return all_ok ? 0 : 1;
}
