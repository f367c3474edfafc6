// Compiled with _GNU_SOURCE (see Package.swift); never defined in the header.
#include "CFrameBusShims.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <linux/dma-buf.h>
#include <linux/dma-heap.h>
#include <linux/magic.h>
#include <linux/udmabuf.h>
// DRM fourccs come from the kernel UAPI header; nothing links libdrm. Debian's linux-libc-dev does not ship
// <drm/drm_fourcc.h>, but libdrm-dev carries the same header as <libdrm/drm_fourcc.h>. With neither installed the
// mirrored constants in the header are simply not cross-checked.
#if __has_include(<drm/drm_fourcc.h>)
#include <drm/drm_fourcc.h>
#define CFB_HAVE_DRM_FOURCC_H 1
#elif __has_include(<libdrm/drm_fourcc.h>)
#include <libdrm/drm_fourcc.h>
#define CFB_HAVE_DRM_FOURCC_H 1
#endif

_Static_assert(CFB_MFD_CLOEXEC == MFD_CLOEXEC, "MFD_CLOEXEC");
_Static_assert(CFB_MFD_ALLOW_SEALING == MFD_ALLOW_SEALING, "MFD_ALLOW_SEALING");
_Static_assert(CFB_F_ADD_SEALS == F_ADD_SEALS, "F_ADD_SEALS");
_Static_assert(CFB_F_GET_SEALS == F_GET_SEALS, "F_GET_SEALS");
_Static_assert(CFB_F_SEAL_SEAL == F_SEAL_SEAL, "F_SEAL_SEAL");
_Static_assert(CFB_F_SEAL_SHRINK == F_SEAL_SHRINK, "F_SEAL_SHRINK");
_Static_assert(CFB_F_SEAL_GROW == F_SEAL_GROW, "F_SEAL_GROW");
_Static_assert(CFB_F_SEAL_WRITE == F_SEAL_WRITE, "F_SEAL_WRITE");
_Static_assert(CFB_F_SEAL_FUTURE_WRITE == F_SEAL_FUTURE_WRITE, "F_SEAL_FUTURE_WRITE");
_Static_assert(CFB_DMA_BUF_SYNC_READ == DMA_BUF_SYNC_READ, "DMA_BUF_SYNC_READ");
_Static_assert(CFB_DMA_BUF_SYNC_WRITE == DMA_BUF_SYNC_WRITE, "DMA_BUF_SYNC_WRITE");
_Static_assert(CFB_DMA_BUF_SYNC_RW == DMA_BUF_SYNC_RW, "DMA_BUF_SYNC_RW");
_Static_assert(CFB_DMA_BUF_SYNC_START == DMA_BUF_SYNC_START, "DMA_BUF_SYNC_START");
_Static_assert(CFB_DMA_BUF_SYNC_END == DMA_BUF_SYNC_END, "DMA_BUF_SYNC_END");
_Static_assert(CFB_DMA_BUF_MAGIC == DMA_BUF_MAGIC, "DMA_BUF_MAGIC");
#ifdef CFB_HAVE_DRM_FOURCC_H
_Static_assert(CFB_DRM_FORMAT_NV12 == DRM_FORMAT_NV12, "DRM_FORMAT_NV12");
_Static_assert(CFB_DRM_FORMAT_P010 == DRM_FORMAT_P010, "DRM_FORMAT_P010");
_Static_assert(CFB_DRM_FORMAT_ARGB8888 == DRM_FORMAT_ARGB8888, "DRM_FORMAT_ARGB8888");
_Static_assert(CFB_DRM_FORMAT_MOD_LINEAR == DRM_FORMAT_MOD_LINEAR, "DRM_FORMAT_MOD_LINEAR");
_Static_assert(CFB_DRM_FORMAT_MOD_INVALID == DRM_FORMAT_MOD_INVALID, "DRM_FORMAT_MOD_INVALID");
#endif

