// CFrameBusShims: the few things Swift cannot import directly.
//
// - memfd_create and file seals (need _GNU_SOURCE, which must never be defined in a header);
// - CMSG_* macros for SCM_RIGHTS;
// - SO_PEERCRED (struct ucred needs _GNU_SOURCE);
// - DMA-BUF, DMA heap and udmabuf ioctls (function-like _IOW/_IOWR macros), and fstatfs to recognise a DMA-BUF;
// - function-like drm_fourcc.h macros, mirrored as constants and checked with _Static_assert in shim.c;
// - eventfd, and futex wait/wake on shared memory (the bench's floors).
//
// Nothing else lives here.
#ifndef CFRAMEBUS_SHIMS_H
#define CFRAMEBUS_SHIMS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>

#pragma clang assume_nonnull begin

// MARK: memfd and seals

static const unsigned int CFB_MFD_CLOEXEC = 0x0001U;
static const unsigned int CFB_MFD_ALLOW_SEALING = 0x0002U;
static const int CFB_F_ADD_SEALS = 1033;
static const int CFB_F_GET_SEALS = 1034;
static const int CFB_F_SEAL_SEAL = 0x0001;
static const int CFB_F_SEAL_SHRINK = 0x0002;
static const int CFB_F_SEAL_GROW = 0x0004;
static const int CFB_F_SEAL_WRITE = 0x0008;
static const int CFB_F_SEAL_FUTURE_WRITE = 0x0010;

/// memfd_create(2). Returns the fd or -1 with errno set.
int cfb_memfd_create(const char *name, unsigned int flags);
/// fcntl(fd, F_ADD_SEALS, seals). Returns 0 or -1 with errno set.
int cfb_add_seals(int fd, int seals);
/// fcntl(fd, F_GET_SEALS). Returns the seal mask or -1 with errno set.
int cfb_get_seals(int fd);
/// fcntl(fd, F_GETFL). Returns the status flags or -1 with errno set.
int cfb_get_status_flags(int fd);
/// fcntl(fd, F_GETFD). Returns the fd flags or -1 with errno set.
int cfb_get_descriptor_flags(int fd);
/// madvise(addr, len, MADV_POPULATE_WRITE) (Linux 5.14). Returns 0 or -1 with errno set.
int cfb_madvise_populate_write(void *address, size_t length);

// MARK: control messages

size_t cfb_cmsg_space(size_t payload);
size_t cfb_cmsg_len(size_t payload);
struct cmsghdr *_Nullable cfb_cmsg_firsthdr(const struct msghdr *message);
struct cmsghdr *_Nullable cfb_cmsg_nxthdr(const struct msghdr *message, const struct cmsghdr *header);
unsigned char *cfb_cmsg_data(const struct cmsghdr *header);

/// getsockopt(fd, SOL_SOCKET, SO_PEERCRED). Returns 0 or -1 with errno set.
int cfb_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/// accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK): the new descriptor is close-on-exec from its first
/// instant. Returns the descriptor or -1 with errno set.
int cfb_accept_cloexec_nonblock(int fd);

// MARK: DMA-BUF

static const uint64_t CFB_DMA_BUF_SYNC_READ = 1ULL << 0;
static const uint64_t CFB_DMA_BUF_SYNC_WRITE = 2ULL << 0;
static const uint64_t CFB_DMA_BUF_SYNC_RW = 3ULL;
static const uint64_t CFB_DMA_BUF_SYNC_START = 0ULL << 2;
static const uint64_t CFB_DMA_BUF_SYNC_END = 1ULL << 2;
/// statfs(2) f_type of a DMA-BUF file (linux/magic.h DMA_BUF_MAGIC, "DMAB").
static const long CFB_DMA_BUF_MAGIC = 0x444d4142L;
/// fstatfs(fd) (sys/vfs.h, which Swift's Glibc module lacks): stores f_type. Returns 0 or -1 with errno set.
int cfb_file_system_type(int fd, long *type);

/// ioctl(fd, DMA_BUF_IOCTL_SYNC, { flags }). Returns 0 or -1 with errno set.
int cfb_dma_buf_sync(int fd, uint64_t flags);
/// ioctl(heap, DMA_HEAP_IOCTL_ALLOC, ...) with O_RDWR | O_CLOEXEC. Returns the dma-buf fd or -1 with errno set.
int cfb_dma_heap_alloc(int heapFD, uint64_t length);
/// DMA_HEAP_IOCTL_ALLOC with the new descriptor's access mode (O_RDONLY, O_WRONLY or O_RDWR): the exporter's choice
/// of what its importers may map. Returns the DMA-BUF fd, or -1 with errno.
int cfb_dma_heap_alloc_mode(int heapFD, uint64_t length, int accessMode);
/// ioctl(udmabuf, UDMABUF_CREATE, { memfd, UDMABUF_FLAGS_CLOEXEC, offset, size }). Returns the dma-buf fd or -1.
int cfb_udmabuf_create(int udmabufFD, int memfd, uint64_t offset, uint64_t size);

