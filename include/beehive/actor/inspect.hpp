#pragma once

/// `inspect` overloads for every value beehive's actors exchange, so that CAF can
/// serialize them (to another node, say) and print them (`caf::deep_to_string`).
/// `std::optional` members and JSON payloads go through small proxies, since CAF 0.17
/// knows neither.
///
/// The overloads keep no state: CAF may call them from any thread.

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>
#include <nlohmann/json.hpp>

#include <beehive/actor/messages.hpp>
#include <beehive/detail/codec.hpp>

namespace beehive::detail {

template <class Inspector>
constexpr bool saving = Inspector::reads_state;

/// An optional as (present, value).
template <class T>
struct OptRef {
  std::optional<T>& ref;
};

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

/// What CAF sees of a value: the value, or an OptRef for a nested optional.
template <class T>
decltype(auto) as_inspectable(T& value) {
  if constexpr (is_optional<T>::value)
    return OptRef<typename T::value_type>{value};
  else
    return (value);
}

template <class Inspector, class T>
typename Inspector::result_type inspect(Inspector& f, OptRef<T> x) {
  bool present = x.ref.has_value();
  T value = present ? *x.ref : T{};
  if constexpr (saving<Inspector>) {
    return f(caf::meta::type_name("optional"), present, as_inspectable(value));
  } else {
    auto result = f(caf::meta::type_name("optional"), present, as_inspectable(value));
    if (present)
      x.ref = std::move(value);
    else
      x.ref.reset();
    return result;
  }
}

template <class T>
OptRef<T> opt(std::optional<T>& x) {
  return {x};
}

/// A JSON value as its text (\"\" for null; see json_wire_text). A value with no JSON
/// text (nested deeper than beehive stores, a string that is not UTF-8) arrives as a
/// discarded value, which the store refuses: printing or parsing such a value would
/// recurse once per level or throw, at depths a hostile peer can send.
struct JsonRef {
  nlohmann::json& ref;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, JsonRef x) {
  if constexpr (saving<Inspector>) {
    std::string text = json_wire_text(x.ref);
    return f(caf::meta::type_name("json"), text);
  } else {
    std::string text;
    auto result = f(caf::meta::type_name("json"), text);
    x.ref = json_from_wire_text(text);
    return result;
  }
}

inline JsonRef json(nlohmann::json& x) { return {x}; }

template <class... Ts, std::size_t... Is>
void emplace_alternative(std::variant<Ts...>& v, std::size_t i, std::index_sequence<Is...>) {
  ((i == Is ? (void)v.template emplace<Is>() : (void)0), ...);
}

/// A std::variant (which CAF 0.17 does not know) as (index, alternative).
template <class Inspector, class... Ts>
typename Inspector::result_type inspect_variant(Inspector& f, std::variant<Ts...>& x) {
  if constexpr (saving<Inspector>) {
    auto index = static_cast<std::uint8_t>(x.index());
    return std::visit([&](auto& value) { return f(caf::meta::type_name("variant"), index, value); },
                      x);
  } else {
    std::uint8_t index = 0;
    if (auto err = f(index)) return err;
    if (index >= sizeof...(Ts)) return caf::make_error(caf::sec::invalid_argument);
    emplace_alternative(x, index, std::index_sequence_for<Ts...>{});
    return std::visit([&](auto& value) { return f(value); }, x);
  }
}

}  // namespace beehive::detail

