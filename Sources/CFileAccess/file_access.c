// A file's access ACL, and starting a file's writeback, for Swift: the
// Swift Glibc module includes neither <sys/xattr.h> nor sync_file_range.
#define _GNU_SOURCE
#include "file_access.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/xattr.h>

long cogd_access_acl(int fd, uint8_t *buffer, size_t bytes) {
    ssize_t length;
    do {
        length = fgetxattr(fd, "system.posix_acl_access", buffer, bytes);
    } while (length < 0 && errno == EINTR);
    if (length < 0 && (errno == ENODATA || errno == ENOTSUP)) return 0;
    return (long)length;
}

int cogd_start_writeback(int fd, int64_t offset, int64_t bytes) {
    int result;
    do {
        result = sync_file_range(fd, offset, bytes, SYNC_FILE_RANGE_WRITE);
    } while (result < 0 && errno == EINTR);
    return result;
}
