// The facade's checks for requests that arrive from application actors (see
// request_checks.hpp).

#include "store/request_checks.hpp"

#include <string>
#include <type_traits>
#include <vector>

#include <beehive/detail/codec.hpp>
#include <beehive/errors.hpp>
#include <beehive/options.hpp>

#include "names.hpp"
#include "store/object_limits.hpp"

namespace beehive::store {

using detail::dump_json;
using detail::parse_json;
using detail::require_json_text;
using detail::require_storable;
using detail::require_text;

void check_kind(const GroupKind& gk) {
  require_name(gk.group, "group");
  require_name(gk.kind, "kind");
}

void check_text(const std::string& text, std::string_view what) { require_text(text, what); }

void check_text(const std::optional<std::string>& text, std::string_view what) {
  if (text) require_text(*text, what);
}

void check_name(const std::string& name, std::string_view what) { require_name(name, what); }

void check_new_finalizer(const std::string& finalizer) { require_new_finalizer(finalizer); }

void check_name(const std::optional<std::string>& name, std::string_view what) {
  if (name) require_name(*name, what);
}

void check_condition(const Condition& c) {
  for (auto* text : {&c.reason, &c.message}) require_text(*text, "condition text");
  require_name(c.type, "condition type");
  if (c.type.empty()) throw Error(errc::invalid_argument, "a condition needs a type");
  // An out-of-range status would be stored as Unknown yet never compare equal to it.
  if (c.status != ConditionStatus::True && c.status != ConditionStatus::False &&
      c.status != ConditionStatus::Unknown)
    throw Error(errc::invalid_argument, "condition status " +
                                            std::to_string(static_cast<int>(c.status)) +
                                            " is not one of True, False and Unknown");
  check_observed_generation(c.observed_generation);
}

void check_observed_generation(std::int64_t generation) {
  // Generations count from 1; 0 says none was observed.
  if (generation < 0)
    throw Error(errc::invalid_argument,
                "observed generation " + std::to_string(generation) + " is negative");
}

namespace {
void require_at_most(std::size_t size, std::size_t max, const char* what) {
  if (size > max)
    throw Error(errc::invalid_argument, std::string(what) + " of " + std::to_string(size) +
                                            " bytes is over the limit of " + std::to_string(max));
}
}  // namespace

void check_finalizers_bytes(const std::vector<std::string>& finalizers) {
  std::size_t bytes = 0;
  for (const auto& f : finalizers) bytes += f.size();
  require_at_most(bytes, max_finalizers_bytes, "finalizers");
}

void check_labels_bytes(const Labels& labels, std::size_t limit) {
  std::size_t bytes = 0;
  for (const auto& [key, value] : labels) bytes += key.size() + value.size();
  require_at_most(bytes, limit, "labels");
}

namespace {
/// Whether `j`'s JSON text is surely longer than `bytes`: counts the fewest bytes each
/// value prints as (a string its bytes and quotes, a number one digit, a separator one),
/// and stops once past `bytes`. What it lets through prints in at most a few times
/// `bytes`: the store writer measures that exactly (WriteEngine::check_size), while a
/// detail of hundreds of megabytes is refused here, on the caller's side, unprinted.
bool json_text_surely_over(const nlohmann::json& j, std::size_t bytes) {
  std::size_t least = 0;
  std::vector<const nlohmann::json*> todo{&j};
  while (!todo.empty()) {
    const auto* v = todo.back();
    todo.pop_back();
    if (v->is_string()) {
      least += v->get_ref<const std::string&>().size() + 2;
    } else if (v->is_structured()) {
      least += 2 + (v->empty() ? 0 : v->size() - 1);  // brackets, separators
      for (auto it = v->begin(); it != v->end(); ++it) {
        if (v->is_object()) least += it.key().size() + 3;  // quotes, colon
        todo.push_back(&it.value());
      }
    } else {
      least += 1;
    }
    if (least > bytes) return true;
  }
  return false;
}

void check_event_type(EventType t) {
  if (t != EventType::Normal && t != EventType::Warning)
    throw Error(errc::invalid_argument, "event type " + std::to_string(static_cast<int>(t)) +
                                            " is not one of Normal and Warning");
}
}  // namespace

void check_event(const EventSpec& e) {
  for (auto* text : {&e.reason, &e.message}) require_text(*text, "event text");
  require_name(e.category, "event category");
  // An out-of-range type would be stored as Normal yet start a new run at every record.
  check_event_type(e.type);
  require_storable(e.detail, "event detail");
  if (json_text_surely_over(e.detail, max_event_detail_bytes))
    throw Error(errc::invalid_argument, "an event detail of more than " +
                                            std::to_string(max_event_detail_bytes) +
                                            " bytes of JSON text is over its limit");
}

void check_filter(const EventFilter& f) {
  if (f.category) require_name(*f.category, "event category");
  if (f.reason) require_text(*f.reason, "event reason");
  if (f.type) check_event_type(*f.type);
  // (SQLite reads a negative LIMIT as none, PostgreSQL refuses it: neither is asked for.)
  if (f.limit && *f.limit < 0)
    throw Error(errc::invalid_argument,
                "an event limit cannot be negative (got " + std::to_string(*f.limit) + ")");
}

void check_loads(unsigned loads) {
  constexpr unsigned known = LoadOption::owner | LoadOption::dependencies | LoadOption::dependents |
                             LoadOption::owned | LoadOption::events;
  if (loads & ~known)
    throw Error(errc::invalid_argument,
                "loads holds bits that are not LoadOption's: " + std::to_string(loads & ~known));
}

void check_relation(unsigned relation) {
  if (relation != LoadOption::owner && relation != LoadOption::dependencies &&
      relation != LoadOption::dependents && relation != LoadOption::owned)
    throw Error(errc::invalid_argument,
                "a relation is one of LoadOption::owner, dependencies, dependents and owned, not " +
                    std::to_string(relation));
}

void check_schema_version(const std::optional<int>& version, std::string_view what) {
  if (version && *version < 0)
    throw Error(errc::invalid_argument,
                std::string(what) + " schema version " + std::to_string(*version) + " is negative");
}

void check_version_readable(const std::optional<int>& version, int current, std::string_view what) {
  if (version && current > 0 && *version > current)
    throw Error(errc::invalid_argument, std::string(what) + " schema version " +
                                            std::to_string(*version) + " is above the kind's, " +
                                            std::to_string(current) +
                                            ": nothing here could read it back");
}

void make_canonical_json(std::string& text, std::string_view what) {
  require_json_text(text, what);
  text = dump_json(parse_json(text));
}

}  // namespace beehive::store
