#pragma once

/// Beehive's actor surface, for applications that talk to beehive from their own CAF
/// actors: the typed interfaces of its actors, their messages (actor/messages.hpp, each
/// with an `inspect` overload in actor/inspect.hpp) and error conversion
/// (actor/errors.hpp). This is the only public header that brings in CAF.
///
/// Every blocking Client / ControllerClient operation has a message form an actor can
/// send without blocking:
///
///   self->request(bh.store_writer(), caf::infinite,
///                 beehive::create_request{{"acme.com", "Widget"}, R"({"size":3})"})
///       .then([](const beehive::ObjectRow& row) { ... },
///             [](caf::error& err) { auto code = beehive::to_errc(err); ... });
///
/// Writes and reads go to the store_writer (reads answered in commit order with the
/// writes), watches to the watch_hub, requeue and schedules to the kind's controller,
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
/// fail with `errc::stopped`. An actor the supervisor restarts (after a crash, or the
/// gc and event_log with a restarted store_writer) has a new handle: a request to the old
/// one fails with `errc::stopped`, so take the handle from the Beehive again.
///
/// Thread-safety: the handles are CAF actor handles, safe to copy and to use from any
/// thread or actor; `add_message_types` must run before the actor system is built.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include <beehive/actor/errors.hpp>
#include <beehive/actor/inspect.hpp>
#include <beehive/actor/messages.hpp>
#include <beehive/beehive.hpp>
#include <beehive/detail/codec.hpp>

namespace beehive {

/// Registers every beehive message type with `cfg` (call before the system is built).
void add_message_types(caf::actor_system_config& cfg);

/// Owns the database's write connection (beehive's blocking callers use it themselves
/// while the actor is idle, under its lock, in the same order). Every write is one transaction,
/// replied to after its commit; reads are answered in order with them. Subscribers
/// (`subscribe_atom` + an actor) receive a `commit_record` after every commit that
/// changed something.
using store_writer_actor = caf::typed_actor<
    caf::replies_to<create_request>::with<ObjectRow>,
    caf::replies_to<update_request>::with<ObjectRow>,
    caf::replies_to<create_or_update_request>::with<ObjectRow>,
    caf::replies_to<get_or_create_request>::with<get_or_create_reply>,
    caf::replies_to<remove_request>::with<ObjectRow>,
    caf::replies_to<remove_by_slug_request>::with<bool>,
    caf::replies_to<update_status_request>::with<ObjectRow>,
    caf::replies_to<set_condition_request>::with<ObjectRow>,
    caf::replies_to<remove_condition_request>::with<ObjectRow>,
    caf::replies_to<remove_finalizer_request>::with<ObjectRow>,
    caf::replies_to<add_dependency_request>::with<bool>,
    caf::replies_to<remove_dependency_request>::with<bool>,
    caf::replies_to<record_event_request>::with<Event>, caf::replies_to<collect_request>::with<int>,
    caf::replies_to<trim_events_request>::with<int>,
    caf::replies_to<transaction_request>::with<std::vector<caf::message>>,
    caf::replies_to<get_request>::with<ObjectRow>,
    caf::replies_to<get_by_slug_request>::with<ObjectRow>,
    caf::replies_to<list_request>::with<std::vector<ObjectRow>>,
    caf::replies_to<relation_request>::with<std::vector<Ref>>,
    caf::replies_to<has_incoming_refs_request>::with<bool>,
    caf::replies_to<list_events_request>::with<std::vector<Event>>,
    caf::replies_to<inspect_atom>::with<store_writer_state>,
    caf::reacts_to<subscribe_atom, caf::actor>, caf::reacts_to<unsubscribe_atom, caf::actor>>;

/// Fans committed changes out to watches: blocking streams and actor subscribers.
using watch_hub_actor =
    caf::typed_actor<caf::replies_to<watch_request>::with<std::uint64_t>,
                     caf::replies_to<pull_atom, std::uint64_t>::with<std::vector<object_change>>,
                     caf::replies_to<event_watch_request>::with<std::uint64_t>,
                     caf::reacts_to<unsubscribe_atom, std::uint64_t>,
                     caf::replies_to<inspect_atom>::with<watch_hub_state>>;

/// One kind's reconcile loop: its work queue, workers, backoff ladder and schedules.
using controller_actor = caf::typed_actor<caf::replies_to<requeue_request>::with<bool>,
                                          caf::replies_to<schedule_atom, ObjectID>::with<Schedule>,
                                          caf::replies_to<schedule_watch_request>::with<bool>,
                                          caf::replies_to<inspect_atom>::with<controller_state>>;

/// Garbage collection: `collect_atom` runs a pass now (replies the objects removed).
using collect_atom = caf::atom_constant<caf::atom("collect")>;
using gc_actor = caf::typed_actor<caf::replies_to<collect_atom>::with<int>,
                                  caf::replies_to<inspect_atom>::with<gc_state>>;

/// The event timelines: `record_event_request` (extends the category's current run or
/// starts one) and `list_events_request`, both run by the store_writer in commit order;
/// `sweep_atom` runs a retention sweep now (replies the runs removed). It also sweeps at
/// start and on the resync cadence.
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;
using event_log_actor =
    caf::typed_actor<caf::replies_to<record_event_request>::with<Event>,
                     caf::replies_to<list_events_request>::with<std::vector<Event>>,
                     caf::replies_to<sweep_atom>::with<int>,
                     caf::replies_to<inspect_atom>::with<event_log_state>>;

/// Every timer: wakes an actor at a time of the beehive's clock.
using wake_at_atom = caf::atom_constant<caf::atom("wake_at")>;
using scheduler_actor = caf::typed_actor<caf::reacts_to<wake_at_atom, caf::actor, Time>,
                                         caf::replies_to<inspect_atom>::with<scheduler_state>>;

namespace detail {
store_writer_actor store_writer_of(const Beehive& bh);
watch_hub_actor watch_hub_of(const Beehive& bh);
std::optional<controller_actor> controller_of(const Beehive& bh, const GroupKind& gk);
gc_actor gc_of(const Beehive& bh);
event_log_actor event_log_of(const Beehive& bh);
scheduler_actor scheduler_of(const Beehive& bh);
}  // namespace detail

template <class Dummy>
auto Beehive::store_writer() const {
  return detail::store_writer_of(*this);
}

template <class Dummy>
auto Beehive::watch_hub() const {
  return detail::watch_hub_of(*this);
}

template <class Dummy>
auto Beehive::controller(const GroupKind& gk) const {
  return detail::controller_of(*this, gk);
}

template <class Dummy>
auto Beehive::gc() const {
  return detail::gc_of(*this);
}

template <class Dummy>
auto Beehive::event_log() const {
  return detail::event_log_of(*this);
}

template <class Dummy>
auto Beehive::scheduler() const {
  return detail::scheduler_of(*this);
}

/// Decodes a row received from an actor into the application's types, converting blobs
/// written at older schema versions through `m` when the kind has a migrator.
template <class Spec, class Status>
Object<Spec, Status> decode_row(const ObjectRow& row, const Migrator* m = nullptr) {
  return detail::decode_object<Spec, Status>(row, m);
}

}  // namespace beehive
