/* A C publisher for the cross-process tests.
 *
 * usage: publisher PATH FORMAT WIDTH HEIGHT FRAMES SUBSCRIBERS INTERVAL_US
 *
 * Waits (up to 60 s) for SUBSCRIBERS subscribers, then publishes FRAMES frames of the known pattern, frame k with
 * presentation time k/30 s, duration 1/30 s and BT.709 colour, one every INTERVAL_US microseconds. Halfway it
 * reports two frames lost upstream (a discontinuity drop). Prints one line per event:
 *   published k=K seq=S hash=H       (H: FNV-1a of the rows written)
 *   outofbuffers k=K                 (no pool buffer became free within 20 ms; the frame was reported dropped)
 *   reported first=F last=L          (the discontinuity drop)
 *   stats published=P delivered=D held=H subscribers=N
 * then stops the publisher (subscribers get END_OF_STREAM) and prints "done".
 */
#include <unistd.h>

#include "common.h"

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: publisher PATH FORMAT WIDTH HEIGHT FRAMES SUBSCRIBERS INTERVAL_US\n");
        return 64;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    fb_publisher_options options;
    fb_publisher_options_init(&options);
    options.path = argv[1];
    options.format = fourcc_from_string(argv[2]);
    options.width = (uint32_t)strtoul(argv[3], NULL, 10);
    options.height = (uint32_t)strtoul(argv[4], NULL, 10);
    const uint64_t frames = strtoull(argv[5], NULL, 10);
    const uint64_t subscribers = strtoull(argv[6], NULL, 10);
    const useconds_t interval = (useconds_t)strtoul(argv[7], NULL, 10);

    fb_publisher *publisher = NULL;
    CHECK_OK(fb_publisher_create(&options, &publisher, &last_error));
    printf("listening\n");

    fb_publisher_statistics statistics;
    for (int waited = 0;; waited++) {
        CHECK_OK(fb_publisher_get_statistics(publisher, &statistics, &last_error));
        if (statistics.subscriber_count >= subscribers) break;
        if (waited > 6000) {
            fprintf(stderr, "publisher: no %llu subscribers after 60 s\n", (unsigned long long)subscribers);
            return 3;
        }
        usleep(10000);
    }

    for (uint64_t k = 0; k < frames; k++) {
        if (k == frames / 2) {
            uint64_t first = 0, last = 0;
            CHECK_OK(fb_publisher_report_drops(publisher, FB_DROP_DISCONTINUITY, 2, &first, &last, &last_error));
            printf("reported first=%llu last=%llu\n", (unsigned long long)first, (unsigned long long)last);
        }
        fb_buffer *buffer = NULL;
        memset(&last_error, 0, sizeof last_error);
        fb_status status = fb_publisher_acquire_buffer_timeout(publisher, 20000000, &buffer, &last_error);
        if (status == FB_ERROR_TIMED_OUT) {
            /* Every buffer stayed in use: the frame is lost, and subscribers are told. */
            CHECK_OK(fb_publisher_report_drops(publisher, FB_DROP_OUT_OF_BUFFERS, 1, NULL, NULL, &last_error));
            printf("outofbuffers k=%llu\n", (unsigned long long)k);
            continue;
        }
        CHECK_OK(status);
        fb_buffer_info info;
        CHECK_OK(fb_buffer_get_info(buffer, &info, &last_error));
        uint64_t hash = HASH_SEED;
        for (uint32_t p = 0; p < info.plane_count; p++) {
            const fb_plane *plane = &info.planes[p];
            const uint64_t row_bytes = (uint64_t)plane->width * plane->bytes_per_element;
            for (uint32_t y = 0; y < plane->height; y++) {
                uint8_t *row = plane->data + (uint64_t)y * plane->bytes_per_row;
                for (uint64_t x = 0; x < row_bytes; x++) row[x] = pattern_byte(k, p, y, (uint32_t)x);
            }
            hash = hash_rows(hash, plane->data, plane->bytes_per_row, row_bytes, plane->height);
        }
        fb_publish_info publish;
        memset(&publish, 0, sizeof publish);
        publish.presentation_time = (fb_time){(int64_t)k, 30, FB_TIME_FLAG_VALID};
        publish.duration = (fb_time){1, 30, FB_TIME_FLAG_VALID};
        publish.colorimetry = (fb_colorimetry){1, 1, 1, 1};
        uint64_t sequence = 0;
        CHECK_OK(fb_buffer_publish(buffer, &publish, &sequence, &last_error));
        printf("published k=%llu seq=%llu hash=%016llx\n", (unsigned long long)k, (unsigned long long)sequence,
               (unsigned long long)hash);
        usleep(interval);
    }

    CHECK_OK(fb_publisher_get_statistics(publisher, &statistics, &last_error));
    printf("stats published=%llu delivered=%llu held=%llu subscribers=%llu\n",
           (unsigned long long)statistics.published, (unsigned long long)statistics.delivered,
           (unsigned long long)statistics.held_now, (unsigned long long)statistics.subscriber_count);
    fb_publisher_destroy(publisher);
    printf("done\n");
    return 0;
}
