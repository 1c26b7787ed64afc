// The SQL text of every statement a Connection prepares, by Query. Kept apart from
// the code that runs the statements so that the schema's users can be read in one place
// (sqlite_schema.cpp is the schema itself).
//
// Pure functions of their argument: safe on any thread. A connection prepares each
// statement once, the first time it is used.

#include "store/sqlite/sqlite_queries.hpp"

#include <beehive/errors.hpp>

namespace beehive::store {

namespace {

// Column layout shared by every object read. Conditions come along as one JSON array
// from a correlated subquery, so one statement (and one implicit read transaction)
// returns a consistent row; the subquery runs only for objects that have conditions
// (it is a quarter of a point read).
constexpr const char* object_columns = R"sql(
  o.id, o."group", o.kind, o.slug, o.spec, o.spec_version, o.status, o.status_version,
  o.generation, o.observed_generation, o.observed_at, o.resource_version,
  o.deletion_requested_at, o.finalizers, o.created_at, o.updated_at, o.labels,
  CASE WHEN o.conditions_count = 0 THEN '[]' ELSE
  (SELECT json_group_array(json_array(c.type, c.status, c.reason, c.message, c.liveness,
                                      c.session, c.observed_generation, c.last_transition_at))
     FROM (SELECT * FROM conditions WHERE object_id = o.id ORDER BY type) AS c) END
)sql";

std::string select_objects(const char* where, const char* from = "objects AS o") {
  return std::string("SELECT ") + object_columns + " FROM " + from + " WHERE " + where;
}

}  // namespace

