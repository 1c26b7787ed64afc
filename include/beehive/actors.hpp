#pragma once

/// Beehive's actor surface, for applications that talk to beehive from their own CAF
/// actors: the typed interfaces of its actors, their messages (actor/messages.hpp, each
/// with an `inspect` overload in actor/inspect.hpp) and error conversion
/// (actor/errors.hpp). Only this header and those under actor/ bring in CAF, and only the
/// CAF headers they need.
///
/// Every blocking Client / ControllerClient operation has a message form an actor can
/// send without blocking:
///
///   self->request(bh.store_writer(), caf::infinite,
///                 beehive::make_create(widget_kind, WidgetSpec{3}, "small"))
///       .then([](const beehive::ObjectRow& row) { ... },
///             [](caf::error& err) { auto code = beehive::to_errc(err); ... });
///
/// `make_create<Spec>` and its siblings encode the application's types as the Client
/// does; a request may also carry JSON text itself. Either way the store_writer checks it
/// as the facade checks its calls and writes it at the kind's schema version unless the
/// request names one. `actor_handles(bh)` returns every actor's handle at once.
///
/// The surface is privileged: a request may write what only a kind's controller writes
/// through its ControllerClient (status, conditions, finalizers, events, dependency
/// edges) for any kind, whether or not this beehive runs its controller. Hand the
/// handles only to code you trust to act as that controller.
///
/// Writes and reads go to the store_writer (it hands reads to a reader on the read
/// connections), watches to the watch_hub, requeue and schedules to the kind's controller,
/// event writes, reads and retention sweeps to the event_log (or, for event writes
/// inside a `transaction_request`, to the store_writer). Every actor answers
/// `inspect_atom` with a snapshot of its state.
///
/// To run beehive inside an application's actor system, add its message types to the
/// configuration before the system is built, then construct the Beehive over it:
///
///   caf::actor_system_config cfg;
///   beehive::add_message_types(cfg);
///   caf::actor_system sys{cfg};
///   beehive::Beehive bh(sys, beehive::sqlite::open("var/app.db"));
///
/// Handles are valid while the Beehive runs; messages to a stopped beehive's actors
/// fail with `errc::stopped` (handles taken while it does not run are null: requests
/// to them fail the same way). A request's CAF timeout ends the wait, not the work:
/// a write request that timed out (`to_errc` gives `deadline_exceeded`) may still
/// commit, for instance once a `within` block it waited behind ends; read back before
/// writing again. An actor the supervisor restarts (after a crash, or the
/// gc and event_log with a restarted store_writer) has a new handle: a request to the old
/// one fails with `errc::stopped`, so take the handle from the Beehive again. While the
/// store_writer restarts, its handle is null, and a gc or event_log spawned meanwhile
/// refuses requests that need it with `errc::store` ("ask again"). A message
/// sent to an actor that does not take it (the wrong handle) fails with
/// `errc::invalid_argument`. Drop the handles before the Beehive: one that owns its actor
/// system ends it in its destructor, and CAF 0.17 ends a system only once no handle to its
/// detached actors (the store_writer among them) is left; a handle still held makes the
/// destructor give up on it after 5 s, with a warning, leaving the system to end on a
/// thread of its own when the last handle goes.
///
/// Thread-safety: the handles are CAF actor handles, safe to copy and to use from any
/// thread or actor; `add_message_types` must run before the actor system is built.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <beehive/actor/atoms.hpp>
#include <beehive/actor/errors.hpp>
#include <beehive/actor/inspect.hpp>
#include <beehive/actor/messages.hpp>
#include <beehive/actor/requests.hpp>
#include <beehive/beehive.hpp>
#include <beehive/detail/codec.hpp>

