#pragma once

// crash_controller: kills a kind's controller as a crash would, and waits until the root
// has put a new one in its place (the supervisor's restart).

#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include <beehive/actors.hpp>

#include "controller_fixture.hpp"

namespace beehive::test {

/// True once the kind has a controller other than the one killed; false if none came
/// within `eventually`'s limit.
inline bool crash_controller(Beehive& bh, const GroupKind& gk) {
  auto old = bh.controller(gk);
  if (!old) return false;
  caf::anon_send_exit(*old, caf::exit_reason::kill);
  return eventually([&] {
    auto now = bh.controller(gk);
    return now && *now != *old;
  });
}

}  // namespace beehive::test
