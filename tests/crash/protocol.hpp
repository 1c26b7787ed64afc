#pragma once

// Shared by the crash writer (tests/crash/writer.cpp) and the crash test
// (tests/crash_test.cpp): the kind and types the writer stores, and the line protocol it
// speaks on stdout.
//
// Usage: crash_writer <db-file> <normal|full> <seed> <cycle>
//
// The writer opens the store, starts a beehive with a do-nothing controller for
// `crash_kind`, lists the objects already there, prints "R" and then loops forever
// (until SIGKILL) doing one write at a time. For each write it prints, in one write(2)
// call (so a kill never leaves half a description):
//
//   B <seq> <op>            the write about to be made, then for a `within` block
//   S <seq> <op>            one line per write inside the block
//
// and, once the call has returned (the write is acknowledged),
//
//   A <seq> [generation]    the generation the write returned, for create / update
//
// so at most one write is ever in flight: the last B without an A. Every object the
// writer creates has a slug; lines name objects by slug. Ops (no token is empty and
// none contains a space):
//
//   create <slug> <color> <size> <hold 0|1>   Client::create, with_slug, finalizer
//                                             `crash_finalizer` when hold is 1
//   update <slug> <color> <size>              Client::update
//   status <slug> <observed_generation> <seq> <note>   ControllerClient::update_status
//   cond <slug> <type> <True|False|Unknown> <reason> <message>   set_condition
//   event <slug> <category> <Normal|Warning> <reason> <message>  record_event
//   remove <slug>                             Client::remove (soft delete)
//   unfin <slug>                              remove_finalizer(crash_finalizer)
//   within <n>                                ControllerClient::within over the S lines
//
// A failing call prints "F <message>" and exits with status 3.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include <beehive/group_kind.hpp>

namespace beehive::crash {

inline const GroupKind crash_kind{"crash.test", "Item"};
inline const std::string crash_finalizer = "crash.test/hold";

struct ItemSpec {
  std::string color;
  int size = 0;
  friend bool operator==(const ItemSpec&, const ItemSpec&) = default;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ItemSpec, color, size)

struct ItemStatus {
  std::int64_t seq = 0;
  std::string note;
  friend bool operator==(const ItemStatus&, const ItemStatus&) = default;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ItemStatus, seq, note)

}  // namespace beehive::crash
