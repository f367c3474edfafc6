/*
 * The C ABI's environment functions: fb_default_socket_path (the runtime-directory rule and its private fallback)
 * and the log route (fb_set_log_handler, fb_set_log_level). Prints key=value records for CABIEnvironmentTests.
 *
 *   environment socketpath XDG_DIR TMP_PARENT
 *       path case=xdg status=N path=P            XDG_RUNTIME_DIR=XDG_DIR
 *       path case=fallback status=N path=P mode=M uid=U
 *       path case=wide status=N                   the fallback directory chmod 0755 first
 *       path case=small status=N                  a buffer one byte too small
 *       path case=badname status=N                name "../x"
 *   environment logging SOCKET
 *       log level=L label=X message=...           each message the callback got (message last on the line)
 *       reentry status=N                          fb_set_log_handler from inside the callback
 *       phase name=...                            where the program is
 *       badlevel status=N
 */
#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static int socket_path(const char *xdg, const char *tmp) {
    char path[200];
    fb_error error;

    setenv("XDG_RUNTIME_DIR", xdg, 1);
    fb_status status = fb_default_socket_path("camera", path, sizeof path, &error);
    printf("path case=xdg status=%d path=%s\n", status, status == FB_OK ? path : "-");

    unsetenv("XDG_RUNTIME_DIR");
    setenv("TMPDIR", tmp, 1);
    status = fb_default_socket_path("camera", path, sizeof path, &error);
    char directory[200];
    snprintf(directory, sizeof directory, "%s/framebus-%u", tmp, (unsigned)getuid());
    struct stat information = {0};
    int mode = stat(directory, &information) == 0 ? (int)(information.st_mode & 07777) : -1;
    printf("path case=fallback status=%d path=%s mode=%o uid=%u\n", status, status == FB_OK ? path : "-", mode,
           (unsigned)information.st_uid);
    size_t length = status == FB_OK ? strlen(path) : 0;

    if (chmod(directory, 0755) != 0) return 2;
    status = fb_default_socket_path("camera", path, sizeof path, &error);
    printf("path case=wide status=%d\n", status);
    if (chmod(directory, 0700) != 0) return 2;

    status = fb_default_socket_path("camera", path, length, &error); /* no room for the NUL */
    printf("path case=small status=%d\n", status);
    status = fb_default_socket_path("../x", path, sizeof path, &error);
    printf("path case=badname status=%d\n", status);
    return 0;
}

/* What the log callback saw; the callback runs on the subscriber's thread, the checks on the main one. */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static int seen_count;

static void on_log(void *user_data, fb_log_level level, const char *label, const char *message) {
    int *tag = user_data;
    fb_error error;
    fb_status reentry = fb_set_log_handler(NULL, NULL, &error);
    pthread_mutex_lock(&seen_lock);
    seen_count++;
    printf("log tag=%d level=%d label=%s message=%s\n", *tag, level, label, message);
    printf("reentry status=%d\n", reentry);
    pthread_mutex_unlock(&seen_lock);
}

/* Polls `condition` every 10 ms for up to 20 s. */
#define WAIT_FOR(condition)                                                                                      \
    do {                                                                                                         \
        for (int waited_ = 0; waited_ < 2000 && !(condition); waited_++)                                         \
            nanosleep(&(struct timespec){0, 10000000}, NULL);                                                    \
    } while (0)

static int seen(void) {
    pthread_mutex_lock(&seen_lock);
    int count = seen_count;
    pthread_mutex_unlock(&seen_lock);
    return count;
}

/* The text standard error received while `capture_stderr` was on. */
static FILE *captured;
static int saved_stderr = -1;

static void capture_stderr(void) {
    fflush(stderr);
    captured = tmpfile();
    saved_stderr = dup(2);
    dup2(fileno(captured), 2);
}

static int captured_contains(const char *text) {
    fflush(stderr);
    char content[16384] = {0};
    size_t length = (size_t)pread(fileno(captured), content, sizeof content - 1, 0);
    content[length < sizeof content ? length : 0] = 0;
    return strstr(content, text) != NULL;
}

