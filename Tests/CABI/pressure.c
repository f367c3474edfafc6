/* A C subscriber that asks for the publisher's system pressure (FB_SUBSCRIBER_SYSTEM_PRESSURE).
 *
 * usage: pressure PATH MODE
 *
 * MODE "flag": created with FB_SUBSCRIBER_SYSTEM_PRESSURE; runs until a pressure event at serious or above with
 *              the bus factor arrives (the publisher of the test forces that through its real monitor), at most 120 s.
 * MODE "none": created without the flag; takes 60 frames and checks that no pressure event came (an old caller
 *              never sees one).
 * Prints one line per event:
 *   abi event_size=N union_offset=N session_offset=N unknown_flag=NAME
 *   connected format=F
 *   pressure level=L factors=F cost_known=0|1 duration_ns=N shed=N
 *   frames count=N pressure_events=N
 *   end status=NAME
 * Exits 0 when the mode's condition was met, 1 when not, 2 on an API error.
 */
#include <stddef.h>
#include <time.h>

#include "common.h"

/* fb_event's layout is that of ABI version 2 before library 0.7.0: the pressure payload shares fb_drop's storage, so
 * an fb_event of an older program is as big as the library's. */
_Static_assert(sizeof(fb_system_pressure) == 32, "fb_system_pressure fits fb_drop's storage");
_Static_assert(sizeof(fb_system_pressure) <= sizeof(fb_drop), "fb_system_pressure fits fb_drop's storage");
_Static_assert(offsetof(fb_event, drop) == 16, "fb_event.drop where ABI version 2 put it");
_Static_assert(offsetof(fb_event, system_pressure) == offsetof(fb_event, drop), "the union's members overlap");
_Static_assert(offsetof(fb_event, session) == 48, "fb_event.session where ABI version 2 put it");
_Static_assert(sizeof(fb_event) == 336, "fb_event's size is that of ABI version 2");

static double now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: pressure PATH flag|none\n");
        return 2;
    }
    int with_flag = strcmp(argv[2], "flag") == 0;
    uint32_t formats[] = {FB_FORMAT_420V};
    fb_subscriber_options options;
    fb_subscriber_options_init(&options);
    options.path = argv[1];
    options.accepted_formats = formats;
    options.accepted_format_count = 1;

    /* An unknown flag bit is still refused, with the new one beside it. */
    fb_subscriber *refused = NULL;
    fb_error error;
    fb_status unknown = fb_subscriber_create_with_flags(&options, FB_SUBSCRIBER_SYSTEM_PRESSURE | 4u, &refused, &error);
    printf("abi event_size=%zu union_offset=%zu session_offset=%zu unknown_flag=%s\n", sizeof(fb_event),
           offsetof(fb_event, system_pressure), offsetof(fb_event, session), fb_status_name(unknown));
    if (refused != NULL) fb_subscriber_destroy(refused);

    fb_subscriber *subscriber = NULL;
    CHECK_OK(fb_subscriber_create_with_flags(&options, with_flag ? FB_SUBSCRIBER_SYSTEM_PRESSURE : 0, &subscriber,
                                             &last_error));
    uint64_t frames = 0, pressure_events = 0;
    int met = 0;
    double deadline = now_seconds() + 120;
    while (!met && now_seconds() < deadline) {
        fb_event event;
        fb_status status = fb_subscriber_next_event(subscriber, 250000000, &event, &error);
        if (status == FB_ERROR_TIMED_OUT) continue;
        if (status != FB_OK) {
            fprintf(stderr, "fb_subscriber_next_event: %s: %s\n", fb_status_name(status), error.message);
            break;
        }
        switch (event.type) {
        case FB_EVENT_CONNECTED:
            printf("connected format=%08x\n", event.session.format);
            break;
        case FB_EVENT_FRAME:
            fb_frame_release(event.frame);
            frames++;
            if (!with_flag && frames >= 60) met = 1;
            break;
        case FB_EVENT_SYSTEM_PRESSURE: {
            const fb_system_pressure *pressure = &event.system_pressure;
            pressure_events++;
            printf("pressure level=%u factors=%u cost_known=%d duration_ns=%lld shed=%llu\n", pressure->level,
                   pressure->factors, pressure->cost >= 0, (long long)pressure->frame_duration_ns,
                   (unsigned long long)pressure->frames_shed);
            if (with_flag && pressure->level >= FB_PRESSURE_SERIOUS && (pressure->factors & FB_PRESSURE_FACTOR_BUS))
                met = 1;
            break;
        }
        case FB_EVENT_END:
            printf("end status=%s\n", fb_status_name(event.end_status));
            deadline = 0;
            break;
        default:
            break;
        }
        fflush(stdout);
    }
    printf("frames count=%llu pressure_events=%llu\n", (unsigned long long)frames, (unsigned long long)pressure_events);
    fb_subscriber_destroy(subscriber);
    if (!with_flag && pressure_events != 0) return 1;
    return met ? 0 : 1;
}
