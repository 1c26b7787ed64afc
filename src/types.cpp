// Names and accessors of the small public value types.

#include <algorithm>

#include <beehive/change.hpp>
#include <beehive/commit_record.hpp>
#include <beehive/condition.hpp>
#include <beehive/errors.hpp>
#include <beehive/event.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/object_meta.hpp>

namespace beehive {

std::string to_string(const GroupKind& gk) {
  return gk.group.empty() ? gk.kind : gk.kind + "." + gk.group;
}

const char* to_string(ConditionStatus s) noexcept {
  switch (s) {
    case ConditionStatus::True:
      return "True";
    case ConditionStatus::False:
      return "False";
    case ConditionStatus::Unknown:
      return "Unknown";
  }
  return "Unknown";
}

ConditionStatus condition_status_from_string(const std::string& s) {
  if (s == "True") return ConditionStatus::True;
  if (s == "False") return ConditionStatus::False;
  if (s == "Unknown") return ConditionStatus::Unknown;
  throw Error(errc::decode, "not a condition status: \"" + s + "\"");
}

bool same_observation(const Condition& stored, const Condition& next) noexcept {
  return stored.type == next.type && stored.status == next.status && stored.reason == next.reason &&
         stored.message == next.message && stored.liveness == next.liveness &&
         stored.observed_generation == next.observed_generation;
}

const Condition* find_condition(const ObjectMeta& meta, std::string_view type) noexcept {
  for (const auto& c : meta.conditions)
    if (c.type == type) return &c;
  return nullptr;
}

bool is_condition_true(const ObjectMeta& meta, std::string_view type) noexcept {
  const auto* c = find_condition(meta, type);
  return c && c->status == ConditionStatus::True;
}

void to_json(nlohmann::json& j, ConditionStatus s) { j = to_string(s); }
void from_json(const nlohmann::json& j, ConditionStatus& s) {
  s = condition_status_from_string(j.get<std::string>());
}

const char* to_string(EventType t) noexcept {
  return t == EventType::Warning ? "Warning" : "Normal";
}

EventType event_type_from_string(const std::string& s) {
  if (s == "Normal") return EventType::Normal;
  if (s == "Warning") return EventType::Warning;
  throw Error(errc::decode, "not an event type: \"" + s + "\"");
}

const char* to_string(ChangeType t) noexcept {
  switch (t) {
    case ChangeType::Added:
      return "Added";
    case ChangeType::Modified:
      return "Modified";
    case ChangeType::Deleted:
      return "Deleted";
  }
  return "Modified";
}

namespace {
template <class T>
const T& loaded(const std::optional<T>& v, const char* what) {
  if (!v) throw Error(errc::not_loaded, std::string(what) + " not loaded; pass the load option");
  return *v;
}
}  // namespace

std::optional<Ref> ObjectMeta::get_owner() const { return loaded(relations.owner, "owner"); }
const std::vector<Ref>& ObjectMeta::list_dependencies() const {
  return loaded(relations.dependencies, "dependencies");
}
const std::vector<Ref>& ObjectMeta::list_dependents() const {
  return loaded(relations.dependents, "dependents");
}
const std::vector<Ref>& ObjectMeta::list_owned() const { return loaded(relations.owned, "owned"); }
const std::vector<Event>& ObjectMeta::list_events() const {
  return loaded(relations.events, "events");
}

void commit_record::append(commit_record&& other) {
  for (auto& c : other.changes) changes.push_back(std::move(c));
  for (auto& w : other.wakes) wakes.push_back(std::move(w));
  for (auto& r : other.requeues) requeues.push_back(std::move(r));
  for (auto& r : other.backoff_resets) backoff_resets.push_back(std::move(r));
  for (auto& e : other.events) events.push_back(std::move(e));
  edges_removed |= other.edges_removed;
  logged_versions.insert(logged_versions.end(), other.logged_versions.begin(),
                         other.logged_versions.end());
  lost_through = std::max(lost_through, other.lost_through);
}

}  // namespace beehive