namespace beehive {

#define BEEHIVE_INSPECT(T, ...)                                  \
  template <class Inspector>                                     \
  typename Inspector::result_type inspect(Inspector& f, T& x) {  \
    using detail::opt;                                           \
    using detail::json;                                          \
    return f(caf::meta::type_name("beehive::" #T), __VA_ARGS__); \
  }

BEEHIVE_INSPECT(GroupKind, x.group, x.kind)
BEEHIVE_INSPECT(Ref, x.id, x.group, x.kind)
BEEHIVE_INSPECT(Condition, x.type, x.status, x.reason, x.message, x.liveness, x.observed_generation,
                x.last_transition_at)
BEEHIVE_INSPECT(EventSpec, x.category, x.type, x.reason, x.message, json(x.detail))
BEEHIVE_INSPECT(Event, x.id, x.object_id, x.category, x.type, x.reason, x.message, json(x.detail),
                x.count, x.first_at, x.last_at)
BEEHIVE_INSPECT(Schedule, x.next_requeue_at)
BEEHIVE_INSPECT(EventFilter, opt(x.category), opt(x.type), opt(x.reason), opt(x.limit),
                opt(x.since))
BEEHIVE_INSPECT(LoadedRelations, opt(x.owner), opt(x.dependencies), opt(x.dependents), opt(x.owned),
                opt(x.events))
BEEHIVE_INSPECT(ObjectMeta, x.id, x.group, x.kind, opt(x.slug), x.generation,
                opt(x.observed_generation), opt(x.observed_at), x.resource_version,
                opt(x.deletion_requested_at), x.finalizers, x.labels, x.conditions, x.created_at,
                x.updated_at, x.relations)
BEEHIVE_INSPECT(ObjectRow, x.meta, x.spec, x.spec_version, opt(x.status), x.status_version)
BEEHIVE_INSPECT(object_change, x.type, x.row, x.parts, opt(x.owner), x.first_version)
BEEHIVE_INSPECT(event_run, x.event, x.resource_version)
// logged_versions is the writer's own bookkeeping (which log entries are its own), not
// sent to subscribers.
BEEHIVE_INSPECT(commit_record, x.changes, x.events, x.wakes, x.requeues, x.backoff_resets,
                x.edges_removed, x.lost_through)
BEEHIVE_INSPECT(create_request, x.gk, x.spec, opt(x.slug), x.finalizers, opt(x.owner),
                opt(x.spec_version), x.labels)
BEEHIVE_INSPECT(update_request, x.gk, x.id, x.spec, opt(x.spec_version), opt(x.resource_version))
BEEHIVE_INSPECT(create_or_update_request, x.gk, x.slug, x.spec, opt(x.spec_version), x.finalizers,
                opt(x.owner), x.labels)
BEEHIVE_INSPECT(get_or_create_request, x.gk, x.slug, x.spec, x.finalizers, opt(x.owner),
                opt(x.spec_version), x.labels)
BEEHIVE_INSPECT(get_or_create_reply, x.row, x.created)
BEEHIVE_INSPECT(remove_request, x.gk, x.id, opt(x.resource_version))
BEEHIVE_INSPECT(remove_by_slug_request, x.gk, x.slug)
BEEHIVE_INSPECT(update_status_request, x.gk, x.id, x.observed_generation, x.status,
                opt(x.status_version), opt(x.resource_version))
BEEHIVE_INSPECT(set_labels_request, x.gk, x.id, x.labels, opt(x.resource_version))
BEEHIVE_INSPECT(log_requeue_request, x.gk, x.id, x.reset_backoff)
BEEHIVE_INSPECT(trim_change_log_request, x.entries, x.max_age)
BEEHIVE_INSPECT(set_condition_request, x.gk, x.id, x.condition)
BEEHIVE_INSPECT(remove_condition_request, x.gk, x.id, x.type)
BEEHIVE_INSPECT(remove_finalizer_request, x.gk, x.id, x.finalizer)
BEEHIVE_INSPECT(add_finalizer_request, x.gk, x.id, x.finalizer)
BEEHIVE_INSPECT(add_dependency_request, x.gk, x.from, x.to)
BEEHIVE_INSPECT(remove_dependency_request, x.gk, x.from, x.to)
BEEHIVE_INSPECT(record_event_request, x.gk, x.id, x.event)
BEEHIVE_INSPECT(event_retention, x.per_object, x.max_age)
BEEHIVE_INSPECT(collect_request, x.cascade)
BEEHIVE_INSPECT(trim_events_request, opt(x.fallback), x.retention)
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_request& x) {
  return detail::inspect_variant(f, x);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_reply& x) {
  return detail::inspect_variant(f, x);
}
BEEHIVE_INSPECT(transaction_request, x.writes)
BEEHIVE_INSPECT(transaction_reply, x.replies)
BEEHIVE_INSPECT(get_request, x.gk, x.id, x.loads)
BEEHIVE_INSPECT(get_by_slug_request, x.gk, x.slug, x.loads)
BEEHIVE_INSPECT(list_request, x.gk, x.loads, opt(x.owner), x.selector)
BEEHIVE_INSPECT(relation_request, x.id, x.relation)
BEEHIVE_INSPECT(has_incoming_refs_request, x.id)
BEEHIVE_INSPECT(list_events_request, x.id, x.filter)
BEEHIVE_INSPECT(store_writer_state, x.transactions, x.session, x.deferred, x.subscribers)
BEEHIVE_INSPECT(watch_request, x.gk, opt(x.id), x.subscriber, x.pull, x.selector,
                opt(x.resume_from))
BEEHIVE_INSPECT(event_watch_request, x.id, x.filter, x.subscriber)
BEEHIVE_INSPECT(watch_ended, x.subscription, x.reason)
BEEHIVE_INSPECT(watch_hub_state, x.object_watches, x.event_watches, x.pending, x.queued,
                x.peak_queued, x.monitored)
BEEHIVE_INSPECT(requeue_request, x.id, x.reset_backoff)
BEEHIVE_INSPECT(schedule_watch_request, x.id, x.subscriber)
BEEHIVE_INSPECT(schedule_change, x.id, x.schedule)
BEEHIVE_INSPECT(controller_state, x.gk, x.queue_length, x.in_flight, x.backoff, x.timers,
                x.dispatching, x.workers, x.restarts, x.schedule_watches, x.resync_listings,
                x.settle_waiting)
BEEHIVE_INSPECT(gc_state, x.passes, x.running)
BEEHIVE_INSPECT(event_log_state, x.runs_started, x.runs_extended, x.sweeps, x.trimmed, x.sweeping)
BEEHIVE_INSPECT(scheduler_state, x.wakes, x.earliest)

#undef BEEHIVE_INSPECT

}  // namespace beehive
