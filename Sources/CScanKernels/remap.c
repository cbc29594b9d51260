// rk_remap (scan_kernels.h): the index's row, code and term buffers grow without a copy.
#define _GNU_SOURCE
#include <sys/mman.h>

#include "scan_kernels.h"

void *rk_remap(void *old, size_t old_size, size_t new_size) {
    void *moved = mremap(old, old_size, new_size, MREMAP_MAYMOVE);
    return moved == MAP_FAILED ? NULL : moved;
}
