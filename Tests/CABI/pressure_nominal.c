/* A C subscriber that sees the publisher's system pressure rise and come back down to nominal.
 *
 * usage: pressure_nominal PATH
 *
 * The publisher is FrameBusTestPeer's `bus-publisher --bus-pressure-pulse S`: its real monitor sees real cost far
 * above the frame interval for S seconds, then far below it. Created with FB_SUBSCRIBER_SYSTEM_PRESSURE, this runs
 * until a pressure event at nominal follows one at serious or above with the bus factor, at most 60 s, releasing
 * every frame. Prints one line per pressure event, then a summary:
 *   pressure level=L factors=F
 *   done frames=N pressure_events=N peak=L
 * Exits 0 when the level rose to serious or above and came back to nominal, 1 when not, 2 on an API error.
 */
#include <time.h>

#include "common.h"

static double now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: pressure_nominal PATH\n");
        return 2;
    }
    uint32_t formats[] = {FB_FORMAT_420V};
    fb_subscriber_options options;
    fb_subscriber_options_init(&options);
    options.path = argv[1];
    options.accepted_formats = formats;
    options.accepted_format_count = 1;
    fb_subscriber *subscriber = NULL;
    CHECK_OK(fb_subscriber_create_with_flags(&options, FB_SUBSCRIBER_SYSTEM_PRESSURE, &subscriber, &last_error));

    uint64_t frames = 0, pressure_events = 0;
    uint32_t peak = FB_PRESSURE_NOMINAL;
    int returned = 0;
    double deadline = now_seconds() + 60;
    while (!returned && now_seconds() < deadline) {
        fb_event event;
        fb_error error;
        fb_status status = fb_subscriber_next_event(subscriber, 250000000, &event, &error);
        if (status == FB_ERROR_TIMED_OUT) continue;
        if (status != FB_OK) {
            fprintf(stderr, "fb_subscriber_next_event: %s: %s\n", fb_status_name(status), error.message);
            break;
        }
        if (event.type == FB_EVENT_FRAME) {
            fb_frame_release(event.frame);
            frames++;
        } else if (event.type == FB_EVENT_SYSTEM_PRESSURE) {
            const fb_system_pressure *pressure = &event.system_pressure;
            pressure_events++;
            printf("pressure level=%u factors=%u\n", pressure->level, pressure->factors);
            fflush(stdout);
            if (pressure->level >= FB_PRESSURE_SERIOUS && (pressure->factors & FB_PRESSURE_FACTOR_BUS) &&
                pressure->level > peak)
                peak = pressure->level;
            if (peak >= FB_PRESSURE_SERIOUS && pressure->level == FB_PRESSURE_NOMINAL) returned = 1;
        } else if (event.type == FB_EVENT_END) {
            printf("end status=%s\n", fb_status_name(event.end_status));
            break;
        }
    }
    printf("done frames=%llu pressure_events=%llu peak=%u\n", (unsigned long long)frames,
           (unsigned long long)pressure_events, peak);
    fb_subscriber_destroy(subscriber);
    return returned ? 0 : 1;
}