static void restore_stderr(void) {
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    fclose(captured);
}

/* Publishes 420v at `path` and subscribes asking for BGRA only: the publisher refuses (no common format), the
 * stream ends, and the library logs two warnings: the publisher's (the refusal), which its loop thread writes after
 * leaving its state lock, so at about the time the end event arrives, before or after it, and the subscriber's
 * ("subscription to ... ended") on its own thread after the end event.
 * Returns once the end event came. */
static void subscribe_refused(const char *path) {
    fb_publisher_options publisher_options;
    fb_publisher_options_init(&publisher_options);
    publisher_options.path = path;
    publisher_options.format = FB_FOURCC('4', '2', '0', 'v');
    publisher_options.width = 64;
    publisher_options.height = 48;
    fb_publisher *publisher = NULL;
    CHECK_OK(fb_publisher_create(&publisher_options, &publisher, &last_error));

    uint32_t accepted[1] = {FB_FOURCC('B', 'G', 'R', 'A')};
    fb_subscriber_options options;
    fb_subscriber_options_init(&options);
    options.path = path;
    options.accepted_formats = accepted;
    options.accepted_format_count = 1;
    fb_subscriber *subscriber = NULL;
    CHECK_OK(fb_subscriber_create(&options, &subscriber, &last_error));
    for (int polls = 0; polls < 300; polls++) {
        fb_event event;
        fb_status status = fb_subscriber_next_event(subscriber, 100000000, &event, NULL);
        if (status == FB_OK && event.type == FB_EVENT_END) {
            printf("end status=%d\n", event.end_status);
            break;
        }
        if (status != FB_OK && status != FB_ERROR_TIMED_OUT) break;
    }
    fb_subscriber_destroy(subscriber);
    fb_publisher_destroy(publisher);
}

static int logging(const char *path) {
    static int tag = 7;
    fb_error error;
    printf("phase name=callback\n");
    CHECK_OK(fb_set_log_handler(on_log, &tag, &last_error));
    subscribe_refused(path);
    WAIT_FOR(seen() >= 2); /* the publisher's warning came before the end event, the subscriber's may follow it */
    int after_callback = seen();

    printf("phase name=filtered\n");
    CHECK_OK(fb_set_log_level(FB_LOG_ERROR, &last_error));
    subscribe_refused(path); /* the publisher's warning, dropped before the end event */
    int after_filter = seen();
    printf("counts callback=%d filtered=%d\n", after_callback, after_filter - after_callback);

    printf("phase name=stderr\n");
    capture_stderr();
    CHECK_OK(fb_set_log_level(FB_LOG_INFO, &last_error));
    CHECK_OK(fb_set_log_handler(NULL, NULL, &last_error));
    subscribe_refused(path);
    /* Each side writes its warning after leaving its lock, so either may come after the end event. */
    WAIT_FOR(captured_contains("warning framebus.publisher"));
    int publisher_line = captured_contains("warning framebus.publisher");
    WAIT_FOR(captured_contains("warning framebus.subscriber"));
    int subscriber_line = captured_contains("warning framebus.subscriber");
    restore_stderr();
    printf("stderr publisher=%d subscriber=%d\n", publisher_line, subscriber_line);

    printf("phase name=off\n");
    CHECK_OK(fb_set_log_level(FB_LOG_OFF, &last_error));
    capture_stderr();
    subscribe_refused(path); /* the publisher's warning would reach stderr at about the end event */
    int off_line = captured_contains("framebus.publisher");
    restore_stderr();
    printf("off publisher=%d\n", off_line);
    printf("badlevel status=%d\n", fb_set_log_level(99, &error));
    printf("phase name=done\n");
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 4 && strcmp(argv[1], "socketpath") == 0) return socket_path(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "logging") == 0) return logging(argv[2]);
    fprintf(stderr, "usage: environment socketpath XDG_DIR TMP_PARENT | environment logging SOCKET\n");
    return 64;
}
