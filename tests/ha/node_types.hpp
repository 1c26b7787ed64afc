#pragma once

// The Widget spec and status the HA node process (tests/ha/node.cpp) and its tests
// (tests/ha_test.cpp) share: a spec's `sleep_ms` makes the node's pass sleep before its
// status write; the status records the writer's pid.

#include <nlohmann/json.hpp>

namespace beehive::test {

struct NodeSpec {
  int n = 0;
  int sleep_ms = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NodeSpec, n, sleep_ms)

struct NodeStatus {
  int n = 0;
  int pid = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NodeStatus, n, pid)

}  // namespace beehive::test
