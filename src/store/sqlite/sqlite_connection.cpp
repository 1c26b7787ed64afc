#include "store/sqlite/sqlite_connection.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include <beehive/detail/codec.hpp>
#include <beehive/errors.hpp>
#include <beehive/options.hpp>

#include "options_internal.hpp"

namespace beehive::store {

namespace {

// load_events() attaches this many of the newest runs per (object, category).
constexpr int recent_events_per_category = 10;

// Column layout shared by every object read. Conditions come along as one JSON array
// from a correlated subquery, so one statement (and one implicit read transaction)
// returns a consistent row; the subquery runs only for objects that have conditions
// (it is a quarter of a point read).
constexpr const char* object_columns = R"sql(
  o.id, o."group", o.kind, o.slug, o.spec, o.spec_version, o.status, o.status_version,
  o.generation, o.observed_generation, o.observed_at, o.resource_version,
  o.deletion_requested_at, o.finalizers, o.created_at, o.updated_at,
  CASE WHEN o.conditions_count = 0 THEN '[]' ELSE
  (SELECT json_group_array(json_array(c.type, c.status, c.reason, c.message, c.liveness,
                                      c.session))
     FROM (SELECT * FROM conditions WHERE object_id = o.id ORDER BY type) AS c) END
)sql";

std::string select_objects(const char* where) {
  return std::string("SELECT ") + object_columns + " FROM objects AS o WHERE " + where;
}

std::string sql_for(Query q) {
  switch (q) {
    case Query::get:
      return select_objects("o.id = ?1");
    case Query::get_by_slug:
      return select_objects(R"(o."group" = ?1 AND o.kind = ?2 AND o.slug = ?3)");
    case Query::list:
      return select_objects(R"(o."group" = ?1 AND o.kind = ?2 ORDER BY o.id)");
    // No UPDATE ... RETURNING: SQLite runs RETURNING as a trigger, which gives the
    // statement its own journal, allocated and freed on every write (measured: a quarter
    // of a blocking update's time, most of it in malloc trimming the heap).
    case Query::set_resource_version:
      return "UPDATE beehive_meta SET value = ?1 WHERE key = 'resource_version'";
    case Query::resource_version:
      return "SELECT value FROM beehive_meta WHERE key = 'resource_version'";
    case Query::last_object_id:  // AUTOINCREMENT's own counter, and the rows (none yet)
      return R"sql(SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'objects'), 0),
                        coalesce((SELECT max(id) FROM objects), 0))sql";
    case Query::reserve_object_ids:
      return "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'objects'";
    case Query::insert_object:
      return R"sql(INSERT INTO objects (id, "group", kind, slug, spec, spec_version, generation,
             resource_version, finalizers, created_at, updated_at)
             VALUES (?9, ?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?8))sql";
    case Query::update_spec:
      return "UPDATE objects SET spec = ?2, spec_version = ?3, generation = ?4, "
             "resource_version = ?5, updated_at = ?6 WHERE id = ?1";
    case Query::request_deletion:
      return "UPDATE objects SET deletion_requested_at = ?2, resource_version = ?3, "
             "updated_at = ?2 WHERE id = ?1";
    case Query::owner_of:
    case Query::dependencies_of:
      return std::string(R"sql(SELECT r.from_id, o.id, o."group", o.kind FROM refs AS r
             JOIN objects AS o ON o.id = r.to_id WHERE r.relation = ')sql") +
             (q == Query::owner_of ? "owned_by" : "depends_on") +
             "' AND r.from_id IN (SELECT value FROM json_each(?1)) ORDER BY r.from_id, o.id";
    case Query::dependents_of:
    case Query::owned_by:
      return std::string(R"sql(SELECT r.to_id, o.id, o."group", o.kind FROM refs AS r
             JOIN objects AS o ON o.id = r.from_id WHERE r.relation = ')sql") +
             (q == Query::owned_by ? "owned_by" : "depends_on") +
             "' AND r.to_id IN (SELECT value FROM json_each(?1)) ORDER BY r.to_id, o.id";
    case Query::recent_events:
      // The newest runs per (object, category), as load_events() promises: a LIMIT per
      // pair walks events_by_object backwards and stops, where a window function would
      // read and rank every run of the objects.
      return R"sql(SELECT e.id, e.object_id, e.category, e.type, e.reason, e.message, e.detail,
             e.count, e.first_at, e.last_at, e.resource_version
             FROM (SELECT DISTINCT object_id, category FROM events
                   WHERE object_id IN (SELECT value FROM json_each(?1))) AS k
             JOIN events AS e ON e.id IN (
               SELECT id FROM events WHERE object_id = k.object_id AND category = k.category
               ORDER BY last_at DESC, id DESC LIMIT ?2)
             ORDER BY e.object_id, e.last_at DESC, e.id DESC)sql";
    case Query::list_ids:
      return R"(SELECT id, resource_version FROM objects WHERE "group" = ?1 AND kind = ?2)";
    case Query::changed_since:  // through objects_by_version: only the rows that changed
      return select_objects("o.resource_version > ?1 ORDER BY o.resource_version");
    case Query::data_version:
      return "PRAGMA data_version";
    case Query::list_unsettled_ids:
      // The WHERE clause repeats the partial index's, so that the index is used.
      return R"(SELECT id, resource_version FROM objects INDEXED BY objects_unsettled
             WHERE "group" = ?1 AND kind = ?2 AND
             (observed_generation IS NOT generation OR deletion_requested_at IS NOT NULL))";
    case Query::update_status:
      return "UPDATE objects SET status = ?2, status_version = ?3, observed_generation = ?4, "
             "observed_at = ?5, resource_version = ?6, updated_at = ?7 WHERE id = ?1";
    case Query::upsert_condition:
      return R"sql(INSERT INTO conditions (object_id, type, status, reason, message, liveness,
             session, last_transition_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (object_id, type) DO UPDATE SET status = excluded.status,
               reason = excluded.reason, message = excluded.message,
               liveness = excluded.liveness, session = excluded.session,
               last_transition_at = CASE WHEN conditions.status = excluded.status
                 THEN conditions.last_transition_at ELSE excluded.last_transition_at END)sql";
    case Query::delete_condition:
      return "DELETE FROM conditions WHERE object_id = ?1 AND type = ?2";
    case Query::set_finalizers:
      return "UPDATE objects SET finalizers = ?2, resource_version = ?3, updated_at = ?4 "
             "WHERE id = ?1";
    case Query::conditions_changed:
      return "UPDATE objects SET resource_version = ?2, updated_at = ?3, conditions_count = "
             "(SELECT count(*) FROM conditions WHERE object_id = ?1) WHERE id = ?1";
    case Query::current_resource_version:
      return "SELECT value FROM beehive_meta WHERE key = 'resource_version'";
    case Query::has_incoming_refs:
      // A live claim: an owned child, or a dependent that is not being deleted itself.
      return R"sql(SELECT EXISTS (SELECT 1 FROM refs AS r JOIN objects AS o ON o.id = r.from_id
             WHERE r.to_id = ?1 AND (r.relation = 'owned_by' OR o.deletion_requested_at IS NULL)))sql";
    case Query::list_owned_objects:
      return select_objects(R"(o.id IN (SELECT from_id FROM refs WHERE to_id = ?3 AND
             relation = 'owned_by') AND o."group" = ?1 AND o.kind = ?2 ORDER BY o.id)");
    case Query::add_ref:
      return "INSERT OR IGNORE INTO refs (from_id, relation, to_id) VALUES (?1, ?2, ?3)";
    case Query::remove_ref:
      return "DELETE FROM refs WHERE from_id = ?1 AND relation = ?2 AND to_id = ?3";
    case Query::object_exists:
      return "SELECT EXISTS (SELECT 1 FROM objects WHERE id = ?1)";
    case Query::cascade_candidates:
      // Starts from the (few) deletion-pending owners through the partial index
      // (CROSS JOIN fixes SQLite's join order).
      return R"sql(SELECT child.id FROM objects AS owner
             CROSS JOIN refs AS r ON r.to_id = owner.id AND r.relation = 'owned_by'
             JOIN objects AS child ON child.id = r.from_id
             WHERE owner.deletion_requested_at IS NOT NULL
               AND child.deletion_requested_at IS NULL)sql";
    case Query::collectible:
      // Deletion requested, every finalizer removed, and no live claim on it: no owned
      // child, no dependent that is not itself being deleted (as has_incoming_refs).
      // A deletion-pending dependent's edge (a self-edge, a cycle among objects being
      // deleted) never holds its target: it would hold both ends forever.
      // No ORDER BY: it would trade the partial index for a scan of every object.
      return R"sql(SELECT o.id FROM objects AS o WHERE o.deletion_requested_at IS NOT NULL
             AND o.finalizers = '[]' AND NOT EXISTS (SELECT 1 FROM refs AS r
               JOIN objects AS d ON d.id = r.from_id WHERE r.to_id = o.id
               AND (r.relation = 'owned_by' OR d.deletion_requested_at IS NULL)))sql";
    case Query::drop_pending_dependencies:
      return R"sql(DELETE FROM refs WHERE to_id = ?1 AND relation = 'depends_on' AND EXISTS
             (SELECT 1 FROM objects WHERE id = refs.from_id
              AND deletion_requested_at IS NOT NULL))sql";
    case Query::delete_object:
      return "DELETE FROM objects WHERE id = ?1";
    case Query::list_events:
      return R"sql(SELECT id, object_id, category, type, reason, message, detail, count,
             first_at, last_at, resource_version FROM events WHERE object_id = ?1
             AND (?2 IS NULL OR category = ?2) AND (?3 IS NULL OR type = ?3)
             AND (?4 IS NULL OR reason = ?4) AND (?5 IS NULL OR last_at >= ?5)
             ORDER BY last_at DESC, id DESC LIMIT ?6)sql";
    case Query::current_run:
      // The run started last (ids only grow), through events_by_run: never by last_at,
      // which a clock stepped back moves behind an older run's.
      return R"sql(SELECT id, object_id, category, type, reason, message, detail, count,
             first_at, last_at, resource_version FROM events INDEXED BY events_by_run
             WHERE object_id = ?1 AND category = ?2 ORDER BY id DESC LIMIT 1)sql";
    case Query::insert_event:
      return R"sql(INSERT INTO events (object_id, category, type, reason, message, detail,
             count, first_at, last_at, resource_version)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7, ?7, ?8))sql";
    case Query::extend_event:
      return "UPDATE events SET count = count + 1, message = ?2, detail = ?3, last_at = ?4, "
             "resource_version = ?5 WHERE id = ?1";
    case Query::kinds_with_events:
      return R"(SELECT DISTINCT o."group", o.kind FROM objects AS o
             WHERE EXISTS (SELECT 1 FROM events WHERE object_id = o.id))";
    case Query::trim_events:
      return R"sql(DELETE FROM events WHERE id IN (
               SELECT id FROM (
                 SELECT e.id, e.last_at, row_number() OVER (PARTITION BY e.object_id, e.category
                                                            ORDER BY e.last_at DESC, e.id DESC) AS n
                 FROM events AS e JOIN objects AS o ON o.id = e.object_id
                 WHERE o."group" = ?1 AND o.kind = ?2)
               WHERE (?3 > 0 AND n > ?3) OR (?4 IS NOT NULL AND last_at < ?4)))sql";
    case Query::begin_read:
      return "BEGIN";
    case Query::end_read:
      return "COMMIT";
    case Query::count_:
      break;
  }
  throw Error(errc::store, "unknown query");
}

}  // namespace

