#pragma once

/// Beehive's actor surface: the typed interfaces of its actors and the messages they
/// exchange, for applications that talk to beehive from their own CAF actors.
///
/// An application actor sends the same requests the blocking facade sends and gets
/// the reply asynchronously:
///
///   self->request(bh.store_writer(), caf::infinite,
///                 beehive::create_request{{"acme.com", "Widget"}, R"({"size":3})"})
///       .then([](const beehive::ObjectRow& row) { ... },
///             [](caf::error& err) { auto code = beehive::to_errc(err); ... });
///
/// Object rows carry spec and status as JSON text; `beehive::decode_row<Spec, Status>`
/// turns one into a typed `Object`. Errors arrive as `caf::error` in beehive's category
/// ("beehive") and convert to and from `beehive::errc`.
///
/// This is the only public header that includes CAF.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include <beehive/beehive.hpp>
#include <beehive/change.hpp>
#include <beehive/commit_record.hpp>
#include <beehive/condition.hpp>
#include <beehive/detail/codec.hpp>
#include <beehive/errors.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/object_row.hpp>

namespace beehive {

// -- errors -------------------------------------------------------------------

/// The category atom of beehive's caf::error values.
constexpr caf::atom_value error_category_atom = caf::atom("beehive");

/// A caf::error in beehive's category; `what` travels as the error's context.
caf::error make_error(errc code, std::string what = {});

/// The beehive code of `err`: its own code in beehive's category; `stopped` when the
/// receiving actor is gone; `deadline_exceeded` for a request timeout; `store` for any
/// other failure. Empty (`std::nullopt`) for "no error".
std::optional<errc> to_errc(const caf::error& err);

/// The message `make_error` attached, or "".
std::string error_message(const caf::error& err);

// -- atoms --------------------------------------------------------------------

using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;
using unsubscribe_atom = caf::atom_constant<caf::atom("unsubscr")>;

// -- store_writer -------------------------------------------------------------

/// Create an object. `spec` is JSON text. Replies the stored row.
struct create_request {
  GroupKind gk;
  std::string spec;
  std::optional<std::string> slug;
  std::vector<std::string> finalizers;
  std::optional<ObjectID> owner;  ///< must exist; its owned_by edge is written with the row
  int spec_version = 0;  ///< the schema version `spec` is written at
};

/// Replace an object's spec; a spec equal to the stored one writes nothing.
/// Replies the stored row.
struct update_request {
  GroupKind gk;
  ObjectID id = 0;
  std::string spec;
  int spec_version = 0;  ///< the schema version `spec` is written at
};

/// Update the object holding `slug`, or create it. Replies the stored row.
struct create_or_update_request {
  GroupKind gk;
  std::string slug;
  std::string spec;
  int spec_version = 0;  ///< the schema version `spec` is written at
};

/// Return the object holding `slug` untouched, or create it with the options.
struct get_or_create_request {
  GroupKind gk;
  std::string slug;
  std::string spec;
  std::vector<std::string> finalizers;
  std::optional<ObjectID> owner;
  int spec_version = 0;  ///< the schema version `spec` is written at
};

struct get_or_create_reply {
  ObjectRow row;
  bool created = false;
};

/// Request deletion of an object (a soft delete). Replies the row as it now stands.
struct remove_request {
  GroupKind gk;
  ObjectID id = 0;
};

/// Request deletion of the object holding `slug`, if any. Replies true when a deletion
/// was requested by this call.
struct remove_by_slug_request {
  GroupKind gk;
  std::string slug;
};

/// Controller writes (kind-folded: another kind's id is wrong_kind). Each replies the
/// row as it now stands.
struct update_status_request {
  GroupKind gk;
  ObjectID id = 0;
  std::int64_t observed_generation = 0;
  std::string status;  ///< JSON text
  int status_version = 0;  ///< the schema version `status` is written at
};

struct set_condition_request {
  GroupKind gk;
  ObjectID id = 0;
  Condition condition;
};

struct remove_condition_request {
  GroupKind gk;
  ObjectID id = 0;
  std::string type;
};

struct remove_finalizer_request {
  GroupKind gk;
  ObjectID id = 0;
  std::string finalizer;
};

/// Adds or removes a depends_on edge from this kind's `from` to any object `to`.
/// Replies true when the edge was added (removed); repeating it writes nothing.
struct add_dependency_request {
  GroupKind gk;
  ObjectID from = 0;
  ObjectID to = 0;
};

struct remove_dependency_request {
  GroupKind gk;
  ObjectID from = 0;
  ObjectID to = 0;
};

/// Records an observation on this kind's object `id`: extends the current run of its
/// category when (type, reason) match, starts a new run otherwise. Replies the run.
struct record_event_request {
  GroupKind gk;
  ObjectID id = 0;
  EventSpec event;
};

/// Event retention: keep the newest `per_object` runs per (object, category) (all when
/// 0) and none older than `max_age` (no bound when 0).
struct event_retention {
  int per_object = 0;
  std::chrono::milliseconds max_age{0};
};

/// One garbage-collection pass: cascades deletion to the children of deletion-pending
/// owners and removes collectible objects; a `full` pass (at start and on the resync
/// cadence) also trims event timelines by `retention` (per kind; `fallback` for kinds
/// not listed). Replies the number of objects removed.
struct collect_request {
  std::optional<event_retention> fallback;
  std::vector<std::pair<GroupKind, event_retention>> retention;
  bool full = false;
};

/// The sole owner of the database's write connection. Every write is one transaction;
/// the reply comes only after the commit. Subscribers (`subscribe_atom` + an actor)
/// receive a `commit_record` for every commit that changed something.
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
    caf::replies_to<record_event_request>::with<Event>,
    caf::replies_to<collect_request>::with<int>,
    caf::reacts_to<subscribe_atom, caf::actor>, caf::reacts_to<unsubscribe_atom, caf::actor>>;

// -- watch_hub ----------------------------------------------------------------

/// Subscribes `subscriber` to the objects of `gk` (or to the one object `id`). The hub
/// replies the subscription id, then sends the subscriber an `object_change` for each
/// object as it stands (`Added`), followed by every later change in commit order.
/// Actor subscribers are not conflated. The subscription ends with
/// `unsubscribe_atom` + the id, when the subscriber terminates, or when the beehive
/// stops (the subscriber then receives `watch_ended`).
struct watch_request {
  GroupKind gk;
  std::optional<ObjectID> id;
  caf::actor subscriber;
};

/// Subscribes `subscriber` to the event runs of object `id` that pass the filters: the
/// newest `limit` runs first (oldest of them first... newest first, as list_events),
/// then every new run and extension as an `event_run` message. Replies the
/// subscription id; ends as watch_request does.
struct event_watch_request {
  ObjectID id = 0;
  std::optional<std::string> category;
  std::optional<EventType> type;
  std::optional<std::string> reason;
  std::optional<Time> since;
  std::optional<int> limit;
  caf::actor subscriber;
};

/// Sent to an actor subscriber when its subscription ends because the beehive stopped.
struct watch_ended {
  std::uint64_t subscription = 0;
};

/// Fans committed changes out to watches: blocking streams and actor subscribers.
using watch_hub_actor =
    caf::typed_actor<caf::replies_to<watch_request>::with<std::uint64_t>,
                     caf::replies_to<event_watch_request>::with<std::uint64_t>,
                     caf::reacts_to<unsubscribe_atom, std::uint64_t>>;

namespace detail {
store_writer_actor store_writer_of(const Beehive& bh);
watch_hub_actor watch_hub_of(const Beehive& bh);
}  // namespace detail

template <class Dummy>
auto Beehive::store_writer() const {
  return detail::store_writer_of(*this);
}

template <class Dummy>
auto Beehive::watch_hub() const {
  return detail::watch_hub_of(*this);
}

/// Decodes a row received from an actor into the application's types, converting blobs
/// written at older schema versions through `m` when the kind has a migrator.
template <class Spec, class Status>
Object<Spec, Status> decode_row(const ObjectRow& row, const Migrator* m = nullptr) {
  return detail::decode_object<Spec, Status>(row, m);
}

}  // namespace beehive

// Local-only for now: these messages stay inside one process.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::create_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::update_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::create_or_update_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::get_or_create_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::get_or_create_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::remove_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::remove_by_slug_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::update_status_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::set_condition_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::remove_condition_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::remove_finalizer_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::add_dependency_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::remove_dependency_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::record_event_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::collect_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::Event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::event_run)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::ObjectRow)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::watch_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::watch_ended)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::event_watch_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::object_change)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::commit_record)