// MARK: DRM fourcc (drm_fourcc.h's fourcc_code() is a function-like macro)

static const uint32_t CFB_DRM_FORMAT_NV12 = 0x3231564EU;      // 'N','V','1','2'
static const uint32_t CFB_DRM_FORMAT_P010 = 0x30313050U;      // 'P','0','1','0'
static const uint32_t CFB_DRM_FORMAT_ARGB8888 = 0x34325241U;  // 'A','R','2','4'
static const uint64_t CFB_DRM_FORMAT_MOD_LINEAR = 0ULL;
static const uint64_t CFB_DRM_FORMAT_MOD_INVALID = 0x00ffffffffffffffULL;

/// eventfd(0, EFD_CLOEXEC), blocking (sys/eventfd.h, which Swift's Glibc module lacks): `framebus bench bus`'s
/// eventfd floor.
int cfb_eventfd_blocking(void);

/// eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK): the doorbell that wakes a poll loop from another thread.
int cfb_eventfd_nonblocking(void);

// MARK: futex broadcast (`framebus bench bus`'s fan-out floor)

/// Waits while the 32-bit word at `word` (in memory shared between processes) still holds `seen`, at most
/// `timeoutMilliseconds`: FUTEX_WAIT (not private: the word is in a shared mapping) with an acquire re-check.
/// Returns the word's value when it differs from `seen`, or `seen` on timeout.
uint32_t cfb_futex_wait_change(uint32_t *word, uint32_t seen, int timeoutMilliseconds);
/// Stores `stamp` at `stamp` and adds one to `word` (both with release ordering, the stamp first), then wakes every
/// process waiting on `word` with one FUTEX_WAKE. Returns the number woken, or -1 with errno set.
int cfb_futex_publish(uint32_t *word, uint64_t *stamp, uint64_t value);
/// Reads a 64-bit word with acquire ordering (the stamp written by `cfb_futex_publish` or `cfb_store_release_u64`).
uint64_t cfb_load_acquire_u64(const uint64_t *word);
/// Writes a 64-bit word with release ordering.
void cfb_store_release_u64(uint64_t *word, uint64_t value);

// MARK: futex wake-ups of protocol version 3 (docs/PROTOCOL.md §9.8)

/// FUTEX_WAKE of at most `count` waiters on the 32-bit word at `word`; `isPrivate` for a word in private memory
/// (FUTEX_PRIVATE_FLAG), else a word in a shared mapping. Never blocks. Returns the number woken, or -1 with errno set.
int cfb_futex_wake(uint32_t *word, int count, int isPrivate);
/// futex_waitv(2) (Linux 5.16+) on two 32-bit words: sleeps while `shared` (in a shared mapping, possibly read-only)
/// holds `sharedSeen` and `local` (private memory) holds `localSeen`, until either is woken or `timeoutNanoseconds`
/// (relative, CLOCK_MONOTONIC) pass. Returns the index woken (0 or 1), or -1 with errno set (EAGAIN: a word differed
/// already; ETIMEDOUT; EINTR; ENOSYS: the kernel lacks futex_waitv).
int cfb_futex_waitv2(const uint32_t *shared, uint32_t sharedSeen, uint32_t *local, uint32_t localSeen,
                     int64_t timeoutNanoseconds);

// MARK: the connection thread's scheduler slice (Subscriber.Configuration.connectionThreadSlice)

/// Asks the scheduler to give the calling thread a slice of `nanoseconds` (sched_setattr(2): SCHED_OTHER with
/// `sched_runtime`, which Linux 6.12+ reads as the EEVDF slice it requests; 0 returns to the kernel's default; older
/// kernels ignore it). Keeps the thread's nice value and reset-on-fork flag; does nothing to a thread whose policy is
/// not SCHED_OTHER (someone chose another on purpose). Returns 0, 1 if the policy was left alone, or -errno.
int cfb_set_scheduler_slice(uint64_t nanoseconds);
/// The slice thread `tid` of this process runs with, in nanoseconds (sched_getattr(2)'s `sched_runtime` for a
/// SCHED_OTHER thread: Linux 6.12+), or -errno.
int64_t cfb_scheduler_slice(int tid);
/// gettid(2).
int cfb_thread_id(void);

#pragma clang assume_nonnull end

#endif