void rethrow_sqlite(const SQLite::Exception& e) {
  if (e.getExtendedErrorCode() == SQLITE_CONSTRAINT_UNIQUE)
    throw Error(errc::already_exists, e.what());
  throw Error(errc::store, e.what());
}

Connection::Connection(const std::filesystem::path& file, bool read_only,
                       const sqlite::Options& opts, std::int64_t session)
    // NOMUTEX: a connection is only ever used by one thread at a time (a leased reader,
    // the writer under its pen), so SQLite's per-call connection mutex is pure cost.
    // No VFS argument: every file goes through SQLite's default VFS, unmodified, so that
    // durability is SQLite's own argument (a shim that batched the writer's WAL writes
    // once lost acknowledged transactions).
    : db_(file.string(),
          SQLITE_OPEN_NOMUTEX |
              (read_only ? SQLite::OPEN_READONLY : (SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE)),
          static_cast<int>(opts.busy_timeout.count())),
      session_(session) {
  if (!read_only) {
    db_.exec("PRAGMA journal_mode = WAL");
    db_.exec(opts.synchronous == sqlite::Synchronous::full ? "PRAGMA synchronous = FULL"
                                                           : "PRAGMA synchronous = NORMAL");
    db_.exec("PRAGMA foreign_keys = ON");
  }
}