namespace beehive {

/// Registers every beehive message type with `cfg` (call before the system is built).
void add_message_types(caf::actor_system_config& cfg);

namespace detail {
template <class... Lists>
struct concat;
template <class... Ts>
struct concat<type_list<Ts...>> {
  using type = type_list<Ts...>;
};
template <class... As, class... Bs, class... Rest>
struct concat<type_list<As...>, type_list<Bs...>, Rest...> {
  using type = typename concat<type_list<As..., Bs...>, Rest...>::type;
};
/// The typed interface answering each request of `List` with its `reply_type`.
template <class List>
struct replies_for;
template <class... Rs>
struct replies_for<type_list<Rs...>> {
  using type =
      caf::typed_actor<typename caf::replies_to<Rs>::template with<typename Rs::reply_type>...>;
};
}  // namespace detail

/// Every request the store_writer answers (derived from requests.hpp's lists).
using store_writer_request_types =
    typename detail::concat<write_request_types, maintenance_request_types,
                            type_list<transaction_request>, read_request_types>::type;

/// Serializes every write of the beehive: each write is one transaction (or part of a
/// `transaction_request`), replied to after its commit. Reads are handed to a reader on
/// the store's read connections: a read sent after a write's reply arrived sees that
/// write. Subscribers (`subscribe_atom` + an actor) receive a `commit_record` after
/// every commit that changed something, and one with `lost_through` set when other
/// processes' changes were trimmed from the change log before this process read them.
/// A subscription lasts until `unsubscribe_atom`, the subscriber's end, or the stop
/// (the subscriber then receives `watch_ended`); it carries over to a store_writer
/// restarted after a crash. `subscribe_atom` is a message, not a request: sent while the
/// store_writer restarts (its handle null, or the old one's), it is lost without a word;
/// subscribe with the handle `store_writer()` gives once it is not null again. Subscribing twice delivers once. Every commit is sent, one
/// message each: a subscriber slower than the writer accumulates them in its mailbox
/// (a watch with `watch_request::pull` is the bounded feed).
///
/// A write from an actor gets the checks the blocking facade makes (UTF-8 text, JSON
/// text nested at most max_json_depth deep, stored in canonical form, size bounds); an
/// unset spec or status version is the one the kind's migrator declares.
using store_writer_actor =
    typename detail::replies_for<store_writer_request_types>::type::template extend<
        caf::replies_to<inspect_atom>::with<store_writer_state>,
        caf::reacts_to<subscribe_atom, caf::actor>, caf::reacts_to<unsubscribe_atom, caf::actor>>;

/// Fans committed changes out to watches: blocking streams and actor subscribers.
/// `unsubscribe_atom` + an id ends that subscription; + an actor ends every object and
/// event subscription of that actor, open or opening. A watch request's reply (the id)
/// comes once its snapshot is read: one that comes after the request's CAF timeout is
/// dropped by CAF, and the subscription it named lives on, unknown to the subscriber.
/// Ask with `caf::infinite`, or end such leftovers with `unsubscribe_atom` + yourself
/// before asking again.
using watch_hub_actor =
    caf::typed_actor<caf::replies_to<watch_request>::with<std::uint64_t>,
                     caf::replies_to<pull_atom, std::uint64_t>::with<std::vector<object_change>>,
                     caf::replies_to<event_watch_request>::with<std::uint64_t>,
                     caf::reacts_to<unsubscribe_atom, std::uint64_t>,
                     caf::reacts_to<unsubscribe_atom, caf::actor>,
                     caf::replies_to<inspect_atom>::with<watch_hub_state>>;

/// One kind's reconcile loop: its work queue, workers, backoff ladder and schedules.
/// `unsubscribe_atom` + an id + an actor ends that actor's schedule watch of the id.
using controller_actor = caf::typed_actor<caf::replies_to<requeue_request>::with<bool>,
                                          caf::replies_to<schedule_atom, ObjectID>::with<Schedule>,
                                          caf::replies_to<schedule_watch_request>::with<bool>,
                                          caf::reacts_to<unsubscribe_atom, ObjectID, caf::actor>,
                                          caf::replies_to<inspect_atom>::with<controller_state>>;

/// Garbage collection: `collect_atom` runs a pass now (replies the objects removed).
using gc_actor = caf::typed_actor<caf::replies_to<collect_atom>::with<int>,
                                  caf::replies_to<inspect_atom>::with<gc_state>>;

/// The event timelines: `record_event_request` (extends the category's current run or
/// starts one, run by the store_writer in commit order) and `list_events_request`;
/// `sweep_atom` runs a retention sweep now (replies the runs removed). It also sweeps at
/// start and on the resync cadence.
using event_log_actor =
    caf::typed_actor<caf::replies_to<record_event_request>::with<Event>,
                     caf::replies_to<list_events_request>::with<std::vector<Event>>,
                     caf::replies_to<sweep_atom>::with<int>,
                     caf::replies_to<inspect_atom>::with<event_log_state>>;

/// Every timer: `wake_at_atom` + an actor + a time of the beehive's clock sends that
/// actor `wake_atom` once that clock reaches the time (at once if it has passed), never
/// before, however the clock is stepped meanwhile; after a step forward it comes within
/// about a second of the clock passing the time. An actor has one
/// wake pending at a time: a later `wake_at_atom` for it replaces the earlier; an actor
/// that exits before its wake comes loses it. A wake pending when the scheduler ends (the
/// beehive stops, or the scheduler crashed and was restarted) is never sent: an actor
/// that depends on one monitors the scheduler (its down message says so) and asks the
/// new one (actor_handles). Name actors of your own (beehive's actors use the scheduler
/// for their own timers).
using scheduler_actor = caf::typed_actor<caf::reacts_to<wake_at_atom, caf::actor, Time>,
                                         caf::replies_to<inspect_atom>::with<scheduler_state>>;

/// The handles of a running beehive's actors (see `actor_handles`). The gc, event_log
/// and scheduler handles are invalid (null) before start.
struct ActorHandles {
  store_writer_actor store_writer;
  watch_hub_actor watch_hub;
  gc_actor gc;
  event_log_actor event_log;
  scheduler_actor scheduler;
  /// The kind's controller; nullopt before start, after stop, once the beehive is gone
  /// (the handles may outlive it), or for a kind without one.
  std::optional<controller_actor> controller(const GroupKind& gk) const;

