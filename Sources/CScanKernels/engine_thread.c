// A thread-local mark for the engine's own threads (scan_kernels.h, rk_mark_engine_thread).
#include "scan_kernels.h"

static _Thread_local int engine_thread;

void rk_mark_engine_thread(void) { engine_thread = 1; }

int rk_is_engine_thread(void) { return engine_thread; }