namespace {
std::atomic<std::uint64_t> statement_count{0};
}  // namespace

std::uint64_t statements_run() { return statement_count.load(std::memory_order_relaxed); }

Connection::Use Connection::use(Query q) {
  statement_count.fetch_add(1, std::memory_order_relaxed);
  auto& slot = stmts_[static_cast<int>(q)];
  if (!slot) slot = std::make_unique<SQLite::Statement>(db_, sql_for(q));
  return Use(*slot);
}

Connection::RowUse Connection::use_rows(Query q) {
  statement_count.fetch_add(1, std::memory_order_relaxed);
  int i = q == Query::list_owned_objects ? 3 : q == Query::changed_since ? 4 : static_cast<int>(q);
  auto& slot = row_stmts_.at(static_cast<std::size_t>(i));
  if (!slot) slot = std::make_unique<RowStatement>(db_.getHandle(), sql_for(q));
  return RowUse(*slot);
}

void Connection::exec(const std::string& sql) {
  statement_count.fetch_add(1, std::memory_order_relaxed);
  auto& slot = plain_[sql];
  if (!slot) slot = std::make_unique<SQLite::Statement>(db_, sql);
  Use u(*slot);
  u->exec();
}

bool Connection::in_transaction() const { return !sqlite3_get_autocommit(db_.getHandle()); }

