#pragma once

/// Controllers: the application's reconcile logic for one kind, and the
/// `ControllerClient` through which it reports what it observes.
///
/// `register_controller<Spec, Status>(bh, gk, controller, opts...)` registers a
/// controller before `start` and returns the kind's ControllerClient, usable from the
/// application's own threads too. `controller` is a `std::shared_ptr` to a class
/// derived from `Controller<Spec, Status>`, or any callable
/// `Result(const Context&, ControllerClient<Status>&, const Object<Spec, Status>&)`.
///
/// Reconciliation is level-triggered: a pass derives everything from the object as it
/// is stored now. An object is reconciled when a commit creates it, changes its spec or
/// requests its deletion, once at start, at each resync while it is unsettled
/// (observed generation behind generation, or deletion requested), when its
/// `requeue_after` falls due, and on retries. A controller is never called concurrently
/// for one object; `with_concurrency(n)` runs up to n different objects at once, on
/// threads of their own (reconcile may block). An exception thrown out of reconcile is
/// retried with exponential backoff (1 s doubling, capped at 30 s; see `with_backoff`
/// and `with_max_retry_interval`), cleared only by a successful pass; a `TerminalError`
/// is not retried (see result.hpp). A row that does not decode is quarantined: logged,
/// treated as a successful no-op, logged again at each resync. `with_owns` and
/// `with_watches` reconcile objects of this kind when objects of other kinds change.
/// At `LogLevel::debug` each pass is logged (id, generation, result, duration).
///
/// ControllerClient writes are kind-folded (another kind's id is `errc::wrong_kind`, a
/// missing one `errc::not_found`) and each commits on its own unless made inside
/// `within`. Cheap to copy; thread-safe.

#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <beehive/condition.hpp>
#include <beehive/context.hpp>
#include <beehive/detail/codec.hpp>
#include <beehive/detail/controller_core.hpp>
#include <beehive/logger.hpp>
#include <beehive/object.hpp>
#include <beehive/options.hpp>
#include <beehive/result.hpp>

namespace beehive {

class Beehive;

template <class Status>
class ControllerClient {
 public:
  explicit ControllerClient(detail::ControllerClientCore core) : core_(std::move(core)) {}

  const GroupKind& group_kind() const { return core_.group_kind(); }

  /// Records status and the generation it reflects. Status bytes equal to the stored
  /// ones write nothing, unless they settle a generation not yet recorded (that write
  /// happens once and emits). A generation above the object's is
  /// `observed_generation_future`; an older one leaves the object unsettled; a negative
  /// one is `invalid_argument`.
  /// With with_resource_version(rv), only if the object is still at `rv` (`conflict`
  /// otherwise, nothing written).
  template <class... Opts>
  void update_status(const Context& ctx, ObjectID id, std::int64_t observed_generation,
                     const Status& status, Opts&&... opts) const {
    auto text = detail::encode(status);
    // The stored status will be these bytes at the kind's version: decoding them here
    // refuses a status that does not round-trip before anything is written, and keeps
    // the application's from_json off the writer's thread.
    detail::decode<Status>(text);
    core_.update_status(ctx, id, observed_generation, std::move(text), {},
                        {Option(std::forward<Opts>(opts))...});
  }

  /// Sets the condition of `c.type`; an identical, current condition writes nothing.
  /// Text must be valid UTF-8 (`invalid_argument`); a `c.observed_generation` above the
  /// object's generation is `observed_generation_future`, as in update_status.
  void set_condition(const Context& ctx, ObjectID id, const Condition& c) const {
    core_.set_condition(ctx, id, c);
  }

  void remove_condition(const Context& ctx, ObjectID id, std::string_view type) const {
    core_.remove_condition(ctx, id, type);
  }

  /// Appends an observation to the object's event log: it extends the current run of
  /// its category when type and reason match, and starts a new run otherwise. Never
  /// moves the object's resource version nor wakes object watches. Text must be UTF-8.
  void record_event(const Context& ctx, ObjectID id, const EventSpec& e) const {
    core_.record_event(ctx, id, e);
  }

  /// Removes one finalizer; absent is a no-op.
  void remove_finalizer(const Context& ctx, ObjectID id, std::string_view finalizer) const {
    core_.remove_finalizer(ctx, id, finalizer);
  }

  /// Adds one finalizer, so that the object is not removed until a controller removes
  /// it again; present already is a no-op. An object whose deletion was requested takes
  /// no new finalizer (`invalid_argument`): its teardown must be able to finish. An
  /// object's finalizers hold at most 64 KiB of names together (`invalid_argument`).
  void add_finalizer(const Context& ctx, ObjectID id, std::string_view finalizer) const {
    core_.add_finalizer(ctx, id, finalizer);
  }

  /// Now, on the beehive's clock (`with_clock`; a ManualClock in tests): use it rather
  /// than the system clock so that a pass's notion of time matches its timers'.
  Time now() const { return core_.now(); }

  /// Logs through the beehive's logger (`with_logger`), adding the kind and, when `ctx`
  /// is a pass's context (or derived from it), the object id to `fields`.
  void log(const Context& ctx, LogLevel level, std::string_view message,
           LogFields fields = {}) const {
    core_.log(ctx, level, message, std::move(fields));
  }

