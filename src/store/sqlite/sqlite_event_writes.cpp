// The SQLite writer's event-log statements: a new event run, extending the current
// run, and trimming the runs a kind's retention no longer keeps.
//
// Runs on the thread running the writer (owned by the store_writer actor), inside its
// open transaction; not thread-safe.

#include "store/sqlite/sqlite_writer.hpp"

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

std::optional<ObjectID> SqliteWriter::event_page_end(std::int64_t since, ObjectID after, int runs) {
  return guarded([&]() -> std::optional<ObjectID> {
    auto s = conn_.use(since < 0 ? Query::event_page_end : Query::event_page_end_since);
    s->bind(1, after);
    s->bind(2, runs);
    if (since >= 0) s->bind(3, since);
    if (!s->executeStep()) return std::nullopt;
    return s->getColumn(0).getInt64();
  });
}

std::vector<GroupKind> SqliteWriter::kinds_with_runs_in(std::int64_t since, ObjectID after,
                                                        ObjectID upto) {
  return guarded([&] {
    auto s = conn_.use(since < 0 ? Query::kinds_with_runs_in : Query::kinds_with_runs_in_since);
    s->bind(1, after);
    s->bind(2, upto);
    if (since >= 0) s->bind(3, since);
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

int SqliteWriter::trim_event_runs(const GroupKind& gk, int per_object, std::int64_t since,
                                  ObjectID after, ObjectID upto) {
  return guarded([&] {
    auto s = conn_.use(since < 0 ? Query::trim_event_runs : Query::trim_event_runs_since);
    s->bindNoCopy(1, gk.group);
    s->bindNoCopy(2, gk.kind);
    s->bind(3, per_object);
    int at = 4;
    if (since >= 0) s->bind(at++, since);
    s->bind(at++, after);
    s->bind(at, upto);
    return s->exec();
  });
}

int SqliteWriter::trim_old_events(const GroupKind& gk, Time before, int limit) {
  return guarded([&] {
    auto s = conn_.use(Query::trim_old_events);
    s->bindNoCopy(1, gk.group);
    s->bindNoCopy(2, gk.kind);
    s->bind(3, to_millis(before));
    s->bind(4, limit);
    return s->exec();
  });
}

}  // namespace beehive::store
