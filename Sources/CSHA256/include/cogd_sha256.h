#ifndef COGD_SHA256_H
#define COGD_SHA256_H
#include <stddef.h>
#include <stdint.h>

/// Whether this CPU has the SHA extensions (x86-64 SHA-NI, with SSSE3 and
/// SSE 4.1), which compress a SHA-256 block in a few dozen instructions.
int cogd_sha256_hardware_available(void);

/// Compresses `blocks` 64-byte blocks at `data` into `state` (the eight
/// working words, h0 first) with the SHA instructions. Call only when
/// `cogd_sha256_hardware_available()`.
void cogd_sha256_hardware_compress(uint32_t state[8], const uint8_t *data, size_t blocks);

#endif
