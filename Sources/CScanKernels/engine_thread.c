// A thread-local mark for the engine's own threads (scan_kernels.h, rk_mark_engine_thread).
#define _GNU_SOURCE  // pthread_setname_np
#include <pthread.h>

#include "scan_kernels.h"

static _Thread_local int engine_thread;

void rk_mark_engine_thread(const char *name) {
    engine_thread = 1;
    pthread_setname_np(pthread_self(), name);  // fails only for a name over 15 bytes: then unnamed
}

int rk_is_engine_thread(void) { return engine_thread; }
