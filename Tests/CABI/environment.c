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
 *   environment logging MISSING_SOCKET
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

/* Whether a thread of this process is named `prefix`... (/proc/self/task/TID/comm). */
static int thread_named(const char *prefix) {
    DIR *tasks = opendir("/proc/self/task");
    if (tasks == NULL) return 1;
    int found = 0;
    struct dirent *entry;
    while (!found && (entry = readdir(tasks)) != NULL) {
        if (entry->d_name[0] == '.') continue;
        char path[300], name[64] = {0};
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", entry->d_name);
        FILE *comm = fopen(path, "r");
        if (comm == NULL) continue;
        if (fgets(name, sizeof name, comm) != NULL && strncmp(name, prefix, strlen(prefix)) == 0) found = 1;
        fclose(comm);
    }
    closedir(tasks);
    return found;
}

/* Subscribes to a socket nobody serves, with a short connect timeout: the stream ends, and the library logs a
 * warning ("subscription to ... ended"). Returns once the end event came. */
static void subscribe_to_nobody(const char *path) {
    uint32_t accepted[1] = {FB_FOURCC('4', '2', '0', 'v')};
    fb_subscriber_options options;
    fb_subscriber_options_init(&options);
    options.path = path;
    options.accepted_formats = accepted;
    options.accepted_format_count = 1;
    options.connect_timeout_ns = 200000000;
    fb_subscriber *subscriber = NULL;
    CHECK_OK(fb_subscriber_create(&options, &subscriber, &last_error));
    for (int polls = 0; polls < 300; polls++) {
        fb_event event;
        fb_status status = fb_subscriber_next_event(subscriber, 100000000, &event, NULL);
        if (status == FB_OK && event.type == FB_EVENT_END) break;
        if (status != FB_OK && status != FB_ERROR_TIMED_OUT) break;
    }
    fb_subscriber_destroy(subscriber);
    /* The warning is logged on the subscriber's connection thread after the end event; once that thread has
     * ended, every message of this subscription has been emitted (or dropped). */
    int gone = 0;
    for (int polls = 0; polls < 2000 && !gone; polls++) {
        gone = !thread_named("framebus.sub");
        if (!gone) nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    printf("thread gone=%d\n", gone);
}

static int logging(const char *path) {
    static int tag = 7;
    fb_error error;
    printf("phase name=callback\n");
    CHECK_OK(fb_set_log_handler(on_log, &tag, &last_error));
    subscribe_to_nobody(path);
    pthread_mutex_lock(&seen_lock);
    int after_callback = seen_count;
    pthread_mutex_unlock(&seen_lock);

    printf("phase name=filtered\n");
    CHECK_OK(fb_set_log_level(FB_LOG_ERROR, &last_error));
    subscribe_to_nobody(path);
    pthread_mutex_lock(&seen_lock);
    int after_filter = seen_count;
    pthread_mutex_unlock(&seen_lock);
    printf("counts callback=%d filtered=%d\n", after_callback, after_filter - after_callback);

    printf("phase name=stderr\n");
    fflush(stdout);
    CHECK_OK(fb_set_log_level(FB_LOG_INFO, &last_error));
    CHECK_OK(fb_set_log_handler(NULL, NULL, &last_error));
    subscribe_to_nobody(path);
    fflush(stderr);

    printf("phase name=off\n");
    fflush(stdout);
    CHECK_OK(fb_set_log_level(FB_LOG_OFF, &last_error));
    subscribe_to_nobody(path);
    fflush(stderr);
    printf("badlevel status=%d\n", fb_set_log_level(99, &error));
    printf("phase name=done\n");
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 4 && strcmp(argv[1], "socketpath") == 0) return socket_path(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "logging") == 0) return logging(argv[2]);
    fprintf(stderr, "usage: environment socketpath XDG_DIR TMP_PARENT | environment logging MISSING_SOCKET\n");
    return 64;
}
