#pragma once

/// `Beehive`: an embedded control plane over one store. Construct it over a store,
/// then reach objects through `Client<Spec, Status>` handles made from it:
///
///   auto store = beehive::sqlite::open("var/app.db");
///   beehive::Beehive bh(store);
///   beehive::Client<WidgetSpec, WidgetStatus> widgets(bh, {"acme.com", "Widget"});
///   auto w = widgets.create({}, WidgetSpec{3}, beehive::with_slug("w1"));
///
/// A Beehive runs its actors either in an actor system of its own (`Beehive(store)`) or
/// inside the application's (`Beehive(sys, store)`; call `add_message_types(cfg)` on
/// the application's config first, see actors.hpp). Clients work from construction.
/// Destroying the Beehive stops it; calls made through its clients afterwards throw
/// `Error(errc::stopped)`. Its own actor system uses CAF's `sharing` scheduler, whose
/// idle threads sleep; an application system of its own keeps the policy it chose.
/// Destroy a Beehive before `main` returns, not from a static's destructor: CAF 0.17
/// cannot tear an actor system down from exit handlers.
///
/// Neither copyable nor movable. Its clients may be used from any thread, and it may be
/// destroyed on any thread.
///
/// This header brings the whole blocking API.

#include <concepts>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <beehive/change.hpp>
#include <beehive/client.hpp>
#include <beehive/condition.hpp>
#include <beehive/context.hpp>
#include <beehive/controller.hpp>
#include <beehive/errors.hpp>
#include <beehive/event.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/metrics.hpp>
#include <beehive/migrator.hpp>
#include <beehive/object.hpp>
#include <beehive/options.hpp>
#include <beehive/result.hpp>
#include <beehive/schedule.hpp>
#include <beehive/sqlite.hpp>
#include <beehive/store.hpp>
#include <beehive/stream.hpp>
#include <beehive/time.hpp>

namespace caf {
class actor_system;
}

namespace beehive {

namespace detail {
class BeehiveCore;
}

/// Stops a started beehive: `stop(ctx)`. Drains in this order: refuses new calls
/// (`errc::stopped`), stops dispatching, waits for in-flight reconciles (bounded by
/// `ctx`; past it, throws `deadline_exceeded` and is stopped all the same, but on SQLite
/// keeps its database claimed, so that another beehive on it gets `store_in_use`, until
/// those reconciles end and the Beehive is destroyed; on PostgreSQL the leadership goes
/// at once, the stuck passes' writes failing by term), lets the
/// writer finish what is queued, then ends streams and closes the store. Stopping twice
/// is a no-op. A stop called while another runs waits for it, bounded by its own `ctx`
/// (past it, throws `deadline_exceeded`, or `cancelled`); the beehive stops all the same.
/// Past the deadline, a `within` block still waiting to begin is refused
/// (`errc::stopped`).
using Stop = std::function<void(const Context&)>;

class Beehive {
 public:
  /// Runs in an actor system of its own. Options: with_clock, with_logger, with_metrics,
  /// with_change_log_retention, with_max_object_bytes, and with_resync_interval,
  /// with_max_retry_interval, with_backoff, with_rate_limit, with_event_retention
  /// (defaults for every kind). A store serves one Beehive until that one stops: while it
  /// does, another on the same `store` throws store_in_use (open the store again for a
  /// second one).
  template <class... Opts>
  requires(std::convertible_to<Opts, Option>&&...) explicit Beehive(std::shared_ptr<Store> store,
                                                                    Opts&&... opts)
      : Beehive(nullptr, std::move(store), {Option(std::forward<Opts>(opts))...}) {}

  /// Runs inside the application's actor system, which must outlive the Beehive.
  template <class... Opts>
  requires(std::convertible_to<Opts, Option>&&...)
      Beehive(caf::actor_system& sys, std::shared_ptr<Store> store, Opts&&... opts)
      : Beehive(&sys, std::move(store), {Option(std::forward<Opts>(opts))...}) {}

  /// Stops, draining in-flight reconciles without a deadline. Destroyed inside one of
  /// its own reconciles or `within` blocks (which it would wait for), it logs an error
  /// and stops on another thread once that returns: until then its clients still work,
  /// and an application's actor system must outlive that stop.
  ~Beehive();

  /// Launches the controllers, timers and GC; every object of a registered kind is
  /// reconciled once. Throws already_started when running, stopped after a stop,
  /// store_in_use when another running beehive in this process uses the same database,
  /// and cancelled / deadline_exceeded when `ctx` has ended before the start begins
  /// (while it waits for a stop in progress, say): nothing is started, and a later start
  /// may. Once begun, a start completes whatever `ctx` does meanwhile.
  /// Should the system refuse a thread it needs (each reconcile worker is one), it
  /// throws stopped, saying why: nothing is left running, and the beehive is stopped.
  Stop start(const Context& ctx);
  Beehive(const Beehive&) = delete;
  Beehive& operator=(const Beehive&) = delete;

  /// Whether this process is the leader of the processes running on its store: the one
  /// running the controllers, the garbage collector and the event-log sweeps. The
  /// others (standbys) serve reads, writes and watches; their controllers stay idle
  /// until they take over. A store only one process can run on (SQLite) makes every
  /// started beehive the leader. False before start and after stop. Thread-safe.
  bool is_leader() const;
  /// The leadership now, then each change of it, until the beehive stops (the stream
  /// then ends with errc::stopped) or `ctx` ends. A reader that falls behind sees the
  /// latest value.
  Stream<bool> watch_leadership(const Context& ctx);

  /// The handles of beehive's actors, for application actors that talk to it
  /// directly; these need `#include <beehive/actors.hpp>`.
  template <class Dummy = void>
  auto store_writer() const;
  template <class Dummy = void>
  auto watch_hub() const;
  /// The kind's controller; nullopt before start or for a kind without one.
  template <class Dummy = void>
  auto controller(const GroupKind& gk) const;
  /// Valid after start (the gc, event_log and scheduler run while the beehive does).
  template <class Dummy = void>
  auto gc() const;
  template <class Dummy = void>
  auto event_log() const;
  template <class Dummy = void>
  auto scheduler() const;

  /// Internal plumbing shared with clients.
  const std::shared_ptr<detail::BeehiveCore>& core() const { return rt_; }

 private:
  Beehive(caf::actor_system* sys, std::shared_ptr<Store> store, const std::vector<Option>& opts);

  std::shared_ptr<detail::BeehiveCore> rt_;
};

}  // namespace beehive
