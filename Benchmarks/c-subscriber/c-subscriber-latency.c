// c-subscriber-latency: the C ABI's receive path, measured. Subscribes to a running publisher (for example
// `framebus publish --fps 1000`), takes FRAMES frames with fb_subscriber_next_event, and prints the latency from
// the publisher's send (fb_frame_info.publish_time_ns, CLOCK_MONOTONIC) to the moment fb_subscriber_next_event
// returned the frame, as p50/p99/max, plus this process's CPU time per frame.
//
//   c-subscriber-latency SOCKET_PATH [FRAMES]
//
// Build: make -C Benchmarks/c-subscriber FRAMEBUS_LIBDIR=<dir of libFrameBusC.so>
#include <framebus.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t nanoseconds(clockid_t clock) {
    struct timespec now;
    clock_gettime(clock, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static int compare(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s SOCKET_PATH [FRAMES]\n", argv[0]);
        return 2;
    }
    const long frames = argc > 2 ? atol(argv[2]) : 2000;
    if (frames <= 0) return 2;
    uint32_t formats[] = {FB_FORMAT_420V, FB_FORMAT_BGRA};
    fb_subscriber_options options;
    fb_subscriber_options_init(&options);
    options.path = argv[1];
    options.accepted_formats = formats;
    options.accepted_format_count = 2;
    fb_subscriber *subscriber = NULL;
    fb_error error;
    if (fb_subscriber_create(&options, &subscriber, &error) != FB_OK) {
        fprintf(stderr, "fb_subscriber_create: %s\n", error.message);
        return 1;
    }
    uint64_t *latencies = calloc((size_t)frames, sizeof(uint64_t));
    long count = 0, dropped = 0, skipped = 0;
    // Drops by reason: latest-only delivery reports the frames it replaced as late (the library's own, never in a
    // DROP message), the others come from the publisher's DROP messages.
    long late = 0, outOfBuffers = 0, discontinuity = 0, workFellBehind = 0;
    uint64_t cpuStart = 0;
    while (count < frames) {
        fb_event event;
        fb_status status = fb_subscriber_next_event(subscriber, 5000000000LL, &event, &error);
        if (status != FB_OK) {
            fprintf(stderr, "fb_subscriber_next_event: %s\n", error.message);
            return 1;
        }
        const uint64_t now = nanoseconds(CLOCK_MONOTONIC);
        if (event.type == FB_EVENT_DROP) {
            const long frames = (long)event.drop.frame_count;
            dropped += frames;
            switch (event.drop.reason) {
            case FB_DROP_FRAME_WAS_LATE: late += frames; break;
            case FB_DROP_OUT_OF_BUFFERS: outOfBuffers += frames; break;
            case FB_DROP_DISCONTINUITY: discontinuity += frames; break;
            case FB_DROP_WORK_FELL_BEHIND: workFellBehind += frames; break;
            }
        }
        if (event.type == FB_EVENT_END) {
            fprintf(stderr, "the stream ended: %s\n", event.end_message);
            return 1;
        }
        if (event.type != FB_EVENT_FRAME) continue;
        fb_frame_info info;
        if (fb_frame_get_info(event.frame, &info, &error) == FB_OK && skipped >= 50 && info.publish_time_ns != 0 &&
            now >= info.publish_time_ns) {
            latencies[count++] = now - info.publish_time_ns;
        } else if (skipped < 50 && ++skipped == 50) {
            cpuStart = nanoseconds(CLOCK_PROCESS_CPUTIME_ID);  // after a warm-up of 50 frames
        }
        fb_frame_release(event.frame);
    }
    const uint64_t cpu = nanoseconds(CLOCK_PROCESS_CPUTIME_ID) - cpuStart;
    qsort(latencies, (size_t)count, sizeof(uint64_t), compare);
    printf("frames %ld  p50 %.1f us  p99 %.1f us  max %.1f us  subscriber CPU %.1f us/frame  dropped %ld  "
           "frameWasLate %ld  outOfBuffers %ld  discontinuity %ld  workFellBehind %ld\n",
           count, latencies[count / 2] / 1e3, latencies[count * 99 / 100] / 1e3, latencies[count - 1] / 1e3,
           cpu / 1e3 / (double)count, dropped, late, outOfBuffers, discontinuity, workFellBehind);
    fb_subscriber_destroy(subscriber);
    free(latencies);
    return 0;
}
