/* A C recorder for the cross-process tests: the fb_recorder interface against a real publisher.
 *
 * usage: recorder PATH OUTPUT COMPRESSED TIMEOUT_S
 *
 * First checks that bad options are refused (a reserved field set, a NULL output path, a queue depth over 64),
 * printing "refused NAME status=S" for each. Then records the stream on PATH into OUTPUT (COMPRESSED 1: the
 * compressed variant) until the stream ends (the publisher stopped) or TIMEOUT_S seconds pass (fb_recorder_wait),
 * stops the recorder and prints its final status:
 *   final accepted=A written=W bytes=B durable=D dropped=N drop1=..drop8= peak=P capacity=C direct=0|1
 *         ended=0|1 closed=0|1 failure=STATUS errno=E
 * then "done". Exit status 0; 2 when an fb_ call that must succeed failed (CHECK_OK).
 */
#include "common.h"

static void refused(const char *name, const fb_recorder_options *options) {
    fb_recorder *recorder = NULL;
    fb_error error;
    fb_status status = fb_recorder_create(options, &recorder, &error);
    printf("refused %s status=%s made=%d\n", name, fb_status_name(status), recorder != NULL);
    fb_recorder_destroy(recorder);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: recorder PATH OUTPUT COMPRESSED TIMEOUT_S\n");
        return 64;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    fb_recorder_options options;
    fb_recorder_options_init(&options);
    options.path = argv[1];
    options.output_path = argv[2];
    options.compressed = (uint32_t)strtoul(argv[3], NULL, 10);
    options.connect_timeout_ms = 60000;
    const double timeout = strtod(argv[4], NULL);

    fb_recorder_options bad = options;
    bad.reserved[3] = 1;
    refused("reserved", &bad);
    bad = options;
    bad.output_path = NULL;
    refused("null-output", &bad);
    bad = options;
    bad.queue_depth = 65;
    refused("queue-depth", &bad);
    bad = options;
    bad.writes_in_flight = 17;
    refused("writes-in-flight", &bad);
    options.writes_in_flight = 3; /* a value the default does not give, in the recording checked below */

    fb_recorder *recorder = NULL;
    CHECK_OK(fb_recorder_create(&options, &recorder, &last_error));
    printf("recording\n");
    fb_recorder_status state;
    /* Until the stream ends (the publisher stopped), at most TIMEOUT_S seconds: a wait on the event. */
    fb_status status = fb_recorder_wait(recorder, (int64_t)(timeout * 1e9), &state, &last_error);
    if (status != FB_OK && status != FB_ERROR_TIMED_OUT) {
        printf("wait failed %s: %s\n", fb_status_name(status), last_error.message);
        return 1;
    }
    CHECK_OK(fb_recorder_stop(recorder, &state, &last_error));
    printf("final accepted=%llu written=%llu bytes=%llu durable=%llu dropped=%llu",
           (unsigned long long)state.frames_accepted, (unsigned long long)state.frames_written,
           (unsigned long long)state.bytes_written, (unsigned long long)state.bytes_durable,
           (unsigned long long)state.dropped_frames);
    for (int reason = 1; reason <= 8; reason++) printf(" drop%d=%llu", reason, (unsigned long long)state.drops[reason]);
    printf(" peak=%llu capacity=%llu direct=%u ended=%u closed=%u failure=%s errno=%d\n",
           (unsigned long long)state.backlog_peak_bytes, (unsigned long long)state.backlog_capacity,
           state.uses_direct_io, state.stream_ended, state.closed, fb_status_name(state.failure), state.failure_errno);
    /* Stopping again is harmless; destroying frees it. */
    CHECK_OK(fb_recorder_stop(recorder, NULL, &last_error));
    fb_recorder_destroy(recorder);
    printf("done\n");
    return 0;
}
