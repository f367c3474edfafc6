/* A C subscriber with a size policy of its own (fb_subscriber_create_with_limit, docs/PROTOCOL.md section 8.2).
 *
 * usage: sizelimit PATH ACCEPT WIDTH HEIGHT   (WIDTH 0: fb_subscriber_create, the default limit;
 *                                              WIDTH -1: fb_subscriber_create_with_limit with a NULL limit)
 *
 * Checks that a limit out of range is refused (FB_ERROR_INVALID_ARGUMENT), then subscribes and prints per frame
 * "frame seq=S width=W height=H", and at the end "end status=STATUS message=...". Exits 0 after the end.
 */
#include "common.h"

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: sizelimit PATH ACCEPT WIDTH HEIGHT\n");
        return 64;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint32_t accept[1] = {fourcc_from_string(argv[2])};
    fb_subscriber_options options;
    fb_subscriber_options_init(&options);
    options.path = argv[1];
    options.accepted_formats = accept;
    options.accepted_format_count = 1;
    options.queue_depth = 4;
    options.connect_timeout_ns = 120000000000LL;
    fb_error error;
    fb_subscriber *subscriber = NULL;

    fb_frame_size_limit wrong = {0, 100, 0};
    if (fb_subscriber_create_with_limit(&options, 0, &wrong, &subscriber, &error) != FB_ERROR_INVALID_ARGUMENT) {
        printf("FAIL a zero width was accepted\n");
        return 1;
    }
    fb_frame_size_limit fine = {64, 64, 0};
    if (fb_subscriber_create_with_limit(&options, 0x80u, &fine, &subscriber, &error) != FB_ERROR_INVALID_ARGUMENT) {
        printf("FAIL an unknown flag was accepted\n");
        return 1;
    }
    long width = strtol(argv[3], NULL, 10);
    fb_frame_size_limit limit = {(uint32_t)width, (uint32_t)strtoul(argv[4], NULL, 10), 0};
    fb_status created = width == 0 ? fb_subscriber_create(&options, &subscriber, &error)
                        : width < 0 ? fb_subscriber_create_with_limit(&options, 0, NULL, &subscriber, &error)
                                    : fb_subscriber_create_with_limit(&options, 0, &limit, &subscriber, &error);
    CHECK_OK(created);
    for (fb_event event; fb_subscriber_next_event(subscriber, 120000000000LL, &event, &error) == FB_OK;) {
        if (event.type == FB_EVENT_END) {
            printf("end status=%s message=%s\n", fb_status_name(event.end_status), event.end_message);
            break;
        }
        if (event.type != FB_EVENT_FRAME) continue;
        fb_frame_info info;
        CHECK_OK(fb_frame_get_info(event.frame, &info, &last_error));
        printf("frame seq=%llu width=%u height=%u\n", (unsigned long long)info.sequence, info.width, info.height);
        fb_frame_release(event.frame);
    }
    fb_subscriber_destroy(subscriber);
    return 0;
}
