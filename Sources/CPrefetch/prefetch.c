// Everything is inline in include/prefetch.h; SwiftPM builds a C target only from a source file.
#include "prefetch.h"
