#pragma once

// What a beehive's store writer reports of itself (inspect_atom), for tests that count
// its transactions or what waits behind a within block.

#include <cstdint>

#include <gtest/gtest.h>
#include <caf/scoped_actor.hpp>

#include <beehive/actors.hpp>
#include <beehive/beehive.hpp>

namespace beehive::test {

inline store_writer_state writer_state(Beehive& bh) {
  auto writer = bh.store_writer();
  caf::scoped_actor self{writer->home_system()};
  store_writer_state out;
  self->request(writer, caf::infinite, inspect_atom::value)
      .receive([&](const store_writer_state& st) { out = st; }, [](caf::error&) { ADD_FAILURE(); });
  return out;
}

/// Transactions the store writer has committed.
inline std::uint64_t writer_transactions(Beehive& bh) { return writer_state(bh).transactions; }

}  // namespace beehive::test
