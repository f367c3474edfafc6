/* Time to first frame through the FrameBus C library (the Swift subscriber behind the C interface): prints the
 * CLOCK_MONOTONIC nanoseconds at which the first frame was in hand. Built and run by ttff.py. */
#include <framebus.h>
#include <stdio.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    fb_subscriber_options options;
    fb_subscriber_options_init(&options);
    uint32_t format = 0x34323076; /* '420v' */
    options.path = argv[1];
    options.accepted_formats = &format;
    options.accepted_format_count = 1;
    fb_subscriber *subscriber = NULL;
    fb_error error;
    if (fb_subscriber_create(&options, &subscriber, &error) != FB_OK) return 1;
    fb_event event;
    while (fb_subscriber_next_event(subscriber, 5000000000LL, &event, &error) == FB_OK) {
        if (event.type == FB_EVENT_FRAME) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            printf("%lld\n", (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
            fb_frame_release(event.frame);
            break;
        }
        if (event.type == FB_EVENT_END) break;
    }
    fb_subscriber_destroy(subscriber);
    return 0;
}