  /// The beehive the handles were taken from (held weakly: never keeps it).
  std::weak_ptr<const detail::BeehiveCore> beehive;
};

/// The handles of `bh`'s actors as they are now (a restarted actor has a new handle:
/// take them again after a request to an old one failed with `errc::stopped`).
ActorHandles actor_handles(const Beehive& bh);

/// The actor system `bh` runs in: the application's, or the one a `Beehive(store)` owns.
/// An application or a test sends from it (`caf::scoped_actor self{actor_system_of(bh)}`)
/// to talk to a beehive that runs in a system of its own. Valid while `bh` lives.
caf::actor_system& actor_system_of(const Beehive& bh);

template <class Dummy>
auto Beehive::store_writer() const {
  return actor_handles(*this).store_writer;
}

template <class Dummy>
auto Beehive::watch_hub() const {
  return actor_handles(*this).watch_hub;
}

template <class Dummy>
auto Beehive::controller(const GroupKind& gk) const {
  return actor_handles(*this).controller(gk);
}

template <class Dummy>
auto Beehive::gc() const {
  return actor_handles(*this).gc;
}

template <class Dummy>
auto Beehive::event_log() const {
  return actor_handles(*this).event_log;
}

template <class Dummy>
auto Beehive::scheduler() const {
  return actor_handles(*this).scheduler;
}

/// Decodes a row received from an actor into the application's types, converting blobs
/// written at older schema versions through `m` when the kind has a migrator.
template <class Spec, class Status>
Object<Spec, Status> decode_row(const ObjectRow& row, const Migrator* m = nullptr) {
  return detail::decode_object<Spec, Status>(row, m);
}

// -- typed requests: an application actor sends its own Spec and Status types ------------
//
// Each encodes the value as the blocking Client does (canonical JSON; a value that does
// not store as itself throws Error(errc::invalid_argument) here, in the sender, and one
// whose text its own type does not decode back, Error(errc::decode): nothing is sent
// that the application could not read) and leaves the schema version unset: the
// store_writer fills in the kind's. A request built from raw JSON text is not checked
// against any type.

namespace detail {
template <class T>
std::string encode_checked(const T& value) {
  auto text = encode(value);
  (void)decode<T>(text);
  return text;
}
}  // namespace detail

template <class Spec>
create_request make_create(const GroupKind& gk, const Spec& spec,
                           std::optional<std::string> slug = std::nullopt,
                           std::vector<std::string> finalizers = {},
                           std::optional<ObjectID> owner = std::nullopt) {
  return {gk, detail::encode_checked(spec), std::move(slug), std::move(finalizers), owner};
}

template <class Spec>
update_request make_update(const GroupKind& gk, ObjectID id, const Spec& spec) {
  return {gk, id, detail::encode_checked(spec)};
}

template <class Spec>
create_or_update_request make_create_or_update(const GroupKind& gk, std::string slug,
                                               const Spec& spec) {
  return {gk, std::move(slug), detail::encode_checked(spec)};
}

template <class Spec>
get_or_create_request make_get_or_create(const GroupKind& gk, std::string slug, const Spec& spec,
                                         std::vector<std::string> finalizers = {},
                                         std::optional<ObjectID> owner = std::nullopt) {
  return {gk, std::move(slug), detail::encode_checked(spec), std::move(finalizers), owner};
}

template <class Status>
update_status_request make_update_status(const GroupKind& gk, ObjectID id,
                                         std::int64_t observed_generation, const Status& status) {
  return {gk, id, observed_generation, detail::encode_checked(status)};
}

}  // namespace beehive
