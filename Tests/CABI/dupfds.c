/* A C consumer that takes every frame's memory as descriptors, as one importing DMA-BUFs into EGL, Vulkan or
 * GStreamer would.
 *
 * usage: dupfds PATH ACCEPT
 *
 * For each frame: fb_frame_dup_fd (which must return a descriptor or fail with a status, never abort), then
 * fb_frame_dup_fds, whose every plane descriptor is mapped at its size and compared, at its offset, with the plane
 * the library mapped (between DMA_BUF_IOCTL_SYNC start and end for a DMA-BUF); a writable mapping is tried too.
 * Prints one line per frame and one at the end:
 *   frame seq=S dup_fd=FB_OK|<status> count=C dma=0|1 modifier=M same=0|1 distinct=0|1 writable=0|1
 *         closed=0|1 leaked=N
 *   (same: every plane's bytes equal the library's; distinct: every entry has its own descriptor number;
 *    closed: after closing each entry once, none is still open; leaked: descriptors open after the frame that were not before)
 *   nulls=0|1                  (NULL frame or fds gave FB_ERROR_INVALID_ARGUMENT)
 *   end status=NAME
 * Exits 0 when the stream ended and every check held, 1 if a check failed, 2 on an API error, 3 on no end in 60 s.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/dma-buf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

/* The descriptors open in this process: bit n of `open` is descriptor n (below 1024). */
typedef struct {
    uint64_t open[16];
} descriptor_set;

static descriptor_set open_descriptors(void) {
    descriptor_set set;
    memset(&set, 0, sizeof set);
    DIR *directory = opendir("/proc/self/fd");
    if (directory == NULL) return set;
    const int own = dirfd(directory);
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL) {
        const int fd = atoi(entry->d_name);
        if (entry->d_name[0] >= '0' && entry->d_name[0] <= '9' && fd != own && fd >= 0 && fd < 1024) {
            set.open[fd / 64] |= 1ULL << (fd % 64);
        }
    }
    closedir(directory);
    return set;
}

/* Descriptors open in `after` that were not in `before`. The library's connection thread may close descriptors of
 * its own meanwhile (the stream's end arriving while a frame is checked), so a count of open descriptors can fall:
 * only descriptors that appeared count as leaked. */
static int descriptors_opened(const descriptor_set *before, const descriptor_set *after) {
    int count = 0;
    for (int i = 0; i < 16; i++) count += __builtin_popcountll(after->open[i] & ~before->open[i]);
    return count;
}

static int sync_dma_buf(int fd, uint64_t flags) {
    struct dma_buf_sync sync = {.flags = flags};
    while (ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync) != 0) {
        if (errno != EINTR && errno != EAGAIN) return 0;
    }
    return 1;
}