  /// Adds a depends_on edge from this kind's `from` to any existing `to`: when `to`'s
  /// conditions change, `from` is reconciled. A new edge also reconciles `from` once
  /// more (the pass that added it may have read `to` before a change no edge carried):
  /// keep edges rather than drop them all and add them back, which would wake `from`
  /// after every pass. Repeating an existing edge writes nothing. A `to` being deleted
  /// takes no new dependent (`invalid_argument`): its teardown may have begun. Commits
  /// alone, or joins `within`.
  void add_dependency(const Context& ctx, ObjectID from, ObjectID to) const {
    core_.add_dependency(ctx, from, to);
  }
  void remove_dependency(const Context& ctx, ObjectID from, ObjectID to) const {
    core_.remove_dependency(ctx, from, to);
  }

  /// Whether anything with a live claim points at `id`: an owned child, or a dependent
  /// not itself being deleted. A finalizer can gate teardown on it.
  bool has_incoming_refs(const Context& ctx, ObjectID id) const {
    return core_.has_incoming_refs(ctx, id);
  }

  // Lazy relation lookups, as on Client: not kind-scoped, a missing id reads empty.

  std::optional<Ref> get_owner(const Context& ctx, ObjectID id) const {
    auto refs = core_.related(ctx, id, LoadOption::owner);
    return refs.empty() ? std::nullopt : std::optional<Ref>(refs.front());
  }
  std::vector<Ref> list_dependencies(const Context& ctx, ObjectID id) const {
    return core_.related(ctx, id, LoadOption::dependencies);
  }
  std::vector<Ref> list_dependents(const Context& ctx, ObjectID id) const {
    return core_.related(ctx, id, LoadOption::dependents);
  }
  std::vector<Ref> list_owned(const Context& ctx, ObjectID id) const {
    return core_.related(ctx, id, LoadOption::owned);
  }

  /// Runs `fn` in one transaction: its writes made with the context it receives (from
  /// this client, other ControllerClients and Clients) commit together when it returns
  /// and roll back when it throws (the exception propagates). A block whose `ctx` ended
  /// before it returned is rolled back too, and throws `cancelled` or
  /// `deadline_exceeded` (one that ended before it began runs nothing); once the commit
  /// is asked for, it completes. Nested blocks are savepoints, at most 1000 deep counting
  /// the outermost (`invalid_argument` beyond, the enclosing blocks intact). Side effects
  /// (reconcile wakes, watch changes, with_on_create callbacks) happen after the
  /// outermost commit only. The transaction holds the store's single writer: keep slow
  /// I/O outside it.
  void within(const Context& ctx, const std::function<void(const Context&)>& fn) const {
    core_.within(ctx, fn);
  }

 private:
  detail::ControllerClientCore core_;
};

template <class Spec, class Status>
class Controller {
 public:
  virtual ~Controller() = default;
  virtual Result reconcile(const Context& ctx, ControllerClient<Status>& client,
                           const Object<Spec, Status>& obj) = 0;
};

/// Registers `controller` for `gk`. Options: with_concurrency, with_resync_interval,
/// with_max_retry_interval, with_backoff, with_rate_limit, with_owns, with_watches,
/// with_migrator, with_event_retention. Throws
/// `already_registered` for a kind registered before, `already_started` after start,
/// `stopped` once a stop has begun, and `invalid_argument` for a null pointer or an empty
/// `std::function`, for a migrator with a schema version below 0, for a kind whose name
/// prints as the same `Kind.group` as another registered kind's (metrics and logs name
/// kinds that way), and for a migrator with a spec version above 0 for a kind already
/// written through this Beehive (those writes stored spec version 0, which the migrator
/// would take for its own version 0): register before the kind's first write.
template <class Spec, class Status, class C, class... Opts>
requires(std::convertible_to<Opts, Option>&&...) ControllerClient<Status> register_controller(
    Beehive& bh, const GroupKind& gk, C controller, Opts&&... opts) {
  static_assert(detail::Storable<Spec> && detail::Storable<Status>,
                "Spec and Status must convert to and from nlohmann::json, or be empty structs");
  // Empty: a null pointer or std::function, an empty shared_ptr. A lambda converts to
  // bool too (through its function pointer), never false: not asked (GCC warns).
  if constexpr (std::is_constructible_v<bool, const C&> &&
                (std::is_pointer_v<C> || !std::is_convertible_v<const C&, bool>))
    if (!static_cast<bool>(controller))
      throw Error(errc::invalid_argument,
                  "register_controller needs a controller, not an empty one");
  using Obj = Object<Spec, Status>;
  std::function<Result(const Context&, ControllerClient<Status>&, const Obj&)> call;
  if constexpr (requires(C c, const Context& ctx, ControllerClient<Status>& cc, const Obj& o) {
                  c->reconcile(ctx, cc, o);
                }) {
    call = [c = std::move(controller)](const Context& ctx, ControllerClient<Status>& cc,
                                       const Obj& o) { return c->reconcile(ctx, cc, o); };
  } else {
    call = std::move(controller);
  }
  auto fn = [call = std::move(call)](const Context& ctx, const detail::ControllerClientCore& core,
                                     const ObjectRow& row) -> detail::Outcome {
    Obj obj;
    return detail::run_reconcile(
        [&] { obj = detail::decode_object<Spec, Status>(row, core.migrator()); },
        [&] {
          ControllerClient<Status> cc(core);
          return call(ctx, cc, obj);
        });
  };
  auto rt = detail::register_kind(bh, gk, std::move(fn), {Option(std::forward<Opts>(opts))...});
  return ControllerClient<Status>(detail::ControllerClientCore(std::move(rt), gk));
}

}  // namespace beehive
