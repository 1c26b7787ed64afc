#pragma once

/// Events: an object's log of observations, aggregated into runs. Emissions that share
/// (category, type, reason) with the current run of their (object, category) extend
/// it (count + 1, last_at moves, message and detail follow the latest); anything else
/// starts a new run. `EventSpec` is what a controller records, `Event` one stored run.
///
/// Plain values: copyable, thread-compatible.

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include <beehive/errors.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/time.hpp>

namespace beehive {

using EventID = std::int64_t;

enum class EventType { Normal, Warning };

/// "Normal" or "Warning".
const char* to_string(EventType t) noexcept;
/// Inverse of to_string; throws Error(errc::decode) for any other text.
EventType event_type_from_string(const std::string& s);

struct EventSpec {
  std::string category{};  ///< an independent timeline; "" is the default one
  EventType type = EventType::Normal;
  std::string reason{};     ///< machine-readable token; part of the run key
  std::string message{};    ///< human-readable; sampled, not keyed
  nlohmann::json detail{};  ///< optional structured payload; null = none
};

struct Event {
  EventID id = 0;
  ObjectID object_id = 0;
  std::string category;
  EventType type = EventType::Normal;
  std::string reason;
  std::string message;    ///< the latest occurrence's
  nlohmann::json detail;  ///< the latest occurrence's; null = none
  int count = 0;          ///< occurrences in this run (>= 1; stays at INT_MAX once there)
  Time first_at{};
  Time last_at{};
};

/// Which event runs a listing or an event watch selects (what EventOptions set, and what
/// the actor surface's list_events_request and event_watch_request carry). Unset parts
/// select everything.
struct EventFilter {
  std::optional<std::string> category;
  std::optional<EventType> type;
  std::optional<std::string> reason;
  std::optional<int> limit;   ///< at most this many runs, newest first (>= 0)
  std::optional<Time> since;  ///< only runs active at or after it (last_at >= since)
};

/// Decodes `e.detail` as a T; throws Error(errc::decode) when there is no detail or it
/// is not a T, whatever T's own conversion throws (but a beehive::Error, which passes
/// through as it is).
template <class T>
T event_detail(const Event& e) {
  if (e.detail.is_null()) throw Error(errc::decode, "event has no detail");
  try {
    return e.detail.get<T>();
  } catch (...) {
    detail::rethrow_as(errc::decode, "cannot decode the event's detail");
  }
}

}  // namespace beehive
