#pragma once

// Kills a beehive's store writer and holds its successor's connection from opening
// (detail::faults::hold_writer_reopen) until released or destroyed: meanwhile the
// beehive has no writer, as while a store that went away is being reopened.

#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include <beehive/actors.hpp>

#include "actors/spawn_faults.hpp"
#include "controller_fixture.hpp"

namespace beehive::test {

class WriterReopenHeld {
 public:
  explicit WriterReopenHeld(Beehive& bh) {
    detail::faults::hold_writer_reopen = true;
    caf::anon_send_exit(bh.store_writer(), caf::exit_reason::kill);
    gone_ = eventually([&] { return !bh.store_writer(); });
  }
  ~WriterReopenHeld() { release(); }
  WriterReopenHeld(const WriterReopenHeld&) = delete;
  WriterReopenHeld& operator=(const WriterReopenHeld&) = delete;

  /// Whether the writer was gone (its successor opening) within eventually's wait.
  bool writer_gone() const { return gone_; }
  /// Lets the successor's connection open.
  void release() { detail::faults::hold_writer_reopen = false; }

 private:
  bool gone_ = false;
};

}  // namespace beehive::test
