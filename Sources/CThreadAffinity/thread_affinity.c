// Linux thread affinity and heap settings for Swift: glibc declares
// sched_{get,set}affinity only under _GNU_SOURCE, which the Swift Glibc
// module is not built with; mallopt is in <malloc.h>, which it leaves out.
#define _GNU_SOURCE
#include "thread_affinity.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

int cogd_thread_affinity(uint8_t *mask, size_t bytes) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return errno;
    memset(mask, 0, bytes);
    for (size_t cpu = 0; cpu < bytes * 8 && cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, &set)) mask[cpu / 8] |= (uint8_t)(1u << (cpu % 8));
    }
    return 0;
}

int cogd_set_thread_affinity(int tid, const uint8_t *mask, size_t bytes) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (size_t cpu = 0; cpu < bytes * 8 && cpu < CPU_SETSIZE; cpu++) {
        if (mask[cpu / 8] & (1u << (cpu % 8))) CPU_SET(cpu, &set);
    }
    return sched_setaffinity(tid, sizeof set, &set) == 0 ? 0 : errno;
}

int cogd_set_thread_name(const char *name) {
    char cut[16];
    strncpy(cut, name, sizeof cut - 1);
    cut[sizeof cut - 1] = 0;
    return pthread_setname_np(pthread_self(), cut);
}

int cogd_thread_name(char *name, size_t bytes) {
    if (bytes < 16) return ERANGE;
    return pthread_getname_np(pthread_self(), name, bytes);
}

void cogd_keep_heap(size_t map_from, size_t trim_past) {
    mallopt(M_MMAP_THRESHOLD, (int)map_from);
    mallopt(M_TRIM_THRESHOLD, (int)trim_past);
}
