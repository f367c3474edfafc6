/*
 * gst-shm-bench: one-way latency and throughput of GStreamer's shmsink → shmsrc between two processes, measured the
 * way `framebus bench bus` measures the bus, so the rows can stand side by side.
 *
 *   gst-shm-bench probe
 *       exits 0 when appsrc, shmsink, shmsrc and appsink exist, 3 (with the reason on stderr) when one is missing.
 *   gst-shm-bench run --path zerocopy|copy --format NV12|BGRA|P010_10LE --width W --height H
 *                     --rate HZ (0 = unpaced) --frames N [--warmup N] [--shm-frames N]
 *       starts the consumer as a child process (this executable, mode `consume`), produces, and prints one JSON
 *       object on stdout.
 *
 * Producer: appsrc ! shmsink sync=false. Each frame gets {CLOCK_MONOTONIC ns, sequence} in its first 16 bytes just
 * before gst_app_src_push_buffer(), the application's hand-off, as framebus stamps a frame in publish().
 *   zerocopy: the frame's memory comes from the allocator shmsink proposes in the allocation query, so shmsink sends
 *             the block in place. When the area is full that allocator silently falls back to system memory (which
 *             shmsink would then copy); such a frame is given back and the allocation retried, and the retries are
 *             counted, so a zerocopy row never hides copies.
 *   copy:     the frame's memory comes from the application's own buffer pool; shmsink copies every frame into
 *             its area.
 * Consumer: shmsrc is-live=true ! appsink sync=false; the new-sample callback (the application's hand-off, as the
 * subscriber's didOutput) reads the stamp: latency = now - stamp; a sequence jump counts as gaps.
 * CPU is process CPU time (all threads) of each side over the measured frames.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/gst.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { EXIT_FAILED = 2, EXIT_MISSING = 3, EXIT_USAGE = 64 };

static uint64_t clock_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t monotonic_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
static uint64_t cpu_ns(void) { return clock_ns(CLOCK_PROCESS_CPUTIME_ID); }

static void sleep_until(uint64_t deadline) {
    struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000u), .tv_nsec = (long)(deadline % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static int check_elements(void) {
    static const char *const needed[][2] = {
        {"appsrc", "gstreamer1.0-plugins-base"},
        {"appsink", "gstreamer1.0-plugins-base"},
        {"shmsink", "gstreamer1.0-plugins-bad"},
        {"shmsrc", "gstreamer1.0-plugins-bad"},
    };
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        GstElementFactory *factory = gst_element_factory_find(needed[i][0]);
        if (!factory) {
            fprintf(stderr, "GStreamer element %s not found (package %s)\n", needed[i][0], needed[i][1]);
            return EXIT_MISSING;
        }
        gst_object_unref(factory);
    }
    return 0;
}

/* Frame size in bytes as GStreamer lays the format out (tightly packed rows), 0 when unknown or too large. */
static uint64_t frame_bytes(const char *format, uint64_t width, uint64_t height) {
    if (width == 0 || height == 0 || width > 16384 || height > 16384) return 0;
    uint64_t chroma = ((width + 1) / 2) * 2 * ((height + 1) / 2);
    if (strcmp(format, "NV12") == 0) return width * height + chroma;
    if (strcmp(format, "P010_10LE") == 0) return 2 * (width * height + chroma);
    if (strcmp(format, "BGRA") == 0) return width * height * 4;
    return 0;
}

static int parse_u64(const char *text, uint64_t limit, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || !end || *end || end == text || text[0] == '-' || value > limit) return -1;
    *out = value;
    return 0;
}

/* MARK: consumer */

typedef struct {
    uint64_t warmup, expected;
    uint64_t *latencies; /* one per measured frame, at most `expected` */
    uint64_t measured, gaps, out_of_order, short_frames, next_sequence;
    uint64_t cpu_start, first_ns;
    _Atomic uint64_t last_ns;
    _Atomic int done;
} Consumer;

