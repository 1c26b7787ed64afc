// The SQLite writer's object statements: inserting and updating objects (spec, status,
// conditions, finalizers, deletion requests), their edges, and the garbage collector's
// queries and removals. Each is one prepared statement; resource versions and ids come
// from the caller (see sqlite_writer.cpp).
//
// Runs on the thread running the writer (owned by the store_writer actor), inside its
// open transaction; not thread-safe.

#include <algorithm>

#include <nlohmann/json.hpp>

#include "store/row_json.hpp"
#include "store/sqlite/sqlite_writer.hpp"

namespace beehive::store {

void SqliteWriter::insert_object(const ObjectRow& row, std::optional<ObjectID> owner) {
  guarded([&] {
    auto s = conn_.use(Query::insert_object);
    s->bind(9, row.meta.id);
    s->bindNoCopy(1, row.meta.group);
    s->bindNoCopy(2, row.meta.kind);
    if (row.meta.slug) s->bindNoCopy(3, *row.meta.slug);
    s->bindNoCopy(4, row.spec);
    s->bind(5, row.spec_version);
    s->bind(6, row.meta.resource_version);
    s->bind(7, nlohmann::json(row.meta.finalizers).dump());
    s->bind(8, to_millis(row.meta.created_at));
    if (!row.meta.labels.empty()) s->bind(10, nlohmann::json(row.meta.labels).dump());
    s->exec();
    if (owner) add_ref(row.meta.id, "owned_by", *owner);
    if (!row.meta.labels.empty()) insert_labels(row.meta.id, row.meta.labels);
  });
}

void SqliteWriter::insert_labels(ObjectID id, const Labels& labels) {
  auto s = conn_.use(Query::insert_label);
  for (const auto& [key, value] : labels) {
    s->bind(1, id);
    s->bindNoCopy(2, key);
    s->bindNoCopy(3, value);
    s->exec();
    s->reset();
  }
}

void SqliteWriter::set_labels(ObjectID id, const Labels& labels, std::int64_t rv, Time now) {
  guarded([&] {
    {
      auto s = conn_.use(Query::set_labels);
      s->bind(1, id);
      if (!labels.empty()) s->bind(2, nlohmann::json(labels).dump());
      s->bind(3, rv);
      s->bind(4, to_millis(now));
      s->exec();
    }
    {
      auto s = conn_.use(Query::delete_labels);
      s->bind(1, id);
      s->exec();
    }
    insert_labels(id, labels);
  });
}

void SqliteWriter::log_change(std::int64_t rv, const ObjectMeta& meta, unsigned parts, Time at,
                              const ObjectRow* final_body) {
  guarded([&] {
    auto s = conn_.use(Query::log_change);
    s->bind(1, rv);
    s->bind(2, meta.id);
    s->bindNoCopy(3, meta.group);
    s->bindNoCopy(4, meta.kind);
    s->bind(5, static_cast<std::int64_t>(parts));
    s->bind(6, to_millis(at));
    if (final_body) s->bind(7, row_to_json(*final_body));
    s->exec();
    last_logged_rv_ = rv;
  });
}

std::optional<std::int64_t> SqliteWriter::change_log_cut(std::int64_t keep_entries, Time older_than,
                                                         std::int64_t at_most,
                                                         std::optional<Time>* first_young_at) {
  return guarded([&]() -> std::optional<std::int64_t> {
    // Everything before the first young entry may go by age (cheap: it reads only the
    // old entries, none at all in a busy store)...
    std::int64_t cut = 0, oldest = 0;
    {
      auto s = conn_.use(Query::change_log_first_young);
      s->bind(1, to_millis(older_than));
      if (!s->executeStep() || s->getColumn(0).isNull()) return std::nullopt;  // empty log
      oldest = s->getColumn(0).getInt64();
      auto first_young = s->getColumn(2);
      if (first_young_at && !first_young.isNull())
        *first_young_at = from_millis(s->getColumn(3).getInt64());
      if (!first_young.isNull() && first_young.getInt64() == oldest)
        return std::nullopt;  // the oldest entry is young: nothing is old enough
      // No young entry: all of it, up to the newest.
      cut = first_young.isNull() ? s->getColumn(1).getInt64() : first_young.getInt64() - 1;
    }
    // ... unless it is among the newest `keep_entries`.
    if (keep_entries > 0) {
      auto s = conn_.use(Query::change_log_nth_newest);
      s->bind(1, keep_entries);
      if (!s->executeStep()) return std::nullopt;  // fewer entries than that
      cut = std::min(cut, s->getColumn(0).getInt64() - 1);
    }
    cut = std::min(cut, at_most);
    if (cut < oldest) return std::nullopt;
    return cut;
  });
}

int SqliteWriter::trim_change_log(std::int64_t cut) {
  return guarded([&] {
    int removed = 0;
    conn_.use(Query::pin_resource_version)->exec();
    {
      auto s = conn_.use(Query::trim_change_log);
      s->bind(1, cut);
      removed = s->exec();
    }
    auto s = conn_.use(Query::set_change_log_horizon);
    s->bind(1, cut);
    s->exec();
    return removed;
  });
}

std::optional<std::int64_t> SqliteWriter::change_log_nth_oldest(std::int64_t n) {
  return guarded([&]() -> std::optional<std::int64_t> {
    auto s = conn_.use(Query::change_log_nth_oldest);
    s->bind(1, n);
    if (!s->executeStep()) return std::nullopt;
    return s->getColumn(0).getInt64();
  });
}

std::optional<std::pair<std::int64_t, Time>> SqliteWriter::newest_change_log_entry() {
  return guarded([&]() -> std::optional<std::pair<std::int64_t, Time>> {
    auto s = conn_.use(Query::change_log_newest);
    if (!s->executeStep()) return std::nullopt;
    return std::pair{s->getColumn(0).getInt64(), from_millis(s->getColumn(1).getInt64())};
  });
}

void SqliteWriter::lower_change_log_times(std::int64_t up_to, Time at) {
  guarded([&] {
    auto s = conn_.use(Query::lower_change_log_times);
    s->bind(1, up_to);
    s->bind(2, to_millis(at));
    s->exec();
  });
}

bool SqliteWriter::add_ref(ObjectID from, const char* relation, ObjectID to) {
  return guarded([&] {
    auto s = conn_.use(Query::add_ref);
    s->bind(1, from);
    s->bindNoCopy(2, relation);
    s->bind(3, to);
    return s->exec() > 0;
  });
}

bool SqliteWriter::remove_ref(ObjectID from, const char* relation, ObjectID to) {
  return guarded([&] {
    auto s = conn_.use(Query::remove_ref);
    s->bind(1, from);
    s->bindNoCopy(2, relation);
    s->bind(3, to);
    return s->exec() > 0;
  });
}

std::optional<bool> SqliteWriter::being_deleted(ObjectID id) {
  return guarded([&]() -> std::optional<bool> {
    auto s = conn_.use(Query::object_being_deleted);
    s->bind(1, id);
    if (!s->executeStep()) return std::nullopt;
    return s->getColumn(0).getInt() != 0;
  });
}

std::vector<ObjectID> SqliteWriter::cascade_candidates(std::int64_t limit) {
  return ids(Query::cascade_candidates, limit);
}

std::vector<ObjectID> SqliteWriter::collectible(std::int64_t limit) {
  return ids(Query::collectible, limit);
}

void SqliteWriter::drop_pending_dependencies(ObjectID target) {
  guarded([&] {
    auto s = conn_.use(Query::drop_pending_dependencies);
    s->bind(1, target);
    s->exec();
  });
}

void SqliteWriter::delete_object(ObjectID id) {
  guarded([&] {
    auto s = conn_.use(Query::delete_object);
    s->bind(1, id);
    s->exec();
  });
}

void SqliteWriter::update_spec(ObjectID id, const std::string& spec, int spec_version,
                               std::int64_t generation, std::int64_t rv, Time now) {
  guarded([&] {
    auto s = conn_.use(Query::update_spec);
    s->bind(1, id);
    s->bindNoCopy(2, spec);
    s->bind(3, spec_version);
    s->bind(4, generation);
    s->bind(5, rv);
    s->bind(6, to_millis(now));
    s->exec();
  });
}

void SqliteWriter::request_deletion(ObjectID id, Time at, std::int64_t rv) {
  guarded([&] {
    auto s = conn_.use(Query::request_deletion);
    s->bind(1, id);
    s->bind(2, to_millis(at));
    s->bind(3, rv);
    s->exec();
  });
}

void SqliteWriter::update_status(ObjectID id, const std::optional<std::string>& status,
                                 int status_version,
                                 std::optional<std::int64_t> observed_generation,
                                 std::optional<Time> observed_at, std::int64_t rv, Time now) {
  guarded([&] {
    auto s = conn_.use(Query::update_status);
    s->bind(1, id);
    if (status) s->bindNoCopy(2, *status);
    s->bind(3, status_version);
    if (observed_generation) s->bind(4, *observed_generation);
    if (observed_at) s->bind(5, to_millis(*observed_at));
    s->bind(6, rv);
    s->bind(7, to_millis(now));
    s->exec();
  });
}

void SqliteWriter::upsert_condition(ObjectID id, const Condition& c, Time now) {
  guarded([&] {
    auto s = conn_.use(Query::upsert_condition);
    s->bind(1, id);
    s->bindNoCopy(2, c.type);
    s->bind(3, to_string(c.status));
    s->bindNoCopy(4, c.reason);
    s->bindNoCopy(5, c.message);
    s->bind(6, c.liveness ? 1 : 0);
    s->bind(7, conn_.session());
    s->bind(8, to_millis(now));
    s->bind(9, static_cast<std::int64_t>(c.observed_generation));
    s->exec();
  });
}

bool SqliteWriter::delete_condition(ObjectID id, const std::string& type) {
  return guarded([&] {
    auto s = conn_.use(Query::delete_condition);
    s->bind(1, id);
    s->bindNoCopy(2, type);
    return s->exec() > 0;
  });
}

void SqliteWriter::set_finalizers(ObjectID id, const std::vector<std::string>& finalizers,
                                  std::int64_t rv, Time now) {
  guarded([&] {
    auto s = conn_.use(Query::set_finalizers);
    s->bind(1, id);
    s->bind(2, nlohmann::json(finalizers).dump());
    s->bind(3, rv);
    s->bind(4, to_millis(now));
    s->exec();
  });
}

void SqliteWriter::conditions_changed(ObjectID id, std::int64_t rv, Time now) {
  guarded([&] {
    auto s = conn_.use(Query::conditions_changed);
    s->bind(1, id);
    s->bind(2, rv);
    s->bind(3, to_millis(now));
    s->exec();
  });
}

}  // namespace beehive::store
