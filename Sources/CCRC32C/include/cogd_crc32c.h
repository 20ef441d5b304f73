#ifndef COGD_CRC32C_H
#define COGD_CRC32C_H
#include <stddef.h>
#include <stdint.h>

/// Whether this CPU has the SSE 4.2 CRC32 instruction (x86-64), which
/// computes CRC-32C (Castagnoli) eight bytes at a time.
int cogd_crc32c_hardware_available(void);

/// Continues a CRC-32C (reflected, not yet finally XORed) over `count` bytes
/// with the CRC32 instruction. Call only when `cogd_crc32c_hardware_available()`.
uint32_t cogd_crc32c_hardware_update(uint32_t crc, const uint8_t *bytes, size_t count);

#endif
