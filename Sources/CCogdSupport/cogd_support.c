// Allocation counting for `cogd bench`: wraps glibc's allocator entry points
// (it exports the __libc_* originals) and counts calls. Only the cogd
// executable links this target.
#define _GNU_SOURCE
#include "cogd_support.h"
#include <stdatomic.h>
#include <stddef.h>
#include <sys/resource.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static _Atomic uint64_t cogd_allocations;

static inline void cogd_count(void) {
    atomic_fetch_add_explicit(&cogd_allocations, 1, memory_order_relaxed);
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
    return atomic_load_explicit(&cogd_allocations, memory_order_relaxed);
}

uint64_t cogd_peak_rss_bytes(void) {
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
    return (uint64_t)usage.ru_maxrss * 1024;
}
