// CRC-32C's hardware step, for RegistryModel's CRC32C (the store's record and payload checksums,
// the dump trailer). A target of its own so that the model, which clients build on, depends on
// nothing larger than these two functions.
#ifndef REGISTRY_CHECKSUM_H
#define REGISTRY_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Whether this CPU has SSE4.2's crc32 instruction (asked at run time: the binary runs on any x86-64).
int rk_has_crc32c(void);

/// Advances a CRC-32C state (no inversions: the caller starts from 0xFFFFFFFF and inverts the
/// result) over `count` bytes with the crc32 instruction. Only where rk_has_crc32c() says so.
uint32_t rk_crc32c_update(uint32_t state, const void *bytes, size_t count);

#ifdef __cplusplus
}
#endif

#endif