int cfb_memfd_create(const char *name, unsigned int flags) { return memfd_create(name, flags); }
int cfb_add_seals(int fd, int seals) { return fcntl(fd, F_ADD_SEALS, seals); }
int cfb_get_seals(int fd) { return fcntl(fd, F_GET_SEALS); }
int cfb_get_status_flags(int fd) { return fcntl(fd, F_GETFL); }
int cfb_get_descriptor_flags(int fd) { return fcntl(fd, F_GETFD); }

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
int cfb_madvise_populate_write(void *address, size_t length) {
    return madvise(address, length, MADV_POPULATE_WRITE);
}

size_t cfb_cmsg_space(size_t payload) { return CMSG_SPACE(payload); }
size_t cfb_cmsg_len(size_t payload) { return CMSG_LEN(payload); }
struct cmsghdr *cfb_cmsg_firsthdr(const struct msghdr *message) { return CMSG_FIRSTHDR(message); }
struct cmsghdr *cfb_cmsg_nxthdr(const struct msghdr *message, const struct cmsghdr *header) {
    return CMSG_NXTHDR((struct msghdr *)message, (struct cmsghdr *)header);
}
unsigned char *cfb_cmsg_data(const struct cmsghdr *header) { return CMSG_DATA((struct cmsghdr *)header); }

int cfb_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred credentials;
    socklen_t length = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

int cfb_accept_cloexec_nonblock(int fd) { return accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK); }

int cfb_file_system_type(int fd, long *type) {
    struct statfs info;
    if (fstatfs(fd, &info) != 0) return -1;
    *type = (long)info.f_type;
    return 0;
}

int cfb_dma_buf_sync(int fd, uint64_t flags) {
    struct dma_buf_sync sync = { .flags = flags };
    int result;
    do { result = ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync); } while (result == -1 && (errno == EINTR || errno == EAGAIN));
    return result;
}

int cfb_dma_heap_alloc(int heapFD, uint64_t length) {
    struct dma_heap_allocation_data data = {
        .len = length, .fd = 0, .fd_flags = O_RDWR | O_CLOEXEC, .heap_flags = 0,
    };
    if (ioctl(heapFD, DMA_HEAP_IOCTL_ALLOC, &data) != 0) return -1;
    return (int)data.fd;
}

int cfb_dma_heap_alloc_mode(int heapFD, uint64_t length, int accessMode) {
    struct dma_heap_allocation_data data = {
        .len = length, .fd = 0, .fd_flags = (uint32_t)(accessMode & O_ACCMODE) | O_CLOEXEC, .heap_flags = 0,
    };
    if (ioctl(heapFD, DMA_HEAP_IOCTL_ALLOC, &data) != 0) return -1;
    return (int)data.fd;
}

int cfb_udmabuf_create(int udmabufFD, int memfd, uint64_t offset, uint64_t size) {
    struct udmabuf_create create = {
        .memfd = (uint32_t)memfd, .flags = UDMABUF_FLAGS_CLOEXEC, .offset = offset, .size = size,
    };
    return ioctl(udmabufFD, UDMABUF_CREATE, &create);
}

int cfb_eventfd_blocking(void) { return eventfd(0, EFD_CLOEXEC); }

