#ifndef COGD_FILE_ACCESS_H
#define COGD_FILE_ACCESS_H
#include <stddef.h>
#include <stdint.h>

/// The open file `fd`'s POSIX access ACL (the `system.posix_acl_access`
/// attribute, in the kernel's layout) into `buffer`: its length in bytes;
/// 0 when the file has none (or its file system keeps none); -1 with errno
/// set on a failure (ERANGE: the ACL is longer than `bytes`).
long cogd_access_acl(int fd, uint8_t *buffer, size_t bytes);

/// Starts writing the open file `fd`'s dirty pages in [offset, offset +
/// bytes) to disk and returns without waiting for them (Linux's
/// `sync_file_range` with `SYNC_FILE_RANGE_WRITE`), so that a later fsync
/// has less left to wait for. Durability still needs that fsync. 0, or -1
/// with errno set.
int cogd_start_writeback(int fd, int64_t offset, int64_t bytes);

#endif