std::string select_objects_sql(const std::string& where, const char* from) {
  return select_objects(where.c_str(), from);
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
    // The store's version is the larger of the counter and the newest change-log entry:
    // a transaction whose last version went into the log leaves the counter alone,
    // which saves every such commit a page (see SqliteWriter::commit).
    case Query::resource_version:
    case Query::current_resource_version:
      return R"sql(SELECT max(value, coalesce((SELECT max(resource_version) FROM change_log), 0))
             FROM beehive_meta WHERE key = 'resource_version')sql";
    case Query::last_object_id:  // AUTOINCREMENT's own counter, and the rows (none yet)
      return R"sql(SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'objects'), 0),
                        coalesce((SELECT max(id) FROM objects), 0))sql";
    case Query::reserve_object_ids:
      return "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'objects'";
    case Query::raise_resource_version:
      return "UPDATE beehive_meta SET value = max(value, ?1) WHERE key = 'resource_version'";
    case Query::raise_object_id_counter:
      return R"sql(INSERT INTO sqlite_sequence (name, seq)
                   SELECT 'objects', ?1 WHERE NOT EXISTS
                     (SELECT 1 FROM sqlite_sequence WHERE name = 'objects'))sql";
    case Query::insert_object:
      return R"sql(INSERT INTO objects (id, "group", kind, slug, spec, spec_version, generation,
             resource_version, finalizers, created_at, updated_at, labels)
             VALUES (?9, ?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?8, ?10))sql";
    case Query::update_spec:
      return "UPDATE objects SET spec = ?2, spec_version = ?3, generation = ?4, "
             "resource_version = ?5, updated_at = ?6 WHERE id = ?1";
    case Query::request_deletion:
      return "UPDATE objects SET deletion_requested_at = ?2, resource_version = ?3, "
             "updated_at = ?2 WHERE id = ?1";
    case Query::owner_of_one:
      // One object's owner, as every write looks it up for its commit record: bound
      // directly, without the id list of the batched reads (json_each costs more than
      // the lookup).
      return R"sql(SELECT o.id, o."group", o.kind FROM refs AS r JOIN objects AS o
             ON o.id = r.to_id WHERE r.from_id = ?1 AND r.relation = 'owned_by')sql";
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
      // pair walks events_by_run backwards and stops, where a window function would
      // read and rank every run of the objects. Newest by id within a pair (only its
      // last run is extended) and by version across pairs: last_at follows the clock,
      // which may have stepped back.
      return R"sql(SELECT e.id, e.object_id, e.category, e.type, e.reason, e.message, e.detail,
             e.count, e.first_at, e.last_at, e.resource_version
             FROM (SELECT DISTINCT object_id, category FROM events
                   WHERE object_id IN (SELECT value FROM json_each(?1))) AS k
             JOIN events AS e ON e.id IN (
               SELECT id FROM events WHERE object_id = k.object_id AND category = k.category
               ORDER BY id DESC LIMIT ?2)
             ORDER BY e.object_id, e.resource_version DESC, e.id DESC)sql";
    case Query::list_ids:
      return R"(SELECT id, resource_version FROM objects WHERE "group" = ?1 AND kind = ?2)";
    case Query::data_version:
      return "PRAGMA data_version";
    case Query::schema_version:
      return "SELECT version FROM beehive_schema";
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
             session, last_transition_at, observed_generation)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (object_id, type) DO UPDATE SET status = excluded.status,
               reason = excluded.reason, message = excluded.message,
               liveness = excluded.liveness, session = excluded.session,
               observed_generation = excluded.observed_generation,
               last_transition_at = CASE WHEN conditions.status = excluded.status
                 AND (conditions.liveness = 0 OR conditions.session = excluded.session)
                 THEN conditions.last_transition_at ELSE excluded.last_transition_at END)sql";
    case Query::delete_condition:
      return "DELETE FROM conditions WHERE object_id = ?1 AND type = ?2";
    case Query::set_finalizers:
      return "UPDATE objects SET finalizers = ?2, resource_version = ?3, updated_at = ?4 "
             "WHERE id = ?1";
    case Query::conditions_changed:
      return "UPDATE objects SET resource_version = ?2, updated_at = ?3, conditions_count = "
             "(SELECT count(*) FROM conditions WHERE object_id = ?1) WHERE id = ?1";
    case Query::has_incoming_refs:
      // A live claim: an owned child, or a dependent that is not being deleted itself.
      return R"sql(SELECT EXISTS (SELECT 1 FROM refs AS r JOIN objects AS o ON o.id = r.from_id
             WHERE r.to_id = ?1 AND (r.relation = 'owned_by' OR o.deletion_requested_at IS NULL)))sql";
    case Query::list_owned_objects:
      // The owner's edges drive (one rowid lookup per child); `+` keeps SQLite from
      // walking the kind's index instead, which it prefers without statistics.
      return select_objects(R"(o.id IN (SELECT from_id FROM refs WHERE to_id = ?3 AND
             relation = 'owned_by') AND +o."group" = ?1 AND +o.kind = ?2 ORDER BY o.id)");
    case Query::add_ref:
      return "INSERT OR IGNORE INTO refs (from_id, relation, to_id) VALUES (?1, ?2, ?3)";
    case Query::remove_ref:
      return "DELETE FROM refs WHERE from_id = ?1 AND relation = ?2 AND to_id = ?3";
    case Query::object_being_deleted:
      return "SELECT deletion_requested_at IS NOT NULL FROM objects WHERE id = ?1";
    case Query::cascade_candidates:
      // Starts from the (few) deletion-pending owners through the partial index
      // (CROSS JOIN fixes SQLite's join order).
      return R"sql(SELECT child.id FROM objects AS owner
             CROSS JOIN refs AS r ON r.to_id = owner.id AND r.relation = 'owned_by'
             JOIN objects AS child ON child.id = r.from_id
             WHERE owner.deletion_requested_at IS NOT NULL
               AND child.deletion_requested_at IS NULL LIMIT ?1)sql";
    case Query::collectible:
      // Deletion requested, every finalizer removed, and no live claim on it: no owned
      // child, no dependent that is not itself being deleted (as has_incoming_refs).
      // A deletion-pending dependent's edge (a self-edge, a cycle among objects being
      // deleted) never holds its target: it would hold both ends forever.
      // No ORDER BY: it would trade the partial index for a scan of every object.
      return R"sql(SELECT o.id FROM objects AS o WHERE o.deletion_requested_at IS NOT NULL
             AND o.finalizers = '[]' AND NOT EXISTS (SELECT 1 FROM refs AS r
               JOIN objects AS d ON d.id = r.from_id WHERE r.to_id = o.id
               AND (r.relation = 'owned_by' OR d.deletion_requested_at IS NULL)) LIMIT ?1)sql";
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
             ORDER BY resource_version DESC, id DESC LIMIT ?6)sql";
    case Query::event_runs_between:
      return R"sql(SELECT id, object_id, category, type, reason, message, detail, count,
             first_at, last_at, resource_version FROM events
             WHERE resource_version > ?1 AND resource_version <= ?2
             ORDER BY resource_version)sql";
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
      // The count saturates at Event::count's largest value (see write_ops.cpp).
      return "UPDATE events SET count = min(count + 1, 2147483647), message = ?2, detail = ?3, "
             "last_at = ?4, resource_version = ?5 WHERE id = ?1";
    case Query::events_high_water:
      return "SELECT coalesce(max(resource_version), 0) FROM events";
    case Query::event_page_end:
      // Through events_by_run: the page's runs are all it reads.
      return R"sql(SELECT object_id FROM events WHERE object_id > ?1
             ORDER BY object_id LIMIT 1 OFFSET ?2 - 1)sql";
    case Query::event_page_end_by_version:
      return R"sql(SELECT resource_version FROM events WHERE resource_version > ?1
             ORDER BY resource_version LIMIT 1 OFFSET ?2 - 1)sql";
    case Query::kinds_with_runs_in:
      return R"sql(SELECT DISTINCT o."group", o.kind FROM events AS e
             CROSS JOIN objects AS o ON o.id = e.object_id
             WHERE e.object_id > ?1 AND e.object_id <= ?2)sql";
    case Query::kinds_with_runs_in_versions:
      return R"sql(SELECT DISTINCT o."group", o.kind FROM events AS e
             CROSS JOIN objects AS o ON o.id = e.object_id
             WHERE e.resource_version > ?1 AND e.resource_version <= ?2)sql";
    case Query::kinds_with_runs_before:
      return R"sql(SELECT DISTINCT o."group", o.kind FROM events AS e
             CROSS JOIN objects AS o ON o.id = e.object_id WHERE e.last_at < ?1)sql";
    case Query::trim_event_runs:
      // Newest by id, as the current run is (current_run): a clock stepped back gives the
      // current run an older last_at than the run before it, which must not outlive it.
      // The page's objects only, through events_by_run.
      return R"sql(DELETE FROM events WHERE id IN (
               SELECT id FROM (
                 SELECT e.id, row_number() OVER (PARTITION BY e.object_id, e.category
                                                 ORDER BY e.id DESC) AS n
                 FROM events AS e CROSS JOIN objects AS o ON o.id = e.object_id
                 WHERE e.object_id > ?4 AND e.object_id <= ?5
                   AND o."group" = ?1 AND o.kind = ?2)
               WHERE n > ?3))sql";
    case Query::trim_event_runs_in_versions:
      // As trim_event_runs, in the (object, category) pairs with a run in the versions
      // (?4, ?5] only: starts from events_by_version (the unary + keeps SQLite from
      // scanning events_by_run for the DISTINCT instead).
      return R"sql(DELETE FROM events WHERE id IN (
               SELECT id FROM (
                 SELECT e.id, row_number() OVER (PARTITION BY e.object_id, e.category
                                                 ORDER BY e.id DESC) AS n
                 FROM (SELECT DISTINCT +object_id AS object_id, +category AS category
                       FROM events WHERE resource_version > ?4 AND resource_version <= ?5) AS p
                 CROSS JOIN objects AS o ON o.id = p.object_id
                 CROSS JOIN events AS e ON e.object_id = p.object_id AND e.category = p.category
                 WHERE o."group" = ?1 AND o.kind = ?2)
               WHERE n > ?3))sql";
    case Query::old_events_page_end:
      // Through events_by_age, from where the last page of the kind ended: other kinds'
      // old runs are read once per sweep, not once per page.
      return R"sql(SELECT e.last_at FROM events AS e CROSS JOIN objects AS o ON o.id = e.object_id
             WHERE e.last_at > ?3 AND e.last_at < ?4 AND o."group" = ?1 AND o.kind = ?2
             ORDER BY e.last_at LIMIT 1 OFFSET ?5 - 1)sql";
    case Query::trim_old_events:
      // The pair's current run (started last) stays while another of its runs is
      // young: a clock stepped back left it older than the run before it.
      return R"sql(DELETE FROM events WHERE id IN (
               SELECT e.id FROM events AS e CROSS JOIN objects AS o ON o.id = e.object_id
               WHERE e.last_at > ?3 AND e.last_at <= ?4 AND e.last_at < ?5
                 AND o."group" = ?1 AND o.kind = ?2
                 AND NOT (e.id = (SELECT max(c.id) FROM events AS c
                                  WHERE c.object_id = e.object_id AND c.category = e.category)
                          AND EXISTS (SELECT 1 FROM events AS y
                                      WHERE y.object_id = e.object_id
                                        AND y.category = e.category AND y.last_at >= ?5))))sql";
    case Query::set_labels:
      return "UPDATE objects SET labels = ?2, resource_version = ?3, updated_at = ?4 WHERE id = ?1";
    case Query::delete_labels:
      return "DELETE FROM labels WHERE object_id = ?1";
    case Query::insert_label:
      return "INSERT INTO labels (object_id, key, value) VALUES (?1, ?2, ?3)";
    case Query::log_change:
      return R"sql(INSERT INTO change_log (resource_version, object_id, "group", kind, parts, at,
             final_body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7))sql";
    case Query::change_log_since:
      return R"sql(SELECT resource_version, object_id, "group", kind, parts, final_body
             FROM change_log WHERE resource_version > ?1 ORDER BY resource_version)sql";
    case Query::change_log_horizon:
      return "SELECT value FROM beehive_meta WHERE key = 'change_log_horizon'";
    case Query::change_log_first_young:
      // Walks the log from its oldest entry and stops at the first one at or after ?1:
      // the old entries only, which are about to go (entries are appended in time order;
      // one the clock put earlier behind a younger one is kept, never one too young).
      return R"sql(SELECT (SELECT min(resource_version) FROM change_log),
             (SELECT max(resource_version) FROM change_log), y.resource_version, y.at
             FROM (SELECT 1) AS one LEFT JOIN (SELECT resource_version, at FROM change_log
               WHERE at >= ?1 ORDER BY resource_version LIMIT 1) AS y ON 1)sql";
    case Query::change_log_nth_newest:
      return R"sql(SELECT resource_version FROM change_log ORDER BY resource_version DESC
             LIMIT 1 OFFSET ?1 - 1)sql";
    case Query::change_log_nth_oldest:
      return R"sql(SELECT resource_version FROM change_log ORDER BY resource_version
             LIMIT 1 OFFSET ?1 - 1)sql";
    case Query::change_log_newest:
      return "SELECT resource_version, at FROM change_log ORDER BY resource_version DESC LIMIT 1";
    case Query::lower_change_log_times:
      return "UPDATE change_log SET at = ?2 WHERE resource_version <= ?1 AND at > ?2";
    case Query::pin_resource_version:
      // Before a trim: the counter takes the log's newest version, which may go.
      return R"sql(UPDATE beehive_meta SET value = max(value, coalesce((SELECT
               max(resource_version) FROM change_log), 0)) WHERE key = 'resource_version')sql";
    case Query::trim_change_log:
      return "DELETE FROM change_log WHERE resource_version <= ?1";
    case Query::set_change_log_horizon:
      return "UPDATE beehive_meta SET value = max(value, ?1) WHERE key = 'change_log_horizon'";
    case Query::begin_read:
      return "BEGIN";
    case Query::end_read:
      return "COMMIT";
    case Query::count_:
      break;
  }
  throw Error(errc::store, "unknown query");
}

}  // namespace beehive::store