/* Checks one frame; returns whether every check held. */
static int check_frame(const fb_frame *frame) {
    fb_frame_info info;
    CHECK_OK(fb_frame_get_info(frame, &info, &last_error));
    const descriptor_set before = open_descriptors();

    fb_error dup_error;
    memset(&dup_error, 0, sizeof dup_error);
    const int32_t single = fb_frame_dup_fd(frame, &dup_error);
    const char *dup_status = single >= 0 ? "FB_OK" : fb_status_name(dup_error.code);
    if (single >= 0) close(single);

    fb_frame_fds fds;
    memset(&fds, 0x5a, sizeof fds);
    CHECK_OK(fb_frame_dup_fds(frame, &fds, &last_error));
    int same = fds.count >= 1 && fds.count <= FB_MAX_PLANES;
    int distinct = 1, writable = 0, closed = 1;
    for (uint32_t i = fds.count; same && i < FB_MAX_PLANES; i++) same = fds.planes[i].fd == -1;
    const uint32_t expected_count = info.plane_count > 0 ? info.plane_count : 1;
    if (fds.count != expected_count) same = 0;
    for (uint32_t i = 0; same && i < fds.count; i++) {
        const fb_frame_plane_fd *plane = &fds.planes[i];
        for (uint32_t j = 0; j < i; j++) distinct = distinct && fds.planes[j].fd != plane->fd;
        struct stat status;
        if (plane->fd < 0 || fstat(plane->fd, &status) != 0 || (uint64_t)status.st_size < plane->size) {
            same = 0;
            break;
        }
        void *mapping = mmap(NULL, plane->size, PROT_READ, MAP_SHARED, plane->fd, 0);
        if (mapping == MAP_FAILED) {
            same = 0;
            break;
        }
        if (fds.is_dma_buf && !sync_dma_buf(plane->fd, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ)) same = 0;
        const uint8_t *mine = (const uint8_t *)mapping + plane->offset;
        if (info.plane_count > 0) {
            const fb_plane *library = &info.planes[i];
            same = same && plane->offset == library->offset && plane->bytes_per_row == library->bytes_per_row &&
                   plane->offset + library->byte_count <= plane->size &&
                   memcmp(mine, library->data, library->byte_count) == 0;
        } else {
            same = same && info.compressed_data != NULL && info.bytes_used <= plane->size &&
                   memcmp(mine, info.compressed_data, info.bytes_used) == 0;
        }
        if (fds.is_dma_buf && !sync_dma_buf(plane->fd, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ)) same = 0;
        munmap(mapping, plane->size);
        void *write_mapping = mmap(NULL, plane->size, PROT_READ | PROT_WRITE, MAP_SHARED, plane->fd, 0);
        if (write_mapping != MAP_FAILED) {
            writable = 1;
            munmap(write_mapping, plane->size);
        }
    }
    for (uint32_t i = 0; i < fds.count && i < FB_MAX_PLANES; i++) {
        if (fds.planes[i].fd >= 0 && close(fds.planes[i].fd) != 0) closed = 0;
    }
    for (uint32_t i = 0; i < fds.count && i < FB_MAX_PLANES; i++) {
        if (fds.planes[i].fd >= 0 && fcntl(fds.planes[i].fd, F_GETFD) != -1) closed = 0;
    }
    const descriptor_set after = open_descriptors();
    const int leaked = descriptors_opened(&before, &after);
    printf("frame seq=%llu dup_fd=%s count=%u dma=%u modifier=%llu same=%d distinct=%d writable=%d "
           "closed=%d leaked=%d\n",
           (unsigned long long)info.sequence, dup_status, fds.count, fds.is_dma_buf,
           (unsigned long long)fds.modifier, same, distinct, writable, closed, leaked);
    return same && distinct && closed && leaked == 0 && (single >= 0 || dup_error.code == FB_ERROR_FORMAT_MISMATCH);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: dupfds PATH ACCEPT\n");
        return 64;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint32_t accepted[16];
    size_t accepted_count = 0;
    for (char *token = strtok(argv[2], ","); token != NULL && accepted_count < 16; token = strtok(NULL, ",")) {
        accepted[accepted_count++] = fourcc_from_string(token);
    }
    fb_subscriber_options options;
    fb_subscriber_options_init(&options);
    options.path = argv[1];
    options.accepted_formats = accepted;
    options.accepted_format_count = accepted_count;
    options.connect_timeout_ns = 60ll * 1000000000ll;
    fb_subscriber *subscriber = NULL;
    CHECK_OK(fb_subscriber_create(&options, &subscriber, &last_error));

    fb_frame_fds unused;
    const int nulls = fb_frame_dup_fds(NULL, &unused, NULL) == FB_ERROR_INVALID_ARGUMENT &&
                      fb_frame_dup_fd(NULL, NULL) == -1;
    printf("nulls=%d\n", nulls);
    int all_ok = nulls, ended = 0;
    for (int polls = 0; polls < 600 && !ended; polls++) {
        fb_event event;
        fb_status status = fb_subscriber_next_event(subscriber, 100000000, &event, &last_error);
        if (status == FB_ERROR_TIMED_OUT) continue;
        CHECK_OK(status);
        polls = 0;
        switch (event.type) {
        case FB_EVENT_FRAME:
            if (fb_frame_dup_fds(event.frame, NULL, NULL) != FB_ERROR_INVALID_ARGUMENT) all_ok = 0;
            all_ok = check_frame(event.frame) && all_ok;
            fb_frame_release(event.frame);
            break;
        case FB_EVENT_END:
            printf("end status=%s\n", fb_status_name(event.end_status));
            ended = 1;
            break;
        default:
            break;
        }
    }
    fb_subscriber_destroy(subscriber);
    if (!ended) return 3;
    return all_ok ? 0 : 1;
}