template <class Fn>
auto Connection::snapshot(unsigned loads, Fn&& fn) -> decltype(fn()) {
  return guarded([&] {
    if (loads == 0 || in_transaction()) return fn();
    use(Query::begin_read)->exec();
    try {
      auto result = fn();
      use(Query::end_read)->exec();
      return result;
    } catch (...) {
      db_.tryExec("ROLLBACK");
      throw;
    }
  });
}

std::optional<ObjectRow> Connection::get(ObjectID id, unsigned loads) {
  return snapshot(loads, [&]() -> std::optional<ObjectRow> {
    std::optional<ObjectRow> row;
    {
      auto s = use_rows(Query::get);
      s->bind(1, id);
      if (!s->step()) return std::nullopt;
      row = s->row(session_);
    }
    if (loads) load({&*row}, loads);
    return row;
  });
}

std::optional<ObjectRow> Connection::get_by_slug(const GroupKind& gk, std::string_view slug,
                                                 unsigned loads) {
  return snapshot(loads, [&]() -> std::optional<ObjectRow> {
    std::optional<ObjectRow> row;
    {
      auto s = use_rows(Query::get_by_slug);
      s->bind(1, gk.group);
      s->bind(2, gk.kind);
      s->bind(3, slug);
      if (!s->step()) return std::nullopt;
      row = s->row(session_);
    }
    if (loads) load({&*row}, loads);
    return row;
  });
}

std::vector<ObjectRow> Connection::list(const GroupKind& gk, unsigned loads) {
  return snapshot(loads, [&] {
    std::vector<ObjectRow> rows;
    {
      auto s = use_rows(Query::list);
      s->bind(1, gk.group);
      s->bind(2, gk.kind);
      while (s->step()) rows.push_back(s->row(session_));
    }
    load_all(rows, loads);
    return rows;
  });
}

void Connection::list_each(const GroupKind& gk, const std::function<void(ObjectRow&&)>& each) {
  guarded([&] {
    auto s = use_rows(Query::list);
    s->bind(1, gk.group);
    s->bind(2, gk.kind);
    while (s->step()) each(s->row(session_));
  });
}

std::vector<std::pair<ObjectID, std::int64_t>> Connection::list_ids(const GroupKind& gk,
                                                                    bool unsettled_only) {
  return guarded([&] {
    auto s = use(unsettled_only ? Query::list_unsettled_ids : Query::list_ids);
    s->bindNoCopy(1, gk.group);
    s->bindNoCopy(2, gk.kind);
    std::vector<std::pair<ObjectID, std::int64_t>> ids;
    while (s->executeStep())
      ids.emplace_back(s->getColumn(0).getInt64(), s->getColumn(1).getInt64());
    return ids;
  });
}

std::vector<ObjectRow> Connection::snapshot(const GroupKind& gk, std::optional<ObjectID> id,
                                            std::int64_t& resource_version) {
  return snapshot(LoadOption::owner /* any: forces one read transaction */, [&] {
    {
      auto s = use(Query::current_resource_version);
      s->executeStep();
      resource_version = s->getColumn(0).getInt64();
    }
    std::vector<ObjectRow> rows;
    if (!id) return list(gk);
    auto row = get(*id);
    if (row && row->meta.group == gk.group && row->meta.kind == gk.kind)
      rows.push_back(std::move(*row));
    return rows;
  });
}

std::vector<ObjectRow> Connection::changed_since(std::int64_t rv, std::int64_t& resource_version) {
  return snapshot(LoadOption::owner /* any: forces one read transaction */, [&] {
    {
      auto s = use(Query::current_resource_version);
      s->executeStep();
      resource_version = s->getColumn(0).getInt64();
    }
    std::vector<ObjectRow> rows;
    auto s = use_rows(Query::changed_since);
    s->bind(1, rv);
    while (s->step()) rows.push_back(s->row(session_));
    return rows;
  });
}

