#pragma once

/// Options, dispatched by the call that receives them: each call reads the options it
/// understands and ignores the rest (so one list can be shared), except where an option
/// contradicts the call (`with_slug` given to `create_or_update` or `get_or_create`, and
/// `with_resource_version` given to `create_or_update`, are `errc::conflicting_option`).
///
///   Option      create, create_or_update, get_or_create, update, remove, set_labels,
///               update_status, Beehive, register_controller
///   LoadOption  reads: which relations to attach to the returned objects
///   ReadOption  list, list_page, watch, watch_list: label selector, where a watch resumes
///   EventOption list_events / watch_events filters
///   RequeueOption  requeue
///
/// Defaults: no slug, no finalizers, no owner; resync every 30 s; retry backoff from
/// 1 s doubling to at most 30 s, without jitter; no rate limit; no owned or watched
/// kinds; one worker per kind; the system clock; events kept without bound until their
/// object is removed; the change log keeps at least its last 100 000 entries and every
/// entry younger than five minutes; no metrics.
///
/// Options are immutable values: build them on any thread and share them freely.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <beehive/event.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/logger.hpp>
#include <beehive/object_meta.hpp>
#include <beehive/time.hpp>

namespace beehive {

class Context;
class Migrator;
class MetricsSink;
struct ObjectMeta;

namespace detail {
struct OptionSet;
/// What EventOptions select (the internal name of the public EventFilter).
using EventQuery = EventFilter;
struct RequeueSettings {
  bool reset_backoff = false;
};
struct ReadSettings {
  std::optional<std::string> selector;
  std::optional<std::int64_t> resume_from;
};
}  // namespace detail

class Option {
 public:
  explicit Option(std::function<void(detail::OptionSet&)> apply) : apply_(std::move(apply)) {}
  void apply(detail::OptionSet& s) const { apply_(s); }

