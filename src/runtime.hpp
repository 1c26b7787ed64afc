#pragma once

// Runtime: what a Beehive and its clients share — the actor system, the store, the
// clock, the actors' handles — and the blocking hand-off to the store_writer.

#include <atomic>
#include <memory>

#include <beehive/actors.hpp>
#include <beehive/options.hpp>

#include "actors/store_writer.hpp"
#include "options_internal.hpp"
#include "store/backend.hpp"

namespace beehive::detail {

class Runtime {
 public:
  Runtime(caf::actor_system* sys, std::shared_ptr<Store> store, const std::vector<Option>& opts);
  ~Runtime();

  store::Backend& backend() { return *backend_; }
  Clock& clock() { return *clock_; }
  const store_writer_actor& store_writer() const { return writer_public_; }

  /// Throws stopped once the beehive has stopped.
  void ensure_running() const;

  /// Sends `op` to the store_writer and waits for the commit, bounded by `ctx`.
  WriteReply write(const Context& ctx, WriteOp op, RowCheck check);

  /// Stops the actors and waits for them; idempotent.
  void shutdown();

 private:
  std::unique_ptr<caf::actor_system_config> own_cfg_;
  std::unique_ptr<caf::actor_system> own_sys_;
  caf::actor_system* sys_;
  std::shared_ptr<Store> store_;
  store::Backend* backend_;
  OptionSet settings_;
  std::shared_ptr<Clock> clock_;
  store_writer_impl writer_;
  store_writer_actor writer_public_;
  std::atomic<bool> stopped_{false};
};

}  // namespace beehive::detail
