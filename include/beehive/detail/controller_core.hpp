#pragma once

// The untyped halves of ControllerClient<Status> and register_controller.
//
// Internal: not part of the API and may change. Thread-safe, like the ControllerClient it
// serves.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <beehive/condition.hpp>
#include <beehive/context.hpp>
#include <beehive/detail/client_core.hpp>
#include <beehive/event.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/logger.hpp>
#include <beehive/object_row.hpp>
#include <beehive/options.hpp>
#include <beehive/result.hpp>
#include <beehive/time.hpp>

namespace beehive {
class Beehive;
class Migrator;
}  // namespace beehive

namespace beehive::detail {

class BeehiveCore;

/// How one reconcile pass ended.
struct Outcome {
  // cancelled: failed after stop cancelled the pass's context; not retried here, not counted.
  // terminal_error: reconcile threw TerminalError; not retried until the spec changes.
  // busy: not run, a pass of the controller this one replaced still holds the id; queued
  // again when that pass ends.
  enum Kind { success, error, quarantined, gone, cancelled, terminal_error, busy } kind = success;
  std::chrono::milliseconds requeue_after{0};
  std::string message;
  /// success only: Result::requeue_now(), paced by the backoff ladder like a retry.
  bool requeue_now = false;
};

/// Runs `decode` then `reconcile`, turning their exceptions into the outcome: a row that
/// does not decode is quarantined, a TerminalError is terminal, any other exception from
/// reconcile is an error.
Outcome run_reconcile(const std::function<void()>& decode,
                      const std::function<Result()>& reconcile);

class ControllerClientCore {
 public:
  ControllerClientCore(std::shared_ptr<BeehiveCore> rt, GroupKind gk)
      : rt_(std::move(rt)), gk_(std::move(gk)) {}

  const GroupKind& group_kind() const { return gk_; }
  const Migrator* migrator() const;

  void update_status(const Context& ctx, ObjectID id, std::int64_t observed_generation,
                     std::string status, RowCheck check,
                     const std::vector<Option>& opts = {}) const;
  void set_condition(const Context& ctx, ObjectID id, const Condition& c) const;
  void remove_condition(const Context& ctx, ObjectID id, std::string_view type) const;
  void remove_finalizer(const Context& ctx, ObjectID id, std::string_view finalizer) const;
  void add_finalizer(const Context& ctx, ObjectID id, std::string_view finalizer) const;
  /// The beehive's clock.
  Time now() const;
  /// Logs through the beehive's logger with the kind, and the object id of the pass
  /// `ctx` belongs to (if any), added to `fields`.
  void log(const Context& ctx, LogLevel level, std::string_view message, LogFields fields) const;
  void record_event(const Context& ctx, ObjectID id, const EventSpec& e) const;
  void add_dependency(const Context& ctx, ObjectID from, ObjectID to) const;
  void remove_dependency(const Context& ctx, ObjectID from, ObjectID to) const;
  bool has_incoming_refs(const Context& ctx, ObjectID id) const;
  std::vector<Ref> related(const Context& ctx, ObjectID id, unsigned relation) const;
  void within(const Context& ctx, const std::function<void(const Context&)>& fn) const;

 private:
  std::shared_ptr<BeehiveCore> rt_;
  GroupKind gk_;
};

/// Decodes a row and runs the user's reconcile on it, handing it a client on `core`.
using ReconcileFn =
    std::function<Outcome(const Context&, const ControllerClientCore& core, const ObjectRow&)>;

/// Registers a kind's reconcile; returns the runtime shared with its ControllerClient.
std::shared_ptr<BeehiveCore> register_kind(Beehive& bh, const GroupKind& gk, ReconcileFn fn,
                                           const std::vector<Option>& opts);

}  // namespace beehive::detail