 private:
  std::function<void(detail::OptionSet&)> apply_;
};

/// Create: a human-readable key, unique per kind; never generated for you.
Option with_slug(std::string slug);
/// Create: finalizers the object carries from the start (at most 64 KiB of names
/// together, as `add_finalizer` keeps them: `invalid_argument` beyond).
Option with_finalizers(std::vector<std::string> finalizers);
/// Create: the owner; deleting it deletes this object too.
Option with_owner(ObjectID owner);
/// Create (create, get_or_create, create_or_update when it creates): the object's labels.
/// Keys and values follow Kubernetes' syntax (`invalid_argument` otherwise, nothing
/// written): a key is an optional DNS subdomain prefix (at most 253 characters) and '/',
/// then a name of at most 63 characters of [A-Za-z0-9-_.] beginning and ending with a
/// letter or digit; a value is empty or such a name.
Option with_labels(Labels labels);
/// update, remove, set_labels, ControllerClient::update_status: optimistic concurrency.
/// The write happens only if the object's resource version is still `rv` (the version
/// the caller read); otherwise it throws `errc::conflict` and writes nothing. A write
/// that would change nothing still checks the version.
Option with_resource_version(std::int64_t rv);
/// Beehive: the change log (what watches resume from, and how other processes learn of
/// commits) keeps at least its newest `entries` entries and every entry younger than
/// `max_age`; the garbage collector trims the rest at its cadence. `entries` <= 0: no
/// count bound (age alone); `max_age` <= 0: no age bound (count alone); both: never
/// trimmed (the log grows with every commit, as event retention's (0, 0) keeps every
/// run). Default: 100 000
/// entries, five minutes (a quiet store keeps its last 100 000 changes however old).
/// Entries a step back of the wall clock left ahead of it count as logged at the step (or,
/// when another process's clock put them there, at the trim that finds them).
Option with_change_log_retention(std::int64_t entries, std::chrono::milliseconds max_age);
/// Create: called once after the create commits (never after a rollback; inside a
/// `within` block, after its outermost commit). Its context is the create's, outside
/// any transaction: calls made with it work. An exception it throws is logged (error
/// level); the create still returns the stored object.
Option with_on_create(std::function<void(const Context&)> fn);
/// Beehive (default for every kind) or register_controller: resync period;
/// zero or negative disables resync. Given to the Beehive it is also the cadence of
/// garbage collection, event retention and the change log's trim (which also run at
/// start, and the collection after the commits that unblock a deletion) when shorter
/// than 30 s; otherwise, and with resync disabled, they run every 30 s, so that
/// retention holds whatever the resync.
Option with_resync_interval(std::chrono::milliseconds d);
/// Beehive or register_controller: cap on the retry backoff; zero or negative is ignored.
Option with_max_retry_interval(std::chrono::milliseconds d);
/// Beehive (default for every kind) or register_controller: the retry ladder. A failed
/// pass (and Result::requeue_now()) is retried after `base`, then twice the previous
/// delay, at most `max`; a pass that succeeds without asking again clears it. `jitter`
/// is the largest fraction of a step added or taken at random (0.1: each delay is
/// within +-10% of its step), so that many objects failing together do not retry in
/// lockstep. Defaults: 1 s, 30 s, no jitter (1 s, 2 s, 4 s ... 30 s exactly). Throws
/// invalid_argument unless 0 < base <= max and 0 <= jitter < 1. A later
/// with_max_retry_interval at the same level replaces `max`. Given to
/// register_controller it sets the kind's whole ladder: arguments left out take the
/// defaults above, not the Beehive's.
Option with_backoff(std::chrono::milliseconds base = std::chrono::seconds(1),
                    std::chrono::milliseconds max = std::chrono::seconds(30), double jitter = 0);
/// Beehive (default for every kind) or register_controller: at most `per_second` passes
/// a second for the kind, with bursts of up to `burst` (a token bucket that starts full),
/// whatever woke them (creates, retries, resync, requeues). Timed on the beehive's timers
/// (a ManualClock in tests). Default: no limit. Throws invalid_argument unless
/// per_second is finite and > 0, and burst >= 1.
Option with_rate_limit(double per_second, int burst);
/// register_controller: this kind owns objects of `child` (created with with_owner):
/// any committed change of such an object (spec, status, conditions, finalizers,
/// deletion, removal) reconciles its owner. Give it once per child kind.
Option with_owns(GroupKind child);
/// register_controller: a committed change of an object of `other` reconciles the ids of
/// this kind that `map` returns for it, and those it returned for the object's previous
/// state (ids of other kinds, and missing ones, are skipped at their pass). What each
/// object maps to is remembered (learnt at start from a listing of `other`, calling
/// `map` for each object): memory grows with the objects that map to some id. `map` runs on beehive's threads, possibly several at once,
/// with the object as committed (a removed one with its final body): keep it quick and
/// thread-safe, and do no blocking calls into the beehive in it. An exception it throws
/// is logged and maps to nothing.
Option with_watches(GroupKind other, std::function<std::vector<ObjectID>(const ObjectMeta&)> map);
/// register_controller: the kind's schema migrator.
Option with_migrator(std::shared_ptr<Migrator> m);
/// Beehive or register_controller: keep the newest `per_object` runs per (object,
/// category) and, if `max_age` is positive, none older than it. `per_object` <= 0: no
/// count bound (age alone). Default: none (events live as long as their object).
Option with_event_retention(int per_object, std::chrono::milliseconds max_age);
/// The most reconcile workers one kind may have (each is a thread).
inline constexpr int max_concurrency = 1024;
/// register_controller: reconcile workers for the kind; below 1 means 1, above
/// max_concurrency is `invalid_argument`. Each worker is a thread: should the system
/// refuse one, `Beehive::start` fails with `errc::stopped` and leaves nothing running.
Option with_concurrency(int workers);
/// Beehive: where time comes from: what is stored and shown. Timers (backoff,
/// requeue_after, resync) run on the steady clock, or on this clock when it is a
/// ManualClock, so that a wall clock stepping back or forth does not stall them.
Option with_clock(std::shared_ptr<Clock> clock);
/// Beehive: where log entries go (default: warnings and errors to stderr). An empty
/// `Logger` keeps the default; to silence beehive, pass one that does nothing.
Option with_logger(Logger logger);
/// Beehive: where metrics go (see metrics.hpp); default none, which costs nothing.
Option with_metrics(std::shared_ptr<MetricsSink> sink);
/// Beehive: the largest spec, and the largest status, an object may hold, in bytes of
/// JSON text, and the most its labels may hold (bytes of keys and values); default 8 MiB
/// (8 * 1024 * 1024) each. A larger one is `invalid_argument` and nothing is written, on
/// the blocking and the actor surface alike. Whatever this says, event and condition
/// messages are bounded at 64 KiB, their reasons at 1 KiB, event details at 1 MiB of
/// JSON text, and an object's conditions together at 1 MiB as stored (their text as
/// JSON, and 64 bytes each for their other fields).
Option with_max_object_bytes(std::size_t bytes);

/// Which relations a read attaches to the objects it returns.
class LoadOption {
 public:
  enum Bits : unsigned {
    owner = 1,
    dependencies = 2,
    dependents = 4,
    owned = 8,
    events = 16,
  };
  constexpr explicit LoadOption(unsigned bits) : bits_(bits) {}
  constexpr unsigned bits() const { return bits_; }

