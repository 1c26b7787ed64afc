#include "render.hpp"

#include <cinttypes>
#include <cstdio>
#include <ctime>

#include <beehive/condition.hpp>

#include "selector.hpp"
#include "terminal_text.hpp"

namespace beehive::ctl {

namespace {

Json optional_time(const std::optional<Time>& t) { return t ? Json(iso_time(*t)) : Json(); }

Json ref_json(const Ref& r) { return Json{{"id", r.id}, {"group", r.group}, {"kind", r.kind}}; }

Json refs_json(const std::vector<Ref>& refs) {
  Json out = Json::array();
  for (auto& r : refs) out.push_back(ref_json(r));
  return out;
}

/// Stored JSON text as a value; text that does not parse (never written by beehive,
/// but this is an inspector) is shown as a string rather than failing the command.
Json parse_stored(const std::string& text) {
  auto j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? Json(text) : j;
}

/// The reference's panel quotes messages; an empty one stays empty.
std::string quoted(const std::string& message) {
  if (message.empty()) return message;
  std::string out(1, '"');
  out.append(message).push_back('"');
  return out;
}

std::tm local_tm(Time t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  return tm;
}

/// "FIRST..LAST", the date written once when both fall on the same day.
std::string window(Time first, Time last, Time now) {
  auto a = local_tm(first), b = local_tm(last);
  bool same_day = a.tm_year == b.tm_year && a.tm_yday == b.tm_yday;
  char end[16];
  std::strftime(end, sizeof end, "%H:%M:%S", &b);
  return clock_time(first, now) + ".." + (same_day ? std::string(end) : clock_time(last, now));
}

}  // namespace

std::string age(Time t, Time now) {
  using namespace std::chrono;
  auto d = duration_cast<seconds>(now - t).count();
  std::string sign = d < 0 ? "-" : "";
  if (d < 0) d = -d;
  char buf[32];
  if (d < 120)
    std::snprintf(buf, sizeof buf, "%" PRId64 "s", static_cast<std::int64_t>(d));
  else if (d < 120LL * 60)
    std::snprintf(buf, sizeof buf, "%" PRId64 "m", static_cast<std::int64_t>(d / 60));
  else if (d < 48LL * 3600)
    std::snprintf(buf, sizeof buf, "%" PRId64 "h", static_cast<std::int64_t>(d / 3600));
  else
    std::snprintf(buf, sizeof buf, "%" PRId64 "d", static_cast<std::int64_t>(d / 86400));
  return sign + buf;
}

std::string iso_time(Time t) {
  auto ms = to_millis(t);
  std::int64_t secs = ms / 1000, frac = ms % 1000;
  if (frac < 0) {
    frac += 1000;
    --secs;
  }
  std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(frac));
  return buf;
}

std::string clock_time(Time t, Time now) {
  auto a = local_tm(t), b = local_tm(now);
  bool today = a.tm_year == b.tm_year && a.tm_yday == b.tm_yday;
  char buf[64];
  std::strftime(buf, sizeof buf, today ? "%H:%M:%S" : "%Y-%m-%d %H:%M:%S", &a);
  return buf;
}

std::string json_output(const Json& j) { return printable_json(j.dump(2)); }

Json object_json(const ObjectRow& row, const std::vector<ConditionRow>& conditions) {
  auto& m = row.meta;
  Json j;
  j["id"] = m.id;
  j["group"] = m.group;
  j["kind"] = m.kind;
  j["slug"] = m.slug ? Json(*m.slug) : Json();
  j["generation"] = m.generation;
  j["observed_generation"] = m.observed_generation ? Json(*m.observed_generation) : Json();
  j["observed_at"] = optional_time(m.observed_at);
  j["resource_version"] = m.resource_version;
  j["created_at"] = iso_time(m.created_at);
  j["updated_at"] = iso_time(m.updated_at);
  j["deletion_requested_at"] = optional_time(m.deletion_requested_at);
  j["finalizers"] = m.finalizers;
  j["labels"] = m.labels;
  j["spec"] = parse_stored(row.spec);
  j["spec_version"] = row.spec_version;
  j["status"] = row.status ? parse_stored(*row.status) : Json();
  j["status_version"] = row.status_version;
  Json conds = Json::array();
  for (auto& c : conditions) {
    Json cj{{"type", c.condition.type},
            {"status", to_string(c.condition.status)},
            {"reason", c.condition.reason},
            {"message", c.condition.message},
            {"liveness", c.condition.liveness},
            {"observed_generation", c.condition.observed_generation},
            {"last_transition_at", iso_time(c.last_transition_at)}};
    // A stale liveness condition reads as Unknown; keep what was written visible.
    if (c.stored != c.condition.status) cj["stored_status"] = to_string(c.stored);
    conds.push_back(std::move(cj));
  }
  j["conditions"] = std::move(conds);
  auto& rel = m.relations;
  if (rel.owner) j["owner"] = *rel.owner ? ref_json(**rel.owner) : Json();
  if (rel.dependencies) j["dependencies"] = refs_json(*rel.dependencies);
  if (rel.dependents) j["dependents"] = refs_json(*rel.dependents);
  if (rel.owned) j["owned"] = refs_json(*rel.owned);
  return j;
}

