/* The C ABI's contract at its edges, without a subscriber process: NULLs and bad arguments give
 * FB_ERROR_INVALID_ARGUMENT (never a crash), timeouts are honoured, an interrupt wakes a blocked wait, a second
 * waiter is told FB_ERROR_BUSY, a publisher's pool runs out and recovers.
 *
 * usage: checks DIRECTORY    (a private directory for socket files)
 *
 * Prints "FAIL ..." for every failed check and "failures=N"; exits 0 when nothing failed.
 */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

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

static int64_t now_ns(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (int64_t)time.tv_sec * 1000000000 + time.tv_nsec;
}

static char directory[512];

static const char *socket_path(const char *name) {
    static char paths[8][600];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, 600, "%s/%s.sock", directory, name);
    return path;
}

static fb_subscriber *subscribe(const char *path, int64_t connect_timeout_ns) {
    uint32_t formats[] = {FB_FORMAT_420V};
    fb_subscriber_options options;
    fb_subscriber_options_init(&options);
    options.path = path;
    options.accepted_formats = formats;
    options.accepted_format_count = 1;
    options.connect_timeout_ns = connect_timeout_ns;
    fb_subscriber *subscriber = NULL;
    CHECK_OK(fb_subscriber_create(&options, &subscriber, &last_error));
    return subscriber;
}

typedef struct waiter {
    fb_subscriber *subscriber;
    fb_status status;
    int64_t returned_ns;
} waiter;

static void *wait_forever(void *argument) {
    waiter *state = argument;
    fb_event event;
    state->status = fb_subscriber_next_event(state->subscriber, -1, &event, NULL);
    state->returned_ns = now_ns();
    return NULL;
}

typedef struct discarder {
    fb_buffer *buffer;
    useconds_t delay;
} discarder;

static void *discard_later(void *argument) {
    discarder *state = argument;
    usleep(state->delay);
    fb_buffer_discard(state->buffer);
    return NULL;
}

