#pragma once

/// The requests beehive's store_writer serves, as plain values: one list of write
/// requests (each names its reply type), the reads, and the typed `transaction_request`.
/// Everything else is derived from these lists: the store_writer's typed interface
/// (actors.hpp), the message types `add_message_types` registers, the writer's variant of
/// writes and its reply mapping (src/actors/store_writer.*), while each request's effect
/// is one `WriteOps::apply` overload (src/store/write_ops.*). Adding a write means adding
/// its struct here (with `reply_type` and `type_name`), its `inspect` line
/// (actor/inspect.hpp), its `WriteOps::apply` overload and its tests.
///
/// No CAF here: the store layer and the blocking facade use these types too.
///
/// Plain values: copyable, thread-compatible.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <beehive/condition.hpp>
#include <beehive/event.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/object_row.hpp>

namespace beehive {

/// A list of types, to derive variants, actor interfaces and registrations from.
template <class... Ts>
struct type_list {};

// -- writes -------------------------------------------------------------------------------

/// Create an object. `spec` is JSON text. Replies the stored row.
struct create_request {
  using reply_type = ObjectRow;
  static constexpr const char* type_name = "beehive::create_request";
  GroupKind gk{};
  std::string spec{};
  std::optional<std::string> slug{};
  std::vector<std::string> finalizers{};
  std::optional<ObjectID> owner{};  ///< must exist; its owned_by edge is written with the row
  /// The schema version `spec` is written at; unset: the version of the kind's migrator
  /// (0 for a kind without one). Negative, or above a migrator's version (no read here
  /// could decode it), is invalid_argument.
  std::optional<int> spec_version{};
  Labels labels{};  ///< checked as set_labels_request's
};

/// Replace an object's spec; a spec equal to the stored one writes nothing.
/// Replies the stored row.
struct update_request {
  using reply_type = ObjectRow;
  static constexpr const char* type_name = "beehive::update_request";
  GroupKind gk{};
  ObjectID id = 0;
  std::string spec{};
  std::optional<int> spec_version{};  ///< as create_request's
  /// The write happens only if the object is at this resource version (errc::conflict
  /// otherwise, nothing written).
  std::optional<std::int64_t> resource_version{};
};

/// Update the object holding `slug`, or create it (with `finalizers` and `owner`, which
/// an update ignores). Replies the stored row.
struct create_or_update_request {
  using reply_type = ObjectRow;
  static constexpr const char* type_name = "beehive::create_or_update_request";
  GroupKind gk{};
  std::string slug{};
  std::string spec{};
  std::optional<int> spec_version{};  ///< as create_request's
  std::vector<std::string> finalizers{};
  std::optional<ObjectID> owner{};  ///< as create_request's, when it creates
  Labels labels{};                  ///< when it creates
};

struct get_or_create_reply {
  static constexpr const char* type_name = "beehive::get_or_create_reply";
  ObjectRow row{};
  bool created = false;
};

/// Return the object holding `slug` untouched, or create it with the options.
struct get_or_create_request {
  using reply_type = get_or_create_reply;
  static constexpr const char* type_name = "beehive::get_or_create_request";
  GroupKind gk{};
  std::string slug{};
  std::string spec{};
  std::vector<std::string> finalizers{};
  std::optional<ObjectID> owner{};
  std::optional<int> spec_version{};  ///< as create_request's
  Labels labels{};                    ///< when it creates
};

/// Request deletion of an object (a soft delete). Replies the row as it now stands.
struct remove_request {
  using reply_type = ObjectRow;
  static constexpr const char* type_name = "beehive::remove_request";
  GroupKind gk{};
  ObjectID id = 0;
  std::optional<std::int64_t> resource_version{};  ///< as update_request's
};

/// Request deletion of the object holding `slug`, if any. Replies true when a deletion
/// was requested by this call.
struct remove_by_slug_request {
  using reply_type = bool;
  static constexpr const char* type_name = "beehive::remove_by_slug_request";
  GroupKind gk{};
  std::string slug{};
};

/// Controller writes (kind-folded: another kind's id is wrong_kind). Each replies the
/// row as it now stands.
struct update_status_request {
  using reply_type = ObjectRow;
  static constexpr const char* type_name = "beehive::update_status_request";
  GroupKind gk{};
  ObjectID id = 0;
  std::int64_t observed_generation = 0;  ///< 0 or above (invalid_argument otherwise)
  std::string status{};                  ///< JSON text
  /// The schema version `status` is written at; unset: the version of the kind's
  /// migrator (0 for a kind without one). Negative, or above a migrator's version, is
  /// invalid_argument.
  std::optional<int> status_version{};
  std::optional<std::int64_t> resource_version{};  ///< as update_request's
};

struct set_condition_request {
  using reply_type = ObjectRow;
  static constexpr const char* type_name = "beehive::set_condition_request";
  GroupKind gk{};
  ObjectID id = 0;
  Condition condition{};
};

struct remove_condition_request {
  using reply_type = ObjectRow;
  static constexpr const char* type_name = "beehive::remove_condition_request";
  GroupKind gk{};
  ObjectID id = 0;
  std::string type{};
};

struct remove_finalizer_request {
  using reply_type = ObjectRow;
  static constexpr const char* type_name = "beehive::remove_finalizer_request";
  GroupKind gk{};
  ObjectID id = 0;
  std::string finalizer{};
};

/// Adds a finalizer (present already: nothing written); invalid_argument on an object
/// whose deletion was requested.
struct add_finalizer_request {
  using reply_type = ObjectRow;
  static constexpr const char* type_name = "beehive::add_finalizer_request";
  GroupKind gk{};
  ObjectID id = 0;
  std::string finalizer{};
};

/// Replaces an object's labels (keys and values in Kubernetes' syntax, invalid_argument
/// otherwise): moves its resource version, not its generation. Replies the row.
struct set_labels_request {
  using reply_type = ObjectRow;
  static constexpr const char* type_name = "beehive::set_labels_request";
  GroupKind gk{};
  ObjectID id = 0;
  Labels labels{};
  std::optional<std::int64_t> resource_version{};  ///< as update_request's
};

/// Asks the kind's controller to reconcile the object, in whichever process runs it:
/// recorded in the change log (a running beehive reacts to another process's), no
/// object changes. For tools that write the database without running controllers
/// (beehive-ctl requeue). With `reset_backoff`, the controller also forgets the object's
/// retry backoff, as `Client::requeue(..., with_reset_backoff())` does. Replies true.
struct log_requeue_request {
  using reply_type = bool;
  static constexpr const char* type_name = "beehive::log_requeue_request";
  GroupKind gk{};
  ObjectID id = 0;
  bool reset_backoff = false;
};

/// Adds or removes a depends_on edge from this kind's `from` to any object `to`.
/// Replies true when the edge was added (removed); repeating it writes nothing.
struct add_dependency_request {
  using reply_type = bool;
  static constexpr const char* type_name = "beehive::add_dependency_request";
  GroupKind gk{};
  ObjectID from = 0;
  ObjectID to = 0;
};

struct remove_dependency_request {
  using reply_type = bool;
  static constexpr const char* type_name = "beehive::remove_dependency_request";
  GroupKind gk{};
  ObjectID from = 0;
  ObjectID to = 0;
};

/// Records an observation on this kind's object `id`: extends the current run of its
/// category when (type, reason) match, starts a new run otherwise. Replies the run.
struct record_event_request {
  using reply_type = Event;
  static constexpr const char* type_name = "beehive::record_event_request";
  GroupKind gk{};
  ObjectID id = 0;
  EventSpec event{};
};

/// Event retention: keep the newest `per_object` runs per (object, category) (all when
/// 0) and none older than `max_age` (no bound when 0).
struct event_retention {
  static constexpr const char* type_name = "beehive::event_retention";
  int per_object = 0;
  std::chrono::milliseconds max_age{0};
};

/// One garbage-collection pass: cascades deletion to the children of deletion-pending
/// owners and removes collectible objects, at most 1000 of them in all (the gc runs
/// passes until nothing is left). Replies the number of objects removed.
struct collect_request {
  using reply_type = int;
  static constexpr const char* type_name = "beehive::collect_request";
  /// Whether the pass looks for owners whose children still need a deletion request
  /// (default). Without it, a pass only removes what is collectible: what the gc asks
  /// for when no deletion was requested since its last cascading pass, sparing a read of
  /// every deletion-pending owner. A cascading pass always leaves room to mark one child
  /// when any is left, so that its commit (a deletion request) asks for the next.
  bool cascade = true;
};

/// One retention sweep: trims every kind's event timelines by `retention` (per kind;
/// `fallback` for kinds not listed; nothing when neither applies). Replies the number of
/// runs removed, once the whole sweep has committed. A sweep with much to trim commits
/// it in pages of about 10 000 runs; what the writer is asked meanwhile is served
/// between them. Sweeps asked for while one runs follow it, in order.
struct trim_events_request {
  using reply_type = int;
  static constexpr const char* type_name = "beehive::trim_events_request";
  std::optional<event_retention> fallback{};
  std::vector<std::pair<GroupKind, event_retention>> retention{};
};

/// One change-log trim: removes the entries beyond the newest `entries` (no count bound
/// when <= 0) that are older than `max_age` (no age bound when <= 0). Neither bound (the
/// default) removes nothing, as with_change_log_retention(0, 0) keeps the whole log.
/// Replies the number removed.
struct trim_change_log_request {
  using reply_type = int;
  static constexpr const char* type_name = "beehive::trim_change_log_request";
  std::int64_t entries = 0;
  std::chrono::milliseconds max_age{0};
};

/// The writes an application may send, alone or inside a `transaction_request`.
using write_request_types =
    type_list<create_request, update_request, create_or_update_request, get_or_create_request,
              remove_request, remove_by_slug_request, update_status_request, set_condition_request,
              remove_condition_request, remove_finalizer_request, add_dependency_request,
              remove_dependency_request, record_event_request, add_finalizer_request,
              set_labels_request, log_requeue_request>;

/// Beehive's own maintenance writes (gc and event_log send them), each in transactions
/// of its own (a sweep may take several, see trim_events_request).
using maintenance_request_types =
    type_list<collect_request, trim_events_request, trim_change_log_request>;

namespace detail {
template <class List, class... More>
struct variant_of;
template <class... Ts, class... More>
struct variant_of<type_list<Ts...>, More...> {
  using type = std::variant<Ts..., More...>;
};
}  // namespace detail

/// One write of `write_request_types`.
using write_request = typename detail::variant_of<write_request_types>::type;

/// The distinct reply types of the writes, in the order `write_reply` holds them.
using write_reply = std::variant<ObjectRow, get_or_create_reply, bool, Event>;

struct transaction_reply {
  static constexpr const char* type_name = "beehive::transaction_reply";
  std::vector<write_reply> replies{};
};

/// The actor form of `within`: `writes` applied in one transaction, in order, all or
/// nothing. Replies a `transaction_reply` holding each write's reply, in order; if any
/// write fails, nothing is committed and the error names the failing index.
struct transaction_request {
  using reply_type = transaction_reply;
  static constexpr const char* type_name = "beehive::transaction_request";
  std::vector<write_request> writes{};
};

// -- reads (served from the read connections) ----------------------------------------------

/// The kind's object `id`; not_found for a missing or another kind's id. `loads` is a
/// set of LoadOption bits (LoadOption::owner | LoadOption::events ...); any other bit is
/// invalid_argument, here and in every read that takes `loads`.
struct get_request {
  using reply_type = ObjectRow;
  static constexpr const char* type_name = "beehive::get_request";
  GroupKind gk{};
  ObjectID id = 0;
  unsigned loads = 0;
};

struct get_by_slug_request {
  using reply_type = ObjectRow;
  static constexpr const char* type_name = "beehive::get_by_slug_request";
  GroupKind gk{};
  std::string slug{};
  unsigned loads = 0;
};

/// Every object of the kind by id, or (with `owner`) those `owner` owns; with a
/// `selector` (with_selector's syntax; invalid_argument when malformed), those whose
/// labels match.
struct list_request {
  using reply_type = std::vector<ObjectRow>;
  static constexpr const char* type_name = "beehive::list_request";
  GroupKind gk{};
  unsigned loads = 0;
  std::optional<ObjectID> owner{};
  std::string selector{};
};

/// One relation of any object (one LoadOption bit: owner, dependencies, dependents or
/// owned; anything else is invalid_argument); not kind-scoped, empty for a missing id.
struct relation_request {
  using reply_type = std::vector<Ref>;
  static constexpr const char* type_name = "beehive::relation_request";
  ObjectID id = 0;
  unsigned relation = 0;
};

struct has_incoming_refs_request {
  using reply_type = bool;
  static constexpr const char* type_name = "beehive::has_incoming_refs_request";
  ObjectID id = 0;
};

/// An object's event runs, newest first, filtered as list_events filters.
struct list_events_request {
  using reply_type = std::vector<Event>;
  static constexpr const char* type_name = "beehive::list_events_request";
  ObjectID id = 0;
  EventFilter filter{};
};

/// The reads the store_writer hands to its reader.
using read_request_types =
    type_list<get_request, get_by_slug_request, list_request, relation_request,
              has_incoming_refs_request, list_events_request>;

}  // namespace beehive
