#pragma once

// A step back of the writer's wall clock, as the change-log trim corrects it.

#include <cstdint>

#include <beehive/time.hpp>

namespace beehive::store {

/// The writer's clock stepped back to `to` while the change log's newest entry was
/// `up_to`: the entries up to it happened by `to` at the latest, whatever they say.
struct ClockStep {
  std::int64_t up_to;
  Time to;
};

}  // namespace beehive::store
