// A prefetch hint, which Swift cannot issue by itself: inline, so that a hint costs an instruction,
// not a call. A target of its own because both the storage layer (LMDB's structural check) and the
// engine's index use them, and neither should depend on the other's C code for it.
#ifndef REGISTRY_PREFETCH_H
#define REGISTRY_PREFETCH_H

/// Asks the CPU to start fetching the cache line at `address` (a hint: never faults).
static inline void rk_prefetch(const void *address) { __builtin_prefetch(address); }

#endif