int cfb_eventfd_nonblocking(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

uint32_t cfb_futex_wait_change(uint32_t *word, uint32_t seen, int timeoutMilliseconds) {
    struct timespec now, deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeoutMilliseconds / 1000;
    deadline.tv_nsec += (long)(timeoutMilliseconds % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) { deadline.tv_sec += 1; deadline.tv_nsec -= 1000000000L; }
    for (;;) {
        uint32_t value = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        if (value != seen) return value;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long seconds = deadline.tv_sec - now.tv_sec;
        long nanoseconds = deadline.tv_nsec - now.tv_nsec;
        if (nanoseconds < 0) { seconds -= 1; nanoseconds += 1000000000L; }
        if (seconds < 0) return seen;
        struct timespec relative = { .tv_sec = seconds, .tv_nsec = nanoseconds };
        // FUTEX_WAIT returns at once (EAGAIN) if the word already changed; EINTR and spurious wake-ups loop.
        syscall(SYS_futex, word, FUTEX_WAIT, seen, &relative, NULL, 0);
    }
}

int cfb_futex_publish(uint32_t *word, uint64_t *stamp, uint64_t value) {
    __atomic_store_n(stamp, value, __ATOMIC_RELEASE);
    __atomic_fetch_add(word, 1, __ATOMIC_RELEASE);
    return (int)syscall(SYS_futex, word, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

uint64_t cfb_load_acquire_u64(const uint64_t *word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

void cfb_store_release_u64(uint64_t *word, uint64_t value) { __atomic_store_n(word, value, __ATOMIC_RELEASE); }

int cfb_futex_wake(uint32_t *word, int count, int isPrivate) {
    return (int)syscall(SYS_futex, word, isPrivate ? FUTEX_WAKE_PRIVATE : FUTEX_WAKE, count, NULL, NULL, 0);
}

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

int cfb_futex_waitv2(const uint32_t *shared, uint32_t sharedSeen, uint32_t *local, uint32_t localSeen,
                     int64_t timeoutNanoseconds) {
    // struct futex_waitv and FUTEX2_* from <linux/futex.h> (Linux 5.16 UAPI), spelled out for older headers.
    struct { uint64_t val; uint64_t uaddr; uint32_t flags; uint32_t reserved; } waiters[2] = {
        { sharedSeen, (uint64_t)(uintptr_t)shared, 0x02 /* FUTEX2_SIZE_U32 */, 0 },
        { localSeen, (uint64_t)(uintptr_t)local, 0x02 | 128 /* FUTEX2_SIZE_U32 | FUTEX2_PRIVATE */, 0 },
    };
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeoutNanoseconds / 1000000000L;
    deadline.tv_nsec += timeoutNanoseconds % 1000000000L;
    if (deadline.tv_nsec >= 1000000000L) { deadline.tv_sec += 1; deadline.tv_nsec -= 1000000000L; }
    return (int)syscall(SYS_futex_waitv, waiters, 2, 0, &deadline, CLOCK_MONOTONIC);
}

// struct sched_attr (sched_setattr(2), SCHED_ATTR_SIZE_VER1), spelled out: glibc 2.36's headers do not declare it.
struct cfb_sched_attr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
    uint32_t sched_util_min;
    uint32_t sched_util_max;
};
_Static_assert(sizeof(struct cfb_sched_attr) == 56, "SCHED_ATTR_SIZE_VER1");

#define CFB_SCHED_FLAG_RESET_ON_FORK 0x01

static int cfb_get_sched_attr(int tid, struct cfb_sched_attr *attr) {
    memset(attr, 0, sizeof *attr);
    return (int)syscall(SYS_sched_getattr, tid, attr, sizeof *attr, 0);
}

int cfb_set_scheduler_slice(uint64_t nanoseconds) {
    struct cfb_sched_attr attr;
    if (cfb_get_sched_attr(0, &attr) != 0) return -errno;
    if (attr.sched_policy != SCHED_OTHER) return 1;
    struct cfb_sched_attr wanted;
    memset(&wanted, 0, sizeof wanted);
    wanted.size = sizeof wanted;
    wanted.sched_policy = SCHED_OTHER;
    wanted.sched_flags = attr.sched_flags & CFB_SCHED_FLAG_RESET_ON_FORK;
    wanted.sched_nice = attr.sched_nice;
    wanted.sched_runtime = nanoseconds;
    return syscall(SYS_sched_setattr, 0, &wanted, 0) == 0 ? 0 : -errno;
}

int64_t cfb_scheduler_slice(int tid) {
    struct cfb_sched_attr attr;
    if (cfb_get_sched_attr(tid, &attr) != 0) return -errno;
    return (int64_t)attr.sched_runtime;
}

int cfb_thread_id(void) { return (int)syscall(SYS_gettid); }
