#pragma once

// The actor systems a Beehive's destructor left to end on a thread of their own, because
// the application still held handles to their actors (BeehiveCore::end_own_system). The
// tests' main fails a test that leaves one behind unless the test expects it (and takes
// the count back to 0).

#include <atomic>

namespace beehive::detail {

inline std::atomic<int> systems_left_running{0};

}  // namespace beehive::detail