static GstFlowReturn consumer_new_sample(GstAppSink *sink, gpointer data) {
    Consumer *consumer = data;
    uint64_t now = monotonic_ns();
    GstSample *sample = gst_app_sink_pull_sample(sink);
    if (!sample) return GST_FLOW_EOS;
    GstBuffer *buffer = gst_sample_get_buffer(sample);
    uint64_t stamp[2] = {0, 0};
    if (!buffer || gst_buffer_extract(buffer, 0, stamp, sizeof stamp) != sizeof stamp) {
        consumer->short_frames++;
        gst_sample_unref(sample);
        return GST_FLOW_OK;
    }
    gst_sample_unref(sample);
    uint64_t sequence = stamp[1];
    if (sequence < consumer->next_sequence) {
        consumer->out_of_order++;
    } else {
        /* Frames missing between the last one seen and this one, counting measured frames only. */
        uint64_t from = consumer->next_sequence > consumer->warmup ? consumer->next_sequence : consumer->warmup;
        if (sequence > from) consumer->gaps += sequence - from;
        consumer->next_sequence = sequence + 1;
    }
    if (sequence + 1 == consumer->warmup) consumer->cpu_start = cpu_ns();
    if (sequence < consumer->warmup) return GST_FLOW_OK;
    if (consumer->measured == 0) {
        if (consumer->cpu_start == 0) consumer->cpu_start = cpu_ns();
        consumer->first_ns = now;
    }
    if (consumer->measured < consumer->expected) {
        consumer->latencies[consumer->measured++] = now >= stamp[0] ? now - stamp[0] : 0;
    }
    atomic_store(&consumer->last_ns, now);
    if (consumer->measured + consumer->gaps >= consumer->expected) atomic_store(&consumer->done, 1);
    return GST_FLOW_OK;
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array. */
static uint64_t percentile(const uint64_t *sorted, uint64_t count, double p) {
    if (count == 0) return 0;
    uint64_t rank = (uint64_t)((p / 100.0) * (double)count + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > count) rank = count;
    return sorted[rank - 1];
}

static int consume(const char *socket_path, uint64_t expected, uint64_t warmup) {
    /* The producer creates the socket; wait for it (shmsrc fails at once when it is absent). */
    uint64_t deadline = monotonic_ns() + 20000000000u;
    struct stat st;
    while (stat(socket_path, &st) != 0) {
        if (monotonic_ns() > deadline) {
            fprintf(stderr, "consumer: no socket at %s after 20 s\n", socket_path);
            return EXIT_FAILED;
        }
        usleep(5000);
    }
    usleep(20000);

    Consumer consumer = {.warmup = warmup, .expected = expected};
    consumer.latencies = calloc(expected ? expected : 1, sizeof(uint64_t));
    if (!consumer.latencies) return EXIT_FAILED;

    GstElement *pipeline = gst_pipeline_new("consumer");
    GstElement *source = gst_element_factory_make("shmsrc", NULL);
    GstElement *sink = gst_element_factory_make("appsink", NULL);
    if (!pipeline || !source || !sink) return EXIT_MISSING;
    g_object_set(source, "socket-path", socket_path, "is-live", TRUE, NULL);
    g_object_set(sink, "sync", FALSE, "enable-last-sample", FALSE, "max-buffers", 0u, "drop", FALSE, NULL);
    GstAppSinkCallbacks callbacks = {.new_sample = consumer_new_sample};
    gst_app_sink_set_callbacks(GST_APP_SINK(sink), &callbacks, &consumer, NULL);
    gst_bin_add_many(GST_BIN(pipeline), source, sink, NULL);
    if (!gst_element_link(source, sink)) return EXIT_FAILED;
    if (gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
        fprintf(stderr, "consumer: pipeline did not start\n");
        return EXIT_FAILED;
    }

    GstBus *bus = gst_element_get_bus(pipeline);
    int status = 0;
    uint64_t started = monotonic_ns();
    while (!atomic_load(&consumer.done)) {
        GstMessage *message =
            gst_bus_timed_pop_filtered(bus, 10 * GST_MSECOND, GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
        uint64_t now = monotonic_ns();
        uint64_t last = atomic_load(&consumer.last_ns);
        if (message) {
            int is_error = GST_MESSAGE_TYPE(message) == GST_MESSAGE_ERROR;
            if (is_error && last == 0) {
                GError *error = NULL;
                gst_message_parse_error(message, &error, NULL);
                fprintf(stderr, "consumer: %s\n", error ? error->message : "error");
                g_clear_error(&error);
                status = EXIT_FAILED;
            }
            gst_message_unref(message);
            break; /* the producer closed the socket: what arrived is all there is */
        }
        if (last != 0 && now - last > 3000000000u) break; /* 3 s without a frame: the rest is lost */
        if (last == 0 && now - started > 60000000000u) {
            fprintf(stderr, "consumer: no measured frame within 60 s\n");
            status = EXIT_FAILED;
            break;
        }
    }
    uint64_t cpu = consumer.cpu_start ? cpu_ns() - consumer.cpu_start : 0;
    gst_object_unref(bus);

    uint64_t count = consumer.measured;
    qsort(consumer.latencies, count, sizeof(uint64_t), compare_u64);
    printf("{\"frames\":%" PRIu64 ",\"p50\":%" PRIu64 ",\"p99\":%" PRIu64 ",\"p999\":%" PRIu64 ",\"max\":%" PRIu64
           ",\"gaps\":%" PRIu64 ",\"outOfOrder\":%" PRIu64 ",\"shortFrames\":%" PRIu64
           ",\"consumerCPUNanoseconds\":%" PRIu64 ",\"firstNanoseconds\":%" PRIu64 ",\"lastNanoseconds\":%" PRIu64
           "}\n",
           count, percentile(consumer.latencies, count, 50), percentile(consumer.latencies, count, 99),
           percentile(consumer.latencies, count, 99.9), count ? consumer.latencies[count - 1] : 0, consumer.gaps,
           consumer.out_of_order, consumer.short_frames, cpu, consumer.first_ns, atomic_load(&consumer.last_ns));
    fflush(stdout);
    gst_element_set_state(pipeline, GST_STATE_NULL);
    gst_object_unref(pipeline);
    free(consumer.latencies);
    return status;
}

/* MARK: producer */

typedef struct {
    GMutex lock;
    GCond changed;
    int clients;
} Connection;

static void on_client_connected(GstElement *sink, gint fd, gpointer data) {
    (void)sink;
    (void)fd;
    Connection *connection = data;
    g_mutex_lock(&connection->lock);
    connection->clients++;
    g_cond_broadcast(&connection->changed);
    g_mutex_unlock(&connection->lock);
}

typedef struct {
    int zero_copy;
    uint64_t frame_bytes;
    GstAllocator *shm_allocator; /* zerocopy */
    GstBufferPool *pool;         /* copy */
    uint64_t allocation_retries;
} Frames;

static GstBuffer *next_frame(Frames *frames) {
    if (frames->zero_copy) {
        for (;;) {
            GstMemory *memory = gst_allocator_alloc(frames->shm_allocator, frames->frame_bytes, NULL);
            if (memory && memory->allocator == frames->shm_allocator) {
                GstBuffer *buffer = gst_buffer_new();
                gst_buffer_append_memory(buffer, memory);
                return buffer;
            }
            /* The area is full and the allocator fell back to system memory: wait for a block instead. */
            if (memory) gst_memory_unref(memory);
            frames->allocation_retries++;
            usleep(50);
        }
    }
    GstBuffer *buffer = NULL;
    if (gst_buffer_pool_acquire_buffer(frames->pool, &buffer, NULL) != GST_FLOW_OK) return NULL;
    return buffer;
}

static int push_frame(GstAppSrc *source, Frames *frames, uint64_t sequence) {
    GstBuffer *buffer = next_frame(frames);
    if (!buffer) return -1;
    uint64_t stamp[2] = {monotonic_ns(), sequence};
    gst_buffer_fill(buffer, 0, stamp, sizeof stamp);
    return gst_app_src_push_buffer(source, buffer) == GST_FLOW_OK ? 0 : -1;
}

static int read_line(int fd, char *line, size_t capacity, int timeout_ms) {
    size_t used = 0;
    uint64_t deadline = monotonic_ns() + (uint64_t)timeout_ms * 1000000u;
    while (used + 1 < capacity) {
        uint64_t now = monotonic_ns();
        if (now >= deadline) break;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int ready = poll(&pfd, 1, (int)((deadline - now) / 1000000u) + 1);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) break;
        ssize_t n = read(fd, line + used, capacity - 1 - used);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        used += (size_t)n;
        if (memchr(line, '\n', used)) break;
    }
    line[used] = 0;
    char *newline = strchr(line, '\n');
    if (newline) *newline = 0;
    return newline ? 0 : -1;
}

typedef struct {
    const char *path, *format;
    uint64_t width, height, rate, frames, warmup, shm_frames;
} RunOptions;

static int run(const RunOptions *options, const char *self) {
    uint64_t bytes = frame_bytes(options->format, options->width, options->height);
    if (bytes == 0) {
        fprintf(stderr, "unsupported format or size: %s %" PRIu64 "x%" PRIu64 "\n", options->format, options->width,
                options->height);
        return EXIT_USAGE;
    }
    int zero_copy = strcmp(options->path, "zerocopy") == 0;
    if (!zero_copy && strcmp(options->path, "copy") != 0) {
        fprintf(stderr, "--path is zerocopy or copy\n");
        return EXIT_USAGE;
    }
    /* Room for shm-frames frames plus the allocator's alignment slack per block. */
    uint64_t shm_bytes = options->shm_frames * (bytes + 4096);
    if (shm_bytes > UINT32_MAX) shm_bytes = UINT32_MAX & ~(uint64_t)4095;

    char socket_path[128];
    snprintf(socket_path, sizeof socket_path, "/tmp/gst-shm-bench-%d.sock", (int)getpid());
    unlink(socket_path);

    /* The consumer first, before the pipeline starts its threads. */
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return EXIT_FAILED;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
    char expected_text[32], warmup_text[32];
    snprintf(expected_text, sizeof expected_text, "%" PRIu64, options->frames);
    snprintf(warmup_text, sizeof warmup_text, "%" PRIu64, options->warmup);
    char *child_argv[] = {(char *)self, "consume", socket_path, expected_text, warmup_text, NULL};
    pid_t child = 0;
    int spawn_error = posix_spawn(&child, "/proc/self/exe", &actions, NULL, child_argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(pipe_fds[1]);
    if (spawn_error) {
        fprintf(stderr, "could not start the consumer: %s\n", strerror(spawn_error));
        return EXIT_FAILED;
    }

    int status = EXIT_FAILED;
    GstElement *pipeline = gst_pipeline_new("producer");
    GstElement *source = gst_element_factory_make("appsrc", NULL);
    GstElement *sink = gst_element_factory_make("shmsink", NULL);
    GstCaps *caps = gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, options->format, "width", G_TYPE_INT,
                                        (int)options->width, "height", G_TYPE_INT, (int)options->height, "framerate",
                                        GST_TYPE_FRACTION, 0, 1, NULL);
    Connection connection = {.clients = 0};
    g_mutex_init(&connection.lock);
    g_cond_init(&connection.changed);
    Frames frames = {.zero_copy = zero_copy, .frame_bytes = bytes};
    uint64_t start = 0, producer_cpu = 0, cpu_start = 0;
    char line[1024] = "";

    g_object_set(source, "caps", caps, "is-live", TRUE, "format", GST_FORMAT_TIME, "block", TRUE, "max-bytes",
                 (guint64)(2 * bytes), NULL);
    g_object_set(sink, "socket-path", socket_path, "shm-size", (guint)shm_bytes, "wait-for-connection", TRUE, "sync",
                 FALSE, "async", FALSE, "enable-last-sample", FALSE, NULL);
    g_signal_connect(sink, "client-connected", G_CALLBACK(on_client_connected), &connection);
    gst_bin_add_many(GST_BIN(pipeline), source, sink, NULL);
    if (!gst_element_link(source, sink)) goto done;
    if (gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
        fprintf(stderr, "producer: pipeline did not start (shm-size %" PRIu64 ")\n", shm_bytes);
        goto done;
    }

    g_mutex_lock(&connection.lock);
    gint64 until = g_get_monotonic_time() + 20 * G_TIME_SPAN_SECOND;
    while (connection.clients == 0 && g_cond_wait_until(&connection.changed, &connection.lock, until)) {
    }
    int connected = connection.clients > 0;
    g_mutex_unlock(&connection.lock);
    if (!connected) {
        fprintf(stderr, "producer: the consumer did not connect within 20 s\n");
        goto done;
    }

    if (zero_copy) {
        /* Ask shmsink for its allocator, as an upstream element does in its allocation query. */
        GstQuery *query = gst_query_new_allocation(caps, TRUE);
        GstPad *pad = gst_element_get_static_pad(source, "src");
        if (gst_pad_peer_query(pad, query) && gst_query_get_n_allocation_params(query) > 0) {
            gst_query_parse_nth_allocation_param(query, 0, &frames.shm_allocator, NULL);
        }
        gst_object_unref(pad);
        gst_query_unref(query);
        if (!frames.shm_allocator) {
            fprintf(stderr, "producer: shmsink proposed no allocator\n");
            goto done;
        }
    } else {
        frames.pool = gst_buffer_pool_new();
        GstStructure *config = gst_buffer_pool_get_config(frames.pool);
        gst_buffer_pool_config_set_params(config, caps, (guint)bytes, 4, 0);
        if (!gst_buffer_pool_set_config(frames.pool, config) || !gst_buffer_pool_set_active(frames.pool, TRUE)) {
            fprintf(stderr, "producer: buffer pool did not start\n");
            goto done;
        }
    }

    /* Warm-up at 1 kHz: every block and pool buffer touched once, not measured. */
    uint64_t next = monotonic_ns();
    for (uint64_t sequence = 0; sequence < options->warmup; sequence++) {
        if (push_frame(GST_APP_SRC(source), &frames, sequence) != 0) goto push_failed;
        next += 1000000u;
        sleep_until(next);
    }
    usleep(100000);

    uint64_t period = options->rate > 0 ? 1000000000u / options->rate : 0;
    cpu_start = cpu_ns();
    start = monotonic_ns();
    next = start;
    for (uint64_t index = 0; index < options->frames; index++) {
        if (push_frame(GST_APP_SRC(source), &frames, options->warmup + index) != 0) goto push_failed;
        if (period) {
            next += period;
            sleep_until(next);
        }
    }
    if (read_line(pipe_fds[0], line, sizeof line, 120000) != 0) {
        fprintf(stderr, "producer: no report from the consumer\n");
        goto done;
    }
    producer_cpu = cpu_ns() - cpu_start;
    printf("{\"path\":\"%s\",\"format\":\"%s\",\"width\":%" PRIu64 ",\"height\":%" PRIu64 ",\"rateHz\":%" PRIu64
           ",\"sentFrames\":%" PRIu64 ",\"frameBytes\":%" PRIu64 ",\"shmBytes\":%" PRIu64
           ",\"allocationRetries\":%" PRIu64 ",\"startNanoseconds\":%" PRIu64 ",\"producerCPUNanoseconds\":%" PRIu64
           ",\"consumer\":%s}\n",
           options->path, options->format, options->width, options->height, options->rate, options->frames, bytes,
           shm_bytes, frames.allocation_retries, start, producer_cpu, line);
    fflush(stdout);
    status = 0;
    goto done;

push_failed:
    fprintf(stderr, "producer: push failed\n");
done:
    gst_app_src_end_of_stream(GST_APP_SRC(source));
    /* Closing the socket ends the consumer when it is still waiting. */
    gst_element_set_state(pipeline, GST_STATE_NULL);
    if (frames.pool) {
        gst_buffer_pool_set_active(frames.pool, FALSE);
        gst_object_unref(frames.pool);
    }
    if (frames.shm_allocator) gst_object_unref(frames.shm_allocator);
    gst_object_unref(pipeline);
    gst_caps_unref(caps);
    close(pipe_fds[0]);
    int child_status = 0;
    for (int waited = 0; waited < 500; waited++) {
        if (waitpid(child, &child_status, WNOHANG) == child) break;
        if (waited == 499) {
            kill(child, SIGKILL);
            waitpid(child, &child_status, 0);
        }
        usleep(10000);
    }
    unlink(socket_path);
    return status;
}

static void usage(void) {
    fprintf(stderr, "usage: gst-shm-bench probe\n"
                    "       gst-shm-bench run --path zerocopy|copy --format NV12|BGRA|P010_10LE --width W --height H\n"
                    "                         --rate HZ --frames N [--warmup N] [--shm-frames N]\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage();
        return EXIT_USAGE;
    }
    /* A watchdog for both sides: a peer that dies mid-run can leave a blocking push waiting for ever. */
    alarm(900);
    gst_init(NULL, NULL);
    int missing = check_elements();
    if (strcmp(argv[1], "probe") == 0) {
        if (!missing) printf("%s: appsrc, appsink, shmsink, shmsrc found\n", gst_version_string());
        return missing;
    }
    if (missing) return missing;
    if (strcmp(argv[1], "consume") == 0) {
        uint64_t expected = 0, warmup = 0;
        if (argc != 5 || parse_u64(argv[3], 10000000, &expected) || parse_u64(argv[4], 100000, &warmup)) {
            usage();
            return EXIT_USAGE;
        }
        return consume(argv[2], expected, warmup);
    }
    if (strcmp(argv[1], "run") != 0) {
        usage();
        return EXIT_USAGE;
    }
    RunOptions options = {.path = "zerocopy", .format = "NV12", .width = 1920, .height = 1080, .rate = 100,
                          .frames = 500, .warmup = 48, .shm_frames = 32};
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *name = argv[i], *value = argv[i + 1];
        int bad = 0;
        if (strcmp(name, "--path") == 0) options.path = value;
        else if (strcmp(name, "--format") == 0) options.format = value;
        else if (strcmp(name, "--width") == 0) bad = parse_u64(value, 16384, &options.width);
        else if (strcmp(name, "--height") == 0) bad = parse_u64(value, 16384, &options.height);
        else if (strcmp(name, "--rate") == 0) bad = parse_u64(value, 1000000, &options.rate);
        else if (strcmp(name, "--frames") == 0) bad = parse_u64(value, 10000000, &options.frames);
        else if (strcmp(name, "--warmup") == 0) bad = parse_u64(value, 100000, &options.warmup);
        else if (strcmp(name, "--shm-frames") == 0) bad = parse_u64(value, 1024, &options.shm_frames);
        else bad = 1;
        if (bad) {
            fprintf(stderr, "bad option %s %s\n", name, value);
            usage();
            return EXIT_USAGE;
        }
    }
    if (argc % 2 != 0 || options.frames == 0 || options.shm_frames < 2) {
        usage();
        return EXIT_USAGE;
    }
    return run(&options, argv[0]);
}
