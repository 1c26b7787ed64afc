#pragma once

// Names the calling thread (Linux: what top -H, gdb and /proc show; at most 15
// characters). Beehive's detached actors name their own threads, so that a stack dump of
// a hung process says which actor each thread serves (CAF calls them all "caf.actor").

#if defined(__linux__)
#include <pthread.h>
#endif

namespace beehive::detail {

inline void name_this_thread([[maybe_unused]] const char* name) {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), name);
#endif
}

}  // namespace beehive::detail
