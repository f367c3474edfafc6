#ifndef CFRAMEBUS_RECORDING_SHIMS_H
#define CFRAMEBUS_RECORDING_SHIMS_H

#include <stdint.h>

// The recorder's file calls that glibc declares only under _GNU_SOURCE (O_DIRECT, fallocate's flags,
// sync_file_range). Defined in shim.c, which is compiled with _GNU_SOURCE; this header never defines it.

/// open(2) for writing a new recording: O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, plus O_DIRECT when `direct` is
/// non-zero; mode 0644. Returns the descriptor or -1 with errno set.
int cfbr_open_recording(const char *_Nonnull path, int direct);

/// Turns O_DIRECT on or off on an open descriptor (fcntl F_SETFL). Returns 0 or -1 with errno set.
int cfbr_set_direct(int fd, int direct);

/// Whether O_DIRECT is set on the descriptor: 1, 0, or -1 with errno set.
int cfbr_is_direct(int fd);

/// fallocate(2) with FALLOC_FL_KEEP_SIZE: reserves blocks past the end without changing the file's size.
/// Returns 0 or -1 with errno set.
int cfbr_reserve(int fd, int64_t offset, int64_t length);

/// sync_file_range(2) of [offset, offset + length): starts writeback, and with `wait` non-zero also waits for it
/// (SYNC_FILE_RANGE_WAIT_BEFORE | WRITE | WAIT_AFTER). Returns 0 or -1 with errno set.
int cfbr_sync_range(int fd, int64_t offset, int64_t length, int wait);

/// posix_fadvise(2) POSIX_FADV_DONTNEED of [offset, offset + length): drops clean cached pages. Returns 0 or an
/// error number (posix_fadvise does not set errno).
int cfbr_drop_cache(int fd, int64_t offset, int64_t length);

#endif