std::int64_t Connection::data_version() {
  return guarded([&] {
    // Not counted in statements_run(): it runs on the writer's own cadence, whatever
    // the callers whose statements that count measures are doing.
    auto& slot = stmts_[static_cast<int>(Query::data_version)];
    if (!slot) slot = std::make_unique<SQLite::Statement>(db_, sql_for(Query::data_version));
    Use s(*slot);
    s->executeStep();
    return s->getColumn(0).getInt64();
  });
}

std::vector<Ref> Connection::related(ObjectID id, unsigned relation) {
  Query q = relation == LoadOption::owner          ? Query::owner_of
            : relation == LoadOption::dependencies ? Query::dependencies_of
            : relation == LoadOption::dependents   ? Query::dependents_of
                                                   : Query::owned_by;
  return guarded([&] {
    std::vector<Ref> out;
    auto ids = nlohmann::json::array({id}).dump();  // a one-id list, as load() passes
    for (auto& [from, ref] : edges(q, ids)) out.push_back(ref);
    return out;
  });
}

bool Connection::has_incoming_refs(ObjectID id) {
  return guarded([&] {
    auto s = use(Query::has_incoming_refs);
    s->bind(1, id);
    s->executeStep();
    return s->getColumn(0).getInt() != 0;
  });
}

std::vector<ObjectRow> Connection::list_owned_objects(const GroupKind& gk, ObjectID owner,
                                                      unsigned loads) {
  return snapshot(loads, [&] {
    std::vector<ObjectRow> rows;
    {
      auto s = use_rows(Query::list_owned_objects);
      s->bind(1, gk.group);
      s->bind(2, gk.kind);
      s->bind(3, owner);
      while (s->step()) rows.push_back(s->row(session_));
    }
    load_all(rows, loads);
    return rows;
  });
}

std::vector<std::pair<ObjectID, Ref>> Connection::edges(Query q, const std::string& ids) {
  auto s = use(q);
  s->bindNoCopy(1, ids);
  std::vector<std::pair<ObjectID, Ref>> out;
  while (s->executeStep())
    out.emplace_back(
        s->getColumn(0).getInt64(),
        Ref{s->getColumn(1).getInt64(), s->getColumn(2).getString(), s->getColumn(3).getString()});
  return out;
}

namespace {

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

std::optional<Event> Connection::current_run(ObjectID id, const std::string& category) {
  return guarded([&]() -> std::optional<Event> {
    auto s = use(Query::current_run);
    s->bind(1, id);
    s->bindNoCopy(2, category);
    if (!s->executeStep()) return std::nullopt;
    return read_event(*s).event;
  });
}

void Connection::load_all(std::vector<ObjectRow>& rows, unsigned loads) {
  if (!loads || rows.empty()) return;
  std::vector<ObjectRow*> ptrs;
  ptrs.reserve(rows.size());
  for (auto& r : rows) ptrs.push_back(&r);
  load(std::move(ptrs), loads);
}

void Connection::load(std::vector<ObjectRow*> rows, unsigned loads) {
  nlohmann::json id_list = nlohmann::json::array();
  std::unordered_map<ObjectID, ObjectRow*> by_id;
  for (auto* r : rows) {
    id_list.push_back(r->meta.id);
    by_id[r->meta.id] = r;
  }
  auto ids = id_list.dump();
  auto attach = [&](Query q, auto member) {
    for (auto* r : rows) (r->meta.relations.*member).emplace();
    for (auto& [id, ref] : edges(q, ids)) (by_id[id]->meta.relations.*member)->push_back(ref);
  };
  if (loads & LoadOption::owner) {
    for (auto* r : rows) r->meta.relations.owner.emplace();
    for (auto& [id, ref] : edges(Query::owner_of, ids)) by_id[id]->meta.relations.owner = ref;
  }
  if (loads & LoadOption::dependencies)
    attach(Query::dependencies_of, &LoadedRelations::dependencies);
  if (loads & LoadOption::dependents) attach(Query::dependents_of, &LoadedRelations::dependents);
  if (loads & LoadOption::owned) attach(Query::owned_by, &LoadedRelations::owned);
  if (loads & LoadOption::events) {
    for (auto* r : rows) r->meta.relations.events.emplace();
    for (auto& e : recent_events(ids)) by_id[e.object_id]->meta.relations.events->push_back(e);
  }
}

}  // namespace beehive::store