static void check_arguments(void) {
    fb_error error;
    memset(&error, 0, sizeof error);
    EXPECT(fb_abi_version() == FB_ABI_VERSION, "abi %u", fb_abi_version());
    EXPECT(strcmp(fb_status_name(FB_ERROR_TIMED_OUT), "FB_ERROR_TIMED_OUT") == 0, "%s", fb_status_name(FB_ERROR_TIMED_OUT));
    EXPECT(strcmp(fb_status_name(12345), "unknown") == 0, "%s", fb_status_name(12345));
    /* Every status code of the header has its own name in the library (the library's table matches the header). */
#define STATUS(code) {code, #code}
    const struct {
        fb_status code;
        const char *name;
    } statuses[] = {STATUS(FB_OK),
                    STATUS(FB_ERROR_INVALID_ARGUMENT),
                    STATUS(FB_ERROR_SYSTEM_CALL),
                    STATUS(FB_ERROR_ADDRESS_IN_USE),
                    STATUS(FB_ERROR_PERMISSION_DENIED),
                    STATUS(FB_ERROR_REFUSED),
                    STATUS(FB_ERROR_PROTOCOL_VIOLATION),
                    STATUS(FB_ERROR_END_OF_STREAM),
                    STATUS(FB_ERROR_TIMED_OUT),
                    STATUS(FB_ERROR_SURFACE_REJECTED),
                    STATUS(FB_ERROR_CLOSED),
                    STATUS(FB_ERROR_OUT_OF_BUFFERS),
                    STATUS(FB_ERROR_RESOURCE),
                    STATUS(FB_ERROR_BUSY),
                    STATUS(FB_ERROR_INTERRUPTED),
                    STATUS(FB_ERROR_FORMAT_MISMATCH),
                    STATUS(FB_ERROR_CORRUPT_DATA),
                    STATUS(FB_ERROR_UNSUPPORTED_VERSION),
                    STATUS(FB_ERROR_BUFFER_TOO_SMALL),
                    STATUS(FB_ERROR_CANCELLED),
                    STATUS(FB_ERROR_INTERNAL)};
#undef STATUS
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        EXPECT(strcmp(fb_status_name(statuses[i].code), statuses[i].name) == 0, "%d is %s in the library, %s in the header",
               statuses[i].code, fb_status_name(statuses[i].code), statuses[i].name);
    }

    fb_format_info info;
    CHECK_OK(fb_format_get_info(FB_FORMAT_420V, &info, &last_error));
    EXPECT(info.plane_count == 2 && info.drm_fourcc == 0x3231564Eu && info.compressed_format == FB_FORMAT_COMPRESSED_420V &&
               info.bytes_per_element[1] == 2 && info.vertical_subsampling[1] == 2 && !info.is_full_range,
           "420v info");
    CHECK_OK(fb_format_get_info(FB_FORMAT_COMPRESSED_BGRA, &info, &last_error));
    EXPECT(info.plane_count == 0 && info.base_format == FB_FORMAT_BGRA && info.is_compressed, "&BGA info");
    EXPECT(fb_format_get_info(0, &info, &error) == FB_ERROR_FORMAT_MISMATCH && error.code == FB_ERROR_FORMAT_MISMATCH,
           "format 0");
    EXPECT(fb_format_get_info(FB_FORMAT_420V, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "NULL info");

    /* NULL handles: an error for functions that return one, nothing for the others. */
    fb_event event;
    EXPECT(fb_subscriber_next_event(NULL, 0, &event, &error) == FB_ERROR_INVALID_ARGUMENT && error.message[0] != 0,
           "NULL subscriber");
    EXPECT(fb_subscriber_create(NULL, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "NULL options");
    EXPECT(fb_publisher_create(NULL, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "NULL options");
    EXPECT(fb_publisher_acquire_buffer(NULL, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "NULL publisher");
    EXPECT(fb_buffer_publish(NULL, NULL, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "NULL buffer");
    EXPECT(fb_frame_get_info(NULL, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "NULL frame");
    EXPECT(fb_frame_dup_fd(NULL, NULL) == -1, "NULL frame fd");
    EXPECT(fb_publisher_report_drops(NULL, 1, 1, NULL, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "NULL publisher");
    fb_frame_info frame_info;
    EXPECT(fb_subscriber_next_event_info(NULL, 0, &event, &frame_info, &error) == FB_ERROR_INVALID_ARGUMENT,
           "NULL subscriber (next_event_info)");
    fb_buffer *no_buffer = NULL;
    fb_buffer_info buffer_info;
    EXPECT(fb_publisher_acquire_buffer_info(NULL, 0, &no_buffer, &buffer_info, NULL) == FB_ERROR_INVALID_ARGUMENT &&
               no_buffer == NULL,
           "NULL publisher (acquire_buffer_info)");
    EXPECT(fb_subscriber_is_connected(NULL) == 0, "NULL connected");
    fb_subscriber_destroy(NULL);
    fb_subscriber_interrupt(NULL);
    fb_subscriber_resume(NULL);
    fb_frame_release(NULL);
    fb_publisher_destroy(NULL);
    fb_buffer_discard(NULL);
    fb_subscriber_options_init(NULL);
    fb_publisher_options_init(NULL);

    /* Bad subscriber options. */
    uint32_t formats[] = {FB_FORMAT_420V, FB_FOURCC('n', 'o', 'p', 'e')};
    fb_subscriber_options options;
    fb_subscriber_options_init(&options);
    fb_subscriber *subscriber = NULL;
    options.accepted_formats = formats;
    options.accepted_format_count = 1;
    EXPECT(fb_subscriber_create(&options, &subscriber, NULL) == FB_ERROR_INVALID_ARGUMENT, "no path");
    options.path = socket_path("nobody");
    options.accepted_format_count = 0;
    EXPECT(fb_subscriber_create(&options, &subscriber, NULL) == FB_ERROR_INVALID_ARGUMENT, "no formats");
    options.accepted_format_count = 2;
    EXPECT(fb_subscriber_create(&options, &subscriber, NULL) == FB_ERROR_INVALID_ARGUMENT, "unknown format");
    options.accepted_format_count = 1000000;
    EXPECT(fb_subscriber_create(&options, &subscriber, NULL) == FB_ERROR_INVALID_ARGUMENT, "huge format count");
    options.accepted_format_count = 1;
    options.queue_depth = 65;
    EXPECT(fb_subscriber_create(&options, &subscriber, NULL) == FB_ERROR_INVALID_ARGUMENT, "queue 65");
    options.queue_depth = 0;
    options.wait_slice_us = 100001;
    EXPECT(fb_subscriber_create(&options, &subscriber, NULL) == FB_ERROR_INVALID_ARGUMENT, "wait slice 100001 us");
    options.wait_slice_us = 0;
    options.connect_timeout_ns = 0;
    EXPECT(fb_subscriber_create(&options, &subscriber, NULL) == FB_ERROR_INVALID_ARGUMENT, "timeout 0");
    options.connect_timeout_ns = 1000000000;
    char long_path[300];
    memset(long_path, 'a', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = 0;
    options.path = long_path;
    EXPECT(fb_subscriber_create(&options, &subscriber, NULL) == FB_ERROR_INVALID_ARGUMENT, "long path");
    EXPECT(subscriber == NULL, "no subscriber was made");
    /* Flags other than FB_SUBSCRIBER_DEFERRED are refused, and so are bad options with a known flag. */
    EXPECT(fb_subscriber_create_with_flags(&options, FB_SUBSCRIBER_DEFERRED, &subscriber, NULL) ==
               FB_ERROR_INVALID_ARGUMENT, "long path, deferred");
    options.path = "/tmp/framebus-checks-never-bound.sock";
    EXPECT(fb_subscriber_create_with_flags(&options, 0x80000000u, &subscriber, NULL) == FB_ERROR_INVALID_ARGUMENT,
           "unknown flag");
    EXPECT(subscriber == NULL, "no subscriber was made");
}

static void check_timeouts_and_interrupts(void) {
    /* No publisher: waits time out at their deadline, then the stream ends with FB_ERROR_TIMED_OUT. */
    fb_subscriber *subscriber = subscribe(socket_path("absent"), 400000000);
    fb_event event;
    int64_t start = now_ns();
    fb_status status = fb_subscriber_next_event(subscriber, 50000000, &event, NULL);
    int64_t waited = now_ns() - start;
    EXPECT(status == FB_ERROR_TIMED_OUT && event.type == FB_EVENT_NONE, "first wait gave %s", fb_status_name(status));
    EXPECT(waited >= 40000000, "returned after %lld ns, before its timeout", (long long)waited);
    status = fb_subscriber_next_event(subscriber, 0, &event, NULL);
    EXPECT(status == FB_ERROR_TIMED_OUT, "poll gave %s", fb_status_name(status));
    /* The one-call form: a NULL info is refused before any wait; a wait that times out leaves *info as it was. */
    fb_frame_info info;
    memset(&info, 0xA5, sizeof info);
    start = now_ns();
    status = fb_subscriber_next_event_info(subscriber, 10000000000LL, &event, NULL, NULL);
    EXPECT(status == FB_ERROR_INVALID_ARGUMENT && now_ns() - start < 5000000000LL, "NULL info gave %s",
           fb_status_name(status));
    status = fb_subscriber_next_event_info(subscriber, 0, &event, &info, NULL);
    const unsigned char *bytes = (const unsigned char *)&info;
    int untouched = 1;
    for (size_t i = 0; i < sizeof info; i++) untouched &= bytes[i] == 0xA5;
    EXPECT(status == FB_ERROR_TIMED_OUT && event.type == FB_EVENT_NONE && untouched, "next_event_info poll gave %s",
           fb_status_name(status));
    int ended = 0;
    for (int i = 0; i < 300 && !ended; i++) {
        status = fb_subscriber_next_event(subscriber, 100000000, &event, NULL);
        if (status == FB_OK && event.type == FB_EVENT_END) {
            ended = 1;
            EXPECT(event.end_status == FB_ERROR_TIMED_OUT, "end status %s", fb_status_name(event.end_status));
        } else {
            EXPECT(status == FB_ERROR_TIMED_OUT, "wait gave %s", fb_status_name(status));
        }
    }
    EXPECT(ended, "the stream did not end");
    status = fb_subscriber_next_event(subscriber, 100000000, &event, NULL);
    EXPECT(status == FB_ERROR_CLOSED, "after the end: %s", fb_status_name(status));
    fb_session session;
    EXPECT(fb_subscriber_get_session(subscriber, &session, NULL) == FB_ERROR_CLOSED, "session before handshake");
    fb_subscriber_destroy(subscriber);

    /* A wait without limit is woken by an interrupt from another thread; a second waiter is told BUSY. */
    subscriber = subscribe(socket_path("never"), 60000000000ll);
    waiter state = {subscriber, -1, 0};
    pthread_t thread;
    pthread_create(&thread, NULL, wait_forever, &state);
    usleep(200000);
    status = fb_subscriber_next_event(subscriber, 0, &event, NULL);
    EXPECT(status == FB_ERROR_BUSY, "a second waiter got %s", fb_status_name(status));
    int64_t interrupted = now_ns();
    fb_subscriber_interrupt(subscriber);
    pthread_join(thread, NULL);
    EXPECT(state.status == FB_ERROR_INTERRUPTED, "the blocked wait returned %s", fb_status_name(state.status));
    /* (A wait the interrupt did not end would block pthread_join, and the test's process limit would fail it.) */
    (void)interrupted;
    status = fb_subscriber_next_event(subscriber, -1, &event, NULL);
    EXPECT(status == FB_ERROR_INTERRUPTED, "while interrupted: %s", fb_status_name(status));
    fb_subscriber_resume(subscriber);
    status = fb_subscriber_next_event(subscriber, 50000000, &event, NULL);
    EXPECT(status == FB_ERROR_TIMED_OUT, "after resume: %s", fb_status_name(status));
    fb_subscriber_destroy(subscriber);
}

static void check_publisher(void) {
    fb_publisher_options options;
    fb_publisher_options_init(&options);
    fb_publisher *publisher = NULL;
    options.path = socket_path("publisher");
    options.format = FB_FORMAT_COMPRESSED_420V;
    options.width = 64;
    options.height = 48;
    EXPECT(fb_publisher_create(&options, &publisher, NULL) == FB_ERROR_FORMAT_MISMATCH, "compressed pool");
    options.format = FB_FORMAT_420V;
    options.width = 63;
    EXPECT(fb_publisher_create(&options, &publisher, NULL) == FB_ERROR_INVALID_ARGUMENT, "odd width");
    options.width = 64;
    uint32_t offered[] = {FB_FORMAT_BGRA};
    options.offered_formats = offered;
    options.offered_format_count = 1;
    EXPECT(fb_publisher_create(&options, &publisher, NULL) == FB_ERROR_FORMAT_MISMATCH, "BGRA from a 420v pool");
    options.offered_formats = NULL;
    options.offered_format_count = 0;
    options.maximum_buffer_count = 2;
    options.minimum_buffer_count = 3;
    EXPECT(fb_publisher_create(&options, &publisher, NULL) == FB_ERROR_INVALID_ARGUMENT, "minimum over maximum");
    options.minimum_buffer_count = 1;
    CHECK_OK(fb_publisher_create(&options, &publisher, &last_error));

    fb_publisher *second = NULL;
    fb_status status = fb_publisher_create(&options, &second, NULL);
    EXPECT(status == FB_ERROR_ADDRESS_IN_USE && second == NULL, "a second publisher on the path: %s", fb_status_name(status));

    /* The pool holds two buffers: a third acquire fails (using no sequence number), a timed one times out, one
     * without limit is served when another thread discards a buffer; a discard gives one back. */
    fb_buffer *first = NULL, *other = NULL, *third = NULL;
    CHECK_OK(fb_publisher_acquire_buffer(publisher, &first, &last_error));
    CHECK_OK(fb_publisher_acquire_buffer(publisher, &other, &last_error));
    status = fb_publisher_acquire_buffer(publisher, &third, NULL);
    EXPECT(status == FB_ERROR_OUT_OF_BUFFERS && third == NULL, "third acquire: %s", fb_status_name(status));
    int64_t start = now_ns();
    status = fb_publisher_acquire_buffer_timeout(publisher, 100000000, &third, NULL);
    EXPECT(status == FB_ERROR_TIMED_OUT && third == NULL, "timed acquire: %s", fb_status_name(status));
    int64_t acquire_waited = now_ns() - start;
    EXPECT(acquire_waited >= 90000000, "the timed acquire returned after %lld ns", (long long)acquire_waited);
    /* The one-call form on the empty pool: the same errors, nothing written. */
    fb_buffer_info untouched_info;
    memset(&untouched_info, 0xA5, sizeof untouched_info);
    status = fb_publisher_acquire_buffer_info(publisher, 0, &third, &untouched_info, NULL);
    EXPECT(status == FB_ERROR_OUT_OF_BUFFERS && third == NULL, "third one-call acquire: %s", fb_status_name(status));
    status = fb_publisher_acquire_buffer_info(publisher, 20000000, &third, &untouched_info, NULL);
    EXPECT(status == FB_ERROR_TIMED_OUT && third == NULL && ((unsigned char *)&untouched_info)[0] == 0xA5 &&
               ((unsigned char *)&untouched_info)[sizeof untouched_info - 1] == 0xA5,
           "timed one-call acquire: %s", fb_status_name(status));
    EXPECT(fb_publisher_acquire_buffer_info(publisher, 0, &third, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT &&
               third == NULL,
           "one-call acquire with a NULL info");
    discarder later = {first, 200000};
    pthread_t thread;
    pthread_create(&thread, NULL, discard_later, &later);
    status = fb_publisher_acquire_buffer_timeout(publisher, -1, &third, &last_error);
    EXPECT(status == FB_OK && third != NULL, "waiting acquire: %s %s", fb_status_name(status), last_error.message);
    pthread_join(thread, NULL);
    fb_buffer_info info;
    CHECK_OK(fb_buffer_get_info(third, &info, &last_error));
    EXPECT(info.plane_count == 2 && info.planes[0].data != NULL && info.planes[0].bytes_per_row >= 64 &&
               info.planes[1].height == 24 && info.planes[1].offset >= info.planes[0].byte_count,
           "buffer info");
    memset(info.planes[0].data, 0x10, info.planes[0].byte_count);

    /* Bad publish info: the buffer is freed and the frame not published. */
    fb_publish_info publish;
    memset(&publish, 0, sizeof publish);
    publish.colorimetry.primaries = 9;
    EXPECT(fb_buffer_publish(third, &publish, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "primaries 9");
    memset(&publish, 0, sizeof publish);
    publish.presentation_time = (fb_time){1, 0, FB_TIME_FLAG_VALID};
    EXPECT(fb_buffer_publish(other, &publish, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "timescale 0");
    /* Both went back to the pool (the second taken with the one-call form, described as fb_buffer_get_info does). */
    CHECK_OK(fb_publisher_acquire_buffer(publisher, &first, &last_error));
    fb_buffer_info one_call_info, described_info;
    CHECK_OK(fb_publisher_acquire_buffer_info(publisher, 0, &other, &one_call_info, &last_error));
    CHECK_OK(fb_buffer_get_info(other, &described_info, &last_error));
    EXPECT(memcmp(&one_call_info, &described_info, sizeof one_call_info) == 0 && one_call_info.plane_count == 2,
           "one-call buffer info");
    uint64_t sequence = 99;
    CHECK_OK(fb_buffer_publish(first, NULL, &sequence, &last_error));
    fb_publisher_statistics statistics;
    CHECK_OK(fb_publisher_get_statistics(publisher, &statistics, &last_error));
    /* Failed acquires used no sequence number: this is frame 0. */
    EXPECT(sequence == 0 && statistics.published == 1 && statistics.dropped_at_source_out_of_buffers == 0,
           "sequence %llu published %llu", (unsigned long long)sequence, (unsigned long long)statistics.published);

    uint64_t first_dropped = 0, last_dropped = 0;
    EXPECT(fb_publisher_report_drops(publisher, 0, 1, NULL, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "reason 0");
    EXPECT(fb_publisher_report_drops(publisher, 4, 1, NULL, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "reason 4");
    EXPECT(fb_publisher_report_drops(publisher, 3, 0, NULL, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "count 0");
    EXPECT(fb_publisher_report_drops(publisher, 3, UINT64_MAX, NULL, NULL, NULL) == FB_ERROR_INVALID_ARGUMENT, "count max");
    CHECK_OK(fb_publisher_report_drops(publisher, FB_DROP_DISCONTINUITY, 3, &first_dropped, &last_dropped, &last_error));
    EXPECT(first_dropped == 1 && last_dropped == 3, "dropped %llu...%llu", (unsigned long long)first_dropped,
           (unsigned long long)last_dropped);

    /* A buffer outlives its publisher: publishing it then says FB_ERROR_CLOSED and frees it. */
    fb_publisher_destroy(publisher);
    status = fb_buffer_publish(other, NULL, NULL, NULL);
    EXPECT(status == FB_ERROR_CLOSED, "publish after destroy: %s", fb_status_name(status));
    EXPECT(access(options.path, F_OK) != 0, "the socket file is gone");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: checks DIRECTORY\n");
        return 64;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(directory, sizeof directory, "%s", argv[1]);
    check_arguments();
    check_publisher();
    check_timeouts_and_interrupts();
    printf("failures=%d\n", failures);
    return failures == 0 ? 0 : 1;
}
