#ifndef COGD_PREFETCH_H
#define COGD_PREFETCH_H

/// Asks the processor to bring the cache line at `address` in for a write,
/// without waiting for it: a lookup that will touch it after other work
/// (`EntryHashCache`) then finds it in cache. A hint only; any address is
/// safe, nothing is read.
static inline void cogd_prefetch_for_write(const void *address) {
    __builtin_prefetch(address, 1, 3);
}

#endif