Json event_json(const Event& e) {
  Json j;
  j["id"] = e.id;
  j["object_id"] = e.object_id;
  j["category"] = e.category;
  j["type"] = to_string(e.type);
  j["reason"] = e.reason;
  j["message"] = e.message;
  j["detail"] = e.detail.is_null() ? Json() : Json::parse(e.detail.dump());
  j["count"] = e.count;
  j["first_at"] = iso_time(e.first_at);
  j["last_at"] = iso_time(e.last_at);
  return j;
}

std::string slug_cell(const std::optional<std::string>& slug) {
  if (!slug) return "<none>";
  // Quoted where it would read as something else: a blank cell as the next column's
  // value, "<none>" as no slug, a leading quote as a quoted slug.
  if (slug->empty() || *slug == "<none>" || slug->front() == '"') return Json(*slug).dump();
  return *slug;
}

std::string ref_name(const Ref& r, const std::optional<std::string>& slug) {
  auto name = kind_name(GroupKind{r.group, r.kind}) + "/" + std::to_string(r.id);
  if (slug) name += " (" + *slug + ")";
  return name;
}

std::string object_name(const ObjectMeta& m) {
  return kind_name(GroupKind{m.group, m.kind}) + "/" + (m.slug ? *m.slug : std::to_string(m.id));
}

std::string labels_text(const Labels& labels) {
  std::string out;
  for (auto& [k, v] : labels) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out.empty() ? "<none>" : out;
}

// LABELS last, as kubectl's --show-labels has it: the one column of unbounded width.
Table object_table() {
  return Table(
      {"ID", "SLUG", "GENERATION", "OBSERVED", "READY", "CONDITIONS", "AGE", "DELETING", "LABELS"});
}

bool stale(const Condition& c, const ObjectMeta& m) {
  return c.observed_generation != 0 && c.observed_generation < m.generation;
}

std::string ready_status(const ObjectMeta& m) {
  for (auto& c : m.conditions)
    if (c.type == "Ready") return std::string(to_string(c.status)) + (stale(c, m) ? "(stale)" : "");
  return "-";
}

void add_object_row(Table& t, const ObjectRow& row, Time now) {
  auto& m = row.meta;
  auto ready = ready_status(m);
  int true_count = 0;
  for (auto& c : m.conditions)
    if (c.status == ConditionStatus::True) ++true_count;
  auto conditions = m.conditions.empty()
                        ? std::string("-")
                        : std::to_string(true_count) + "/" + std::to_string(m.conditions.size());
  t.add({std::to_string(m.id), slug_cell(m.slug), std::to_string(m.generation),
         m.observed_generation ? std::to_string(*m.observed_generation) : "-", ready, conditions,
         age(m.created_at, now), m.deletion_requested_at ? age(*m.deletion_requested_at, now) : "-",
         labels_text(m.labels)});
}

Table event_table(const std::vector<Event>& runs, Time now) {
  Table t({"LAST", "CATEGORY", "TYPE", "REASON", "COUNT", "FIRST..LAST", "MESSAGE"});
  for (auto& e : runs) {
    auto type = e.type == EventType::Normal ? "✓ Normal" : "✗ Warning";
    t.add({clock_time(e.last_at, now), e.category.empty() ? "-" : e.category, type, e.reason,
           std::string("x").append(std::to_string(e.count)), window(e.first_at, e.last_at, now),
           quoted(e.message)});
  }
  return t;
}

}  // namespace beehive::ctl
