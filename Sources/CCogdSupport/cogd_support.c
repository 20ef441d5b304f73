// Allocation counting for `cogd-lab bench`: wraps glibc's allocator entry
// points (it exports the __libc_* originals) and counts calls, per thread
// (no counter shared between threads, so counting costs no cache line
// bounced between cores). Only the lab (`cogd-lab`, and the leaders its
// benchmarks start, which are the same executable) links this target: the
// runtime's `cogd` and a user's app do not.
#define _GNU_SOURCE
#include "cogd_support.h"
#include <stddef.h>
#include <sys/resource.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static _Thread_local uint64_t cogd_thread_allocations;

static inline void cogd_count(void) {
    cogd_thread_allocations += 1;
}

void *malloc(size_t size) {
    cogd_count();
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    cogd_count();
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    cogd_count();
    return __libc_realloc(pointer, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    cogd_count();
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return 12; /* ENOMEM */
    *result = pointer;
    return 0;
}

void *aligned_alloc(size_t alignment, size_t size) {
    cogd_count();
    return __libc_memalign(alignment, size);
}

uint64_t cogd_allocation_count(void) {
    return cogd_thread_allocations;
}

uint64_t cogd_peak_rss_bytes(void) {
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
    return (uint64_t)usage.ru_maxrss * 1024;
}
