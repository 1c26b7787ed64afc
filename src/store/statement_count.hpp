#pragma once

// How many statements the process's store connections have run, whatever the backend:
// tests use it to show that batched reads stay a constant number of queries.
//
// A relaxed atomic: safe on any thread.

#include <atomic>
#include <cstdint>

namespace beehive::store {

inline std::atomic<std::uint64_t> statements_counted{0};

inline void count_statement() { statements_counted.fetch_add(1, std::memory_order_relaxed); }

/// Statements run by every connection of the process so far.
inline std::uint64_t statements_run() {
  return statements_counted.load(std::memory_order_relaxed);
}

}  // namespace beehive::store
