#include "CFrameBusRecordingShims.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/types.h>

int cfbr_open_recording(const char *path, int direct) {
    int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
    if (direct) flags |= O_DIRECT;
    return open(path, flags, 0644);
}

int cfbr_set_direct(int fd, int direct) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    flags = direct ? (flags | O_DIRECT) : (flags & ~O_DIRECT);
    return fcntl(fd, F_SETFL, flags);
}

int cfbr_is_direct(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    return (flags & O_DIRECT) != 0;
}

int cfbr_reserve(int fd, int64_t offset, int64_t length) {
    return fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)length);
}

int cfbr_sync_range(int fd, int64_t offset, int64_t length, int wait) {
    unsigned int flags = SYNC_FILE_RANGE_WRITE;
    if (wait) flags |= SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WAIT_AFTER;
    return sync_file_range(fd, (off_t)offset, (off_t)length, flags);
}

int cfbr_drop_cache(int fd, int64_t offset, int64_t length) {
    return posix_fadvise(fd, (off_t)offset, (off_t)length, POSIX_FADV_DONTNEED);
}
