// Prefetch hints, which Swift cannot issue by itself: inline, so that a hint costs an instruction,
// not a call. A target of its own because both the storage layer (LMDB's structural check) and the
// engine's index use them, and neither should depend on the other's C code for it.
#ifndef REGISTRY_PREFETCH_H
#define REGISTRY_PREFETCH_H

#include <stddef.h>

/// Asks the CPU to start fetching the cache line at `address` (a hint: never faults).
static inline void rk_prefetch(const void *address) { __builtin_prefetch(address); }

/// Asks the CPU to start fetching every cache line of the `count` bytes at `bytes`, for reading once
/// (an address that is not mapped is ignored, never faulted in).
static inline void rk_prefetch_bytes(const void *bytes, size_t count) {
    for (size_t offset = 0; offset < count; offset += 64) __builtin_prefetch((const char *)bytes + offset, 0, 0);
}

#endif
