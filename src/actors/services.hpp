#pragma once

// Services: what beehive's actors need from the beehive that spawned them, handed to
// them as one value when they are spawned. Actors never see the blocking facade (the
// runtime): they get the store's read pool, the timers' clock, the logger and the
// metrics sink, a function that runs one reconcile pass, and one that tells a kind's
// event retention.
//
// Thread-safety: every member is safe to use from any actor's thread; the value itself
// is copied into each actor and never changed afterwards.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include <caf/actor.hpp>

#include <beehive/detail/controller_core.hpp>
#include <beehive/logger.hpp>
#include <beehive/metrics.hpp>

#include "actors/timer_clock.hpp"
#include "store/backend.hpp"

namespace beehive::detail {

struct KindEntry;

struct Services {
  /// The store: its read pool (Backend::reader) for the actors' reads. Shared: an actor
  /// of a beehive running in the application's actor system (one restarted late, say)
  /// may finish after the beehive, and must not find its store gone.
  std::shared_ptr<store::Backend> backend;
  /// What timers run on (see TimerClock).
  std::shared_ptr<const TimerClock> timers;
  Logger logger;
  /// Null: no metrics.
  std::shared_ptr<MetricsSink> metrics;
  /// Runs blocking reads off the actors' scheduler threads (see reader.hpp).
  caf::actor reader;
  /// The store_writer as it is now (null while it restarts): for an actor that hands a
  /// write on rather than holding the handle (a standby's controller, a requeue).
  std::function<caf::actor()> writer;
  /// Runs one reconcile pass of an object of the kind, on the calling (worker) thread.
  std::function<Outcome(const KindEntry&, std::int64_t id)> reconcile;
  /// The event retention of a kind (its with_event_retention, else the Beehive's): runs
  /// kept per (object, category), and their largest age; nothing without either bound.
  std::function<std::optional<std::pair<int, std::chrono::milliseconds>>(const GroupKind&)>
      event_retention;
  /// Numbers watch subscriptions; shared so that a restarted hub never reuses one.
  std::shared_ptr<std::atomic<std::uint64_t>> subscription_ids =
      std::make_shared<std::atomic<std::uint64_t>>(0);

  void log(LogLevel level, std::string_view message, const LogFields& fields = {}) const {
    if (logger) logger(level, message, fields);
  }
  /// Counts the ids the controllers queued (each controller, every queueing): work one
  /// controller hands another without a commit (a pass's `requeue` of another kind's
  /// object) moves it, which settle's rounds compare as they compare commits.
  std::shared_ptr<std::atomic<std::uint64_t>> work_queued =
      std::make_shared<std::atomic<std::uint64_t>>(0);

  std::uint64_t next_subscription() const { return ++*subscription_ids; }
};

}  // namespace beehive::detail
