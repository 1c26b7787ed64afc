// The event-log reads of a SQLite Connection: an object's event runs by query, the
// current run of a category, a snapshot of runs with the store's resource version, and
// the newest runs per category that LoadOption::events attaches to objects.
//
// Runs on the thread using the connection: a caller's thread with a leased reader, or
// the writer's thread (whose reads see its open transaction). Not thread-safe.

#include <algorithm>

#include <beehive/detail/codec.hpp>
#include <beehive/options.hpp>

#include "store/sqlite/sqlite_connection.hpp"

namespace beehive::store {

namespace {

// load_events() attaches this many of the newest runs per (object, category).
constexpr int recent_events_per_category = 10;

// Columns: id, object_id, category, type, reason, message, detail, count, first_at,
// last_at, resource_version.
event_run read_event(SQLite::Statement& s) {
  event_run r;
  auto& e = r.event;
  e.id = s.getColumn(0).getInt64();
  e.object_id = s.getColumn(1).getInt64();
  e.category = s.getColumn(2).getString();
  e.type = event_type_from_string(s.getColumn(3).getString());
  e.reason = s.getColumn(4).getString();
  e.message = s.getColumn(5).getString();
  // Through the codec: the fast path, and text nested too deep to handle is refused.
  if (!s.getColumn(6).isNull()) e.detail = detail::parse_json(s.getColumn(6).getString());
  e.count = s.getColumn(7).getInt();
  e.first_at = from_millis(s.getColumn(8).getInt64());
  e.last_at = from_millis(s.getColumn(9).getInt64());
  r.resource_version = s.getColumn(10).getInt64();
  return r;
}

}  // namespace

std::vector<Event> Connection::recent_events(const std::string& ids) {
  auto s = use(Query::recent_events);
  s->bindNoCopy(1, ids);
  s->bind(2, recent_events_per_category);
  std::vector<Event> out;
  while (s->executeStep()) out.push_back(read_event(*s).event);
  return out;
}

std::vector<event_run> Connection::query_events(ObjectID id, const detail::EventQuery& q) {
  auto s = use(Query::list_events);
  s->bind(1, id);
  if (q.category) s->bindNoCopy(2, *q.category);
  if (q.type) s->bind(3, to_string(*q.type));
  if (q.reason) s->bindNoCopy(4, *q.reason);
  if (q.since) s->bind(5, to_millis(*q.since));
  s->bind(6, q.limit ? *q.limit : -1);
  std::vector<event_run> out;
  while (s->executeStep()) out.push_back(read_event(*s));
  return out;
}

std::vector<Event> Connection::list_events(ObjectID id, const detail::EventQuery& q) {
  return guarded([&] {
    std::vector<Event> out;
    for (auto& r : query_events(id, q)) out.push_back(std::move(r.event));
    return out;
  });
}

std::vector<event_run> Connection::event_snapshot(ObjectID id, const detail::EventQuery& q,
                                                  std::int64_t& resource_version) {
  return snapshot(LoadOption::events /* any: forces one read transaction */, [&] {
    {
      auto s = use(Query::current_resource_version);
      s->executeStep();
      resource_version = s->getColumn(0).getInt64();
    }
    // The newest runs (the limit keeps those), delivered oldest first: the snapshot and
    // the live runs after it then read as one chronological stream.
    auto runs = query_events(id, q);
    std::reverse(runs.begin(), runs.end());
    return runs;
  });
}

std::vector<event_run> Connection::event_runs_between(std::int64_t after, std::int64_t through) {
  return guarded([&] {
    auto s = use(Query::event_runs_between);
    s->bind(1, after);
    s->bind(2, through);
    std::vector<event_run> out;
    while (s->executeStep()) out.push_back(read_event(*s));
    return out;
  });
}

std::optional<Event> Connection::current_run(ObjectID id, const std::string& category) {
  return guarded([&]() -> std::optional<Event> {
    auto s = use(Query::current_run);
    s->bind(1, id);
    s->bindNoCopy(2, category);
    if (!s->executeStep()) return std::nullopt;
    return read_event(*s).event;
  });
}

}  // namespace beehive::store
