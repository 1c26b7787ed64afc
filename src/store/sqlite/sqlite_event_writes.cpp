// The SQLite writer's event-log statements: a new event run, extending the current
// run, and trimming the runs a kind's retention no longer keeps.
//
// Runs on the thread running the writer (owned by the store_writer actor), inside its
// open transaction; not thread-safe.

#include "store/sqlite/sqlite_writer.hpp"

#include <limits>

namespace beehive::store {

EventID SqliteWriter::insert_event(ObjectID id, const EventSpec& e,
                                   const std::optional<std::string>& detail, Time now,
                                   std::int64_t rv) {
  return guarded([&] {
    auto s = conn_.use(Query::insert_event);
    s->bind(1, id);
    s->bindNoCopy(2, e.category);
    s->bind(3, to_string(e.type));
    s->bindNoCopy(4, e.reason);
    s->bindNoCopy(5, e.message);
    if (detail) s->bindNoCopy(6, *detail);
    s->bind(7, to_millis(now));
    s->bind(8, rv);
    s->exec();
    return conn_.db().getLastInsertRowid();
  });
}

void SqliteWriter::extend_event(EventID id, const std::string& message,
                                const std::optional<std::string>& detail, Time now,
                                std::int64_t rv) {
  guarded([&] {
    auto s = conn_.use(Query::extend_event);
    s->bind(1, id);
    s->bindNoCopy(2, message);
    if (detail) s->bindNoCopy(3, *detail);
    s->bind(4, to_millis(now));
    s->bind(5, rv);
    s->exec();
  });
}

std::int64_t SqliteWriter::events_high_water() {
  return guarded([&] {
    auto s = conn_.use(Query::events_high_water);
    s->executeStep();
    return s->getColumn(0).getInt64();
  });
}

namespace {

std::vector<GroupKind> kinds_of(SQLite::Statement& s) {
  std::vector<GroupKind> out;
  while (s.executeStep()) out.push_back({s.getColumn(0).getString(), s.getColumn(1).getString()});
  return out;
}

}  // namespace

std::optional<std::int64_t> SqliteWriter::event_page_end(EventPaging by, std::int64_t after,
                                                         int runs) {
  return guarded([&]() -> std::optional<std::int64_t> {
    auto s = conn_.use(by == EventPaging::by_object ? Query::event_page_end
                                                    : Query::event_page_end_by_version);
    s->bind(1, after);
    s->bind(2, runs);
    if (!s->executeStep()) return std::nullopt;
    return s->getColumn(0).getInt64();
  });
}

std::vector<GroupKind> SqliteWriter::kinds_with_runs_in(EventPaging by, std::int64_t after,
                                                        std::int64_t upto) {
  return guarded([&] {
    auto s = conn_.use(by == EventPaging::by_object ? Query::kinds_with_runs_in
                                                    : Query::kinds_with_runs_in_versions);
    s->bind(1, after);
    s->bind(2, upto);
    return kinds_of(*s);
  });
}

std::vector<GroupKind> SqliteWriter::kinds_with_runs_before(Time before) {
  return guarded([&] {
    auto s = conn_.use(Query::kinds_with_runs_before);
    s->bind(1, to_millis(before));
    return kinds_of(*s);
  });
}

int SqliteWriter::trim_event_runs(const GroupKind& gk, int per_object, EventPaging by,
                                  std::int64_t after, std::int64_t upto) {
  return guarded([&] {
    auto s = conn_.use(by == EventPaging::by_object ? Query::trim_event_runs
                                                    : Query::trim_event_runs_in_versions);
    s->bindNoCopy(1, gk.group);
    s->bindNoCopy(2, gk.kind);
    s->bind(3, per_object);
    s->bind(4, after);
    s->bind(5, upto);
    return s->exec();
  });
}

std::optional<Time> SqliteWriter::old_events_page_end(const GroupKind& gk, Time after, Time before,
                                                      int runs) {
  return guarded([&]() -> std::optional<Time> {
    auto s = conn_.use(Query::old_events_page_end);
    s->bindNoCopy(1, gk.group);
    s->bindNoCopy(2, gk.kind);
    s->bind(3, to_millis(after));
    s->bind(4, to_millis(before));
    s->bind(5, runs);
    if (!s->executeStep()) return std::nullopt;
    return from_millis(s->getColumn(0).getInt64());
  });
}

int SqliteWriter::trim_old_events(const GroupKind& gk, Time after, std::optional<Time> through,
                                  Time before) {
  return guarded([&] {
    auto s = conn_.use(Query::trim_old_events);
    s->bindNoCopy(1, gk.group);
    s->bindNoCopy(2, gk.kind);
    s->bind(3, to_millis(after));
    s->bind(4, through ? to_millis(*through) : std::numeric_limits<std::int64_t>::max());
    s->bind(5, to_millis(before));
    return s->exec();
  });
}

}  // namespace beehive::store
