#include "cogd_crc32c.h"

#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>

int cogd_crc32c_hardware_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
}

__attribute__((target("sse4.2")))
uint32_t cogd_crc32c_hardware_update(uint32_t crc, const uint8_t *bytes, size_t count) {
    uint64_t wide = crc;
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, bytes, 8);
        wide = _mm_crc32_u64(wide, word);
        bytes += 8;
        count -= 8;
    }
    uint32_t narrow = (uint32_t)wide;
    while (count > 0) {
        narrow = _mm_crc32_u8(narrow, *bytes);
        bytes += 1;
        count -= 1;
    }
    return narrow;
}
#else
int cogd_crc32c_hardware_available(void) { return 0; }

uint32_t cogd_crc32c_hardware_update(uint32_t crc, const uint8_t *bytes, size_t count) {
    (void)bytes;
    (void)count;
    return crc;
}
#endif
