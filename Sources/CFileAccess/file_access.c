// A file's access ACL for Swift: the Swift Glibc module does not include
// <sys/xattr.h>.
#include "file_access.h"

#include <errno.h>
#include <sys/xattr.h>

long cogd_access_acl(int fd, uint8_t *buffer, size_t bytes) {
    ssize_t length;
    do {
        length = fgetxattr(fd, "system.posix_acl_access", buffer, bytes);
    } while (length < 0 && errno == EINTR);
    if (length < 0 && (errno == ENODATA || errno == ENOTSUP)) return 0;
    return (long)length;
}
