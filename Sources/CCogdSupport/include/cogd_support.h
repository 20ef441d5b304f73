#ifndef COGD_SUPPORT_H
#define COGD_SUPPORT_H
#include <stdint.h>

/// Number of heap allocations (malloc, calloc, realloc, posix_memalign,
/// aligned_alloc) made by the calling thread so far. Counting works by
/// interposing the allocator entry points in the `cogd-lab` executable;
/// benchmarks read it before and after a measured loop on that thread.
uint64_t cogd_allocation_count(void);

/// Peak resident set size of this process, in bytes.
uint64_t cogd_peak_rss_bytes(void);

#endif
