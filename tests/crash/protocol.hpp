#pragma once

// Shared by the crash writer (tests/crash/writer.cpp) and the crash test
// (tests/crash_test.cpp): the kind and types the writer stores, and the line protocol it
// speaks on stdout.
//
// Usage: crash_writer <db-file> <normal|full> <seed> <cycle> [mixed|bulk|bulk-idle]
//
// The writer opens the store, starts a beehive with a do-nothing controller for
// `crash_kind`, lists the objects already there, prints "R" and then writes one write at
// a time, until SIGKILL:
//
//   mixed       (the default) writes of every kind, chosen at random, forever;
//   bulk        `within` blocks large enough to spill SQLite's page cache, forever: an
//               update of one object, `bulk_creates` creates of `bulk_bytes`-byte specs,
//               an update of the same object again (a create first if there is none);
//   bulk-idle   one such block, then "I <µs the block took>" and nothing more: the
//               process sits idle until it is killed.
//
// For each write it prints, in one write(2) call (so a kill never leaves half a
// description):
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
//   bulk <prefix> <n> <bytes>                 (in a within block only) n creates, slugs
//                                             <prefix>-0 .. <prefix>-<n-1>, spec
//                                             {bulk_color(slug, bytes), i}, no finalizer
//
// A failing call prints "F <message>" and exits with status 3.

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include <beehive/group_kind.hpp>

namespace beehive::crash {

inline const GroupKind crash_kind{"crash.test", "Item"};
inline const std::string crash_finalizer = "crash.test/hold";

/// A bulk block's size: rows of ~1.6 KB, two to a 4 KiB page, with their index entries
/// need more pages than SQLite's default page cache holds (2000 KiB), so the transaction
/// spills pages to the WAL before its commit and then writes some of them again.
constexpr int bulk_creates = 900;
constexpr std::size_t bulk_bytes = 1500;

/// The color of a bulk-created object: `bytes` letters that depend on its slug, so that
/// rows swapped or cut short would not compare equal.
inline std::string bulk_color(const std::string& slug, std::size_t bytes) {
  std::size_t h = 0;
  for (char c : slug) h = h * 31 + static_cast<unsigned char>(c);
  std::string s(bytes, 'a');
  for (std::size_t i = 0; i < bytes; ++i) s[i] = static_cast<char>('a' + (h + i * 7) % 26);
  return s;
}

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
