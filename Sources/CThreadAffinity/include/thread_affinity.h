#ifndef COGD_THREAD_AFFINITY_H
#define COGD_THREAD_AFFINITY_H
#include <stddef.h>
#include <stdint.h>

/// The calling thread's CPU affinity as a bit mask (bit N of byte N/8 is
/// CPU N), `bytes` long; 0 on success, else an errno value.
int cogd_thread_affinity(uint8_t *mask, size_t bytes);

/// Restricts thread `tid` of this process (0: the calling thread) to the
/// CPUs set in `mask`; 0 on success, else an errno value.
int cogd_set_thread_affinity(int tid, const uint8_t *mask, size_t bytes);

/// Names the calling thread (at most 15 bytes are kept); 0 on success, else
/// an errno value.
int cogd_set_thread_name(const char *name);

/// Copies the calling thread's name, NUL-terminated, into `name` (16 bytes
/// at least); 0 on success, else an errno value.
int cogd_thread_name(char *name, size_t bytes);

/// Sets glibc's heap thresholds for this process (`mallopt`): allocations
/// of `map_from` bytes or more are mapped on their own; free memory at the
/// heap's top is returned to the kernel past `trim_past` bytes.
void cogd_keep_heap(size_t map_from, size_t trim_past);

#endif