 private:
  unsigned bits_;
};

LoadOption load_owner();
LoadOption load_dependencies();
LoadOption load_dependents();
LoadOption load_owned();
/// The 10 most recent runs per (object, category).
LoadOption load_events();

class EventOption {
 public:
  explicit EventOption(std::function<void(EventFilter&)> apply) : apply_(std::move(apply)) {}
  void apply(EventFilter& q) const { apply_(q); }

 private:
  std::function<void(EventFilter&)> apply_;
};

EventOption with_event_category(std::string category);
EventOption with_event_type(EventType type);
EventOption with_event_reason(std::string reason);
/// At most `n` runs, newest first; 0 gives none (watch_events: no snapshot, live runs
/// only). A negative `n` is `invalid_argument` when the read or watch is made.
EventOption with_event_limit(int n);
/// Only runs active at or after `t` (last_at >= t).
EventOption with_events_since(Time t);

/// What list, list_page, watch and watch_list select, and where a watch starts.
class ReadOption {
 public:
  explicit ReadOption(std::function<void(detail::ReadSettings&)> apply)
      : apply_(std::move(apply)) {}
  void apply(detail::ReadSettings& s) const { apply_(s); }

 private:
  std::function<void(detail::ReadSettings&)> apply_;
};

/// list, list_page, watch_list: only the objects whose labels match `selector`, in
/// Kubernetes' syntax: `a=b` (or `a==b`), `a!=b`, `a in (x,y)`, `a notin (x)`, `a` (has
/// the key), `!a` (has not), requirements joined by commas (AND); `!=` and `notin`
/// match objects without the key; `a=` and `a!=` compare with the empty value. Empty
/// selects everything. A malformed selector is `invalid_argument`, a set with an empty
/// slot included (`a in ()`, `a in (x,)`: Kubernetes reads the slot as the empty value;
/// here only `a=` names it), and so is one of more than 256 requirements or 4 096 values in
/// all (the bounds within which every backend runs it). A watch delivers an object that
/// starts matching as `Added` and one that stops matching as `Deleted`.
ReadOption with_selector(std::string_view selector);
/// watch, watch_list: no snapshot; replay every change committed above `rv` (a
/// position from Stream::resource_version()), each object once at its latest state (as
/// a watch that fell behind gets it; deletions included, with their final bodies), then
/// go live without gap or duplicate. `rv` above the store's resource version is
/// `errc::watch_too_new` at once; below what the change log still holds, the stream
/// ends with `errc::watch_too_old` (watch again without it: a snapshot, then live).
ReadOption with_resume_from(std::int64_t rv);

class RequeueOption {
 public:
  explicit RequeueOption(std::function<void(detail::RequeueSettings&)> apply)
      : apply_(std::move(apply)) {}
  void apply(detail::RequeueSettings& s) const { apply_(s); }

 private:
  std::function<void(detail::RequeueSettings&)> apply_;
};

/// Clear the retry backoff before requeuing (by default a requeue keeps it).
RequeueOption with_reset_backoff();

}  // namespace beehive
