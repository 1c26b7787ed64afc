// The SQL text of every statement the PostgreSQL store prepares, by Q: the SQLite
// store's statements (sqlite_queries.cpp explains their shapes) in PostgreSQL's
// dialect, and the ones several processes need (counters locked per transaction, write
// tokens, notifications, the leadership lease).
//
// Pure functions of their argument: safe on any thread.

#include "store/postgres/pg_queries.hpp"

#include <array>

#include <beehive/errors.hpp>

#include "store/row_json.hpp"

namespace beehive::store::pg {

namespace {

// Conditions come along as one JSON array in the row, as on SQLite; "C" collation sorts
// them by type bytewise whatever the database's locale. A liveness condition written by
// the process that leads now reports kLeadingSession (row_json.hpp) as its session:
// every process trusts it, not only the one that wrote it. While a process leads, any
// other's reports kNoSession: the one that wrote it (a leader deposed) trusts it no more
// than the others do. With nobody leading, each process trusts its own, as on SQLite.
constexpr const char* object_columns = R"sql(
  o.id, o."group", o.kind, o.slug, o.spec, o.spec_version, o.status, o.status_version,
  o.generation, o.observed_generation, o.observed_at, o.resource_version,
  o.deletion_requested_at, o.finalizers, o.created_at, o.updated_at, o.labels,
  CASE WHEN o.conditions_count = 0 THEN '[]' ELSE
  (SELECT json_agg(json_build_array(c.type, c.status, c.reason, c.message, c.liveness,
                                    CASE WHEN c.liveness = 0 THEN c.session
                                    ELSE coalesce((
                                      SELECT CASE WHEN l.holder = c.session THEN -1 ELSE 0 END
                                        FROM leadership AS l
                                       WHERE l.id = 1 AND l.expires_at > now()), c.session)
                                    END,
                                    c.observed_generation, c.last_transition_at)
                   ORDER BY c.type COLLATE "C")::text
     FROM conditions AS c WHERE c.object_id = o.id) END
)sql";
static_assert(kLeadingSession == -1 && kNoSession == 0, "object_columns spells them out");

std::string select_objects(const char* where) {
  return std::string("SELECT ") + object_columns + " FROM objects AS o WHERE " + where;
}

constexpr const char* event_columns =
    "id, object_id, category, type, reason, message, detail, count, first_at, last_at, "
    "resource_version";

std::string edges(const char* relation, bool outgoing) {
  // outgoing: the objects the listed ones point at (owner, dependencies); else the ones
  // pointing at them (dependents, owned).
  std::string from = outgoing ? "r.from_id" : "r.to_id", to = outgoing ? "r.to_id" : "r.from_id";
  return "SELECT " + from + R"sql(, o.id, o."group", o.kind FROM refs AS r JOIN objects AS o
         ON o.id = )sql" +
         to + " WHERE r.relation = '" + relation + "' AND " + from +
         " = ANY($1::bigint[]) ORDER BY " + from + ", o.id";
}

std::string sql_for(Q q) {
  switch (q) {
    case Q::get:
      return select_objects("o.id = $1");
    case Q::get_with_owner:  // the owner's ref (or NULLs), then the object's columns
      return std::string(R"sql(SELECT ow.id, ow."group", ow.kind, )sql") + object_columns +
             R"sql( FROM objects AS o
             LEFT JOIN LATERAL (SELECT w.id, w."group", w.kind FROM refs AS r
                                  JOIN objects AS w ON w.id = r.to_id
                                 WHERE r.from_id = o.id AND r.relation = 'owned_by'
                                 LIMIT 1) AS ow ON true
             WHERE o.id = $1)sql";
    case Q::get_by_slug:
      return select_objects(R"(o."group" = $1 AND o.kind = $2 AND o.slug = $3)");
    case Q::list:
      return select_objects(R"(o."group" = $1 AND o.kind = $2 ORDER BY o.id)");
    case Q::head:
      return "SELECT value FROM beehive_meta WHERE key = 'resource_version'";
    case Q::lock_counters:
      // Every write transaction, from every process, takes these rows first: writes are
      // serialised, so versions become visible in the order they were given out. Locked
      // in key order (ORDER BY runs before the lock): in scan order, two transactions
      // whose snapshots straddle a commit meet the rows' new versions in different
      // orders and deadlock. Before the rows (the join needs it first), an advisory
      // lock, which PostgreSQL hands over in the order it was asked for and a row lock
      // is not: a transaction begun with the last commit would take the row before a
      // process woken by that commit did, again and again. Its keys: the store's
      // ('beeh') and the schema's.
      return "SELECT m.key, m.value FROM (SELECT pg_advisory_xact_lock(1650812264, "
             "hashtext(current_schema())) OFFSET 0) AS queue, beehive_meta AS m "
             "WHERE m.key IN ('resource_version', 'object_id') ORDER BY m.key FOR UPDATE OF m";
    case Q::try_lock_counters:
      // The same, for a transaction begun before anyone asked for it (PgWriter's
      // begin_ahead): never waits. No rows when another process holds the queue (it
      // asked first: its turn), an error when the rows are locked (a migration).
      return "SELECT key, value FROM beehive_meta WHERE key IN ('resource_version', "
             "'object_id') AND pg_try_advisory_xact_lock(1650812264, "
             "hashtext(current_schema())) ORDER BY key FOR UPDATE NOWAIT";
    case Q::schema_version:
      // Read after lock_counters, in a snapshot of its own: a newer build's migration
      // takes the counters first (pg_schema.cpp), so a write that got them after it
      // committed sees its version here and is refused.
      return "SELECT coalesce(max(version), 0) FROM beehive_schema";
    case Q::close_transaction:
      // What every write transaction stores last, in one statement: the counters as
      // allocated, this session's write token (read back after a COMMIT lost with its
      // connection), and the notification to other processes (sent at the commit; its
      // payload is the commit's note, commit_note.hpp, or the note without its record,
      // $7, when it is too long for the server's payload limit (its block size, less
      // NAMEDATALEN, less 128 bytes: 8000 by default), or when the
      // notification queue is 5% full: a listener that stopped reading holds every note
      // sent since, and a full queue fails every commit).
      return R"sql(WITH counters AS (
               UPDATE beehive_meta SET value = CASE key WHEN 'resource_version' THEN $1::bigint
                 ELSE $2::bigint END WHERE key IN ('resource_version', 'object_id')),
             token AS (
               INSERT INTO write_tokens (session, token) VALUES ($3, $4)
               ON CONFLICT (session) DO UPDATE SET token = excluded.token)
             SELECT pg_notify($5, CASE WHEN octet_length($6::text) <
                 current_setting('block_size')::int - current_setting('max_identifier_length')::int
                   - 129 AND pg_notification_queue_usage() < 0.05
               THEN $6::text ELSE $7::text END))sql";
    case Q::raise_counters:
      // After a rollback that could not store them: the counters raised to at least the
      // values a block handed out (PgWriter::rollback_keeping_counters).
      return R"sql(UPDATE beehive_meta SET value = greatest(value, CASE key
               WHEN 'resource_version' THEN $1::bigint ELSE $2::bigint END)
             WHERE key IN ('resource_version', 'object_id'))sql";
    case Q::read_token:
      return "SELECT token FROM write_tokens WHERE session = $1";
    case Q::insert_object:
      return R"sql(INSERT INTO objects (id, "group", kind, slug, spec, spec_version, generation,
             resource_version, finalizers, created_at, updated_at, labels)
             VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9, $9, $10))sql";
    case Q::update_spec:
      return "UPDATE objects SET spec = $2, spec_version = $3, generation = $4, "
             "resource_version = $5, updated_at = $6 WHERE id = $1";
    case Q::request_deletion:
      return "UPDATE objects SET deletion_requested_at = $2, resource_version = $3, "
             "updated_at = $2 WHERE id = $1";
    case Q::owner_of_one:
      return R"sql(SELECT o.id, o."group", o.kind FROM refs AS r JOIN objects AS o
             ON o.id = r.to_id WHERE r.from_id = $1 AND r.relation = 'owned_by')sql";
    case Q::owner_of:
      return edges("owned_by", true);
    case Q::dependencies_of:
      return edges("depends_on", true);
    case Q::dependents_of:
      return edges("depends_on", false);
    case Q::owned_by:
      return edges("owned_by", false);
    case Q::recent_events:
      return std::string(R"sql(SELECT e.* FROM (SELECT DISTINCT object_id, category FROM events
             WHERE object_id = ANY($1::bigint[])) AS k CROSS JOIN LATERAL (SELECT )sql") +
             event_columns + R"sql( FROM events WHERE object_id = k.object_id AND
             category = k.category ORDER BY id DESC LIMIT $2) AS e
             ORDER BY e.object_id, e.resource_version DESC, e.id DESC)sql";
    case Q::list_ids:
      return R"(SELECT id, resource_version FROM objects WHERE "group" = $1 AND kind = $2)";
    case Q::list_unsettled_ids:
      return R"(SELECT id, resource_version FROM objects WHERE "group" = $1 AND kind = $2 AND
             (observed_generation IS DISTINCT FROM generation OR deletion_requested_at IS NOT NULL))";
    case Q::update_status:
      return "UPDATE objects SET status = $2, status_version = $3, "
             "observed_generation = $4, observed_at = $5, resource_version = $6, updated_at = $7 "
             "WHERE id = $1";
    case Q::upsert_condition:
      return R"sql(INSERT INTO conditions (object_id, type, status, reason, message, liveness,
             session, last_transition_at, observed_generation)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (object_id, type) DO UPDATE SET status = excluded.status,
               reason = excluded.reason, message = excluded.message,
               liveness = excluded.liveness, session = excluded.session,
               observed_generation = excluded.observed_generation,
               last_transition_at = CASE WHEN conditions.status = excluded.status
                 AND (conditions.liveness = 0 OR conditions.session = excluded.session)
                 THEN conditions.last_transition_at ELSE excluded.last_transition_at END)sql";
    case Q::delete_condition:
      return "DELETE FROM conditions WHERE object_id = $1 AND type = $2";
    case Q::set_finalizers:
      return "UPDATE objects SET finalizers = $2, resource_version = $3, updated_at = $4 "
             "WHERE id = $1";
    case Q::conditions_changed:
      return "UPDATE objects SET resource_version = $2, updated_at = $3, conditions_count = "
             "(SELECT count(*) FROM conditions WHERE object_id = $1) WHERE id = $1";
    case Q::has_incoming_refs:
      return R"sql(SELECT EXISTS (SELECT 1 FROM refs AS r JOIN objects AS o ON o.id = r.from_id
             WHERE r.to_id = $1 AND (r.relation = 'owned_by' OR o.deletion_requested_at IS NULL)))sql";
    case Q::list_owned_objects:
      return select_objects(R"(o.id IN (SELECT from_id FROM refs WHERE to_id = $3 AND
             relation = 'owned_by') AND o."group" = $1 AND o.kind = $2 ORDER BY o.id)");
    case Q::add_ref:
      return "INSERT INTO refs (from_id, relation, to_id) VALUES ($1, $2, $3) "
             "ON CONFLICT DO NOTHING";
    case Q::remove_ref:
      return "DELETE FROM refs WHERE from_id = $1 AND relation = $2 AND to_id = $3";
    case Q::object_being_deleted:
      return "SELECT deletion_requested_at IS NOT NULL FROM objects WHERE id = $1";
    case Q::cascade_candidates:
      return R"sql(SELECT child.id FROM objects AS owner
             JOIN refs AS r ON r.to_id = owner.id AND r.relation = 'owned_by'
             JOIN objects AS child ON child.id = r.from_id
             WHERE owner.deletion_requested_at IS NOT NULL
               AND child.deletion_requested_at IS NULL LIMIT $1)sql";
    case Q::collectible:
      return R"sql(SELECT o.id FROM objects AS o WHERE o.deletion_requested_at IS NOT NULL
             AND o.finalizers = '[]' AND NOT EXISTS (SELECT 1 FROM refs AS r
               JOIN objects AS d ON d.id = r.from_id WHERE r.to_id = o.id
               AND (r.relation = 'owned_by' OR d.deletion_requested_at IS NULL)) LIMIT $1)sql";
    case Q::drop_pending_dependencies:
      return R"sql(DELETE FROM refs WHERE to_id = $1 AND relation = 'depends_on' AND EXISTS
             (SELECT 1 FROM objects WHERE id = refs.from_id
              AND deletion_requested_at IS NOT NULL))sql";
    case Q::delete_object:
      return "DELETE FROM objects WHERE id = $1";
    case Q::list_events:
      return std::string("SELECT ") + event_columns + R"sql( FROM events WHERE object_id = $1
             AND ($2::text IS NULL OR category = $2) AND ($3::text IS NULL OR type = $3)
             AND ($4::text IS NULL OR reason = $4) AND ($5::bigint IS NULL OR last_at >= $5)
             ORDER BY resource_version DESC, id DESC LIMIT $6)sql";
    case Q::event_runs_between:
      return std::string("SELECT ") + event_columns +
             " FROM events WHERE resource_version > $1 AND resource_version <= $2"
             " ORDER BY resource_version";
    case Q::current_run:
      return std::string("SELECT ") + event_columns +
             " FROM events WHERE object_id = $1 AND category = $2 ORDER BY id DESC LIMIT 1";
    case Q::insert_event:
      return R"sql(INSERT INTO events (object_id, category, type, reason, message, detail,
             count, first_at, last_at, resource_version)
             VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $7, $8) RETURNING id)sql";
    case Q::extend_event:
      // The count saturates at Event::count's largest value, the column's too (see
      // write_ops.cpp): past it, every extension of the run would fail.
      return "UPDATE events SET count = least(count::bigint + 1, 2147483647), message = $2, "
             "detail = $3, last_at = $4, resource_version = $5 WHERE id = $1";
    case Q::events_high_water:
      return "SELECT coalesce(max(resource_version), 0) FROM events";
    case Q::event_page_end:
      return R"sql(SELECT object_id FROM events WHERE object_id > $1::bigint
             ORDER BY object_id LIMIT 1 OFFSET $2::bigint - 1)sql";
    case Q::event_page_end_by_version:
      return R"sql(SELECT resource_version FROM events WHERE resource_version > $1::bigint
             ORDER BY resource_version LIMIT 1 OFFSET $2::bigint - 1)sql";
    case Q::kinds_with_runs_in:
      return R"sql(SELECT DISTINCT o."group", o.kind FROM events AS e
             JOIN objects AS o ON o.id = e.object_id
             WHERE e.object_id > $1::bigint AND e.object_id <= $2::bigint)sql";
    case Q::kinds_with_runs_in_versions:
      return R"sql(SELECT DISTINCT o."group", o.kind FROM events AS e
             JOIN objects AS o ON o.id = e.object_id
             WHERE e.resource_version > $1::bigint AND e.resource_version <= $2::bigint)sql";
    case Q::kinds_with_runs_before:
      return R"sql(SELECT DISTINCT o."group", o.kind FROM events AS e
             JOIN objects AS o ON o.id = e.object_id WHERE e.last_at < $1::bigint)sql";
    case Q::trim_event_runs:
      // Newest by id, as the current run is (current_run): a clock stepped back gives the
      // current run an older last_at than the run before it, which must not outlive it.
      // The page's objects only.
      return R"sql(DELETE FROM events WHERE id IN (
               SELECT id FROM (
                 SELECT e.id, row_number() OVER (PARTITION BY e.object_id, e.category
                                                 ORDER BY e.id DESC) AS n
                 FROM events AS e JOIN objects AS o ON o.id = e.object_id
                 WHERE e.object_id > $4::bigint AND e.object_id <= $5::bigint
                   AND o."group" = $1 AND o.kind = $2) AS ranked
               WHERE n > $3::bigint))sql";
    case Q::trim_event_runs_in_versions:
      // As trim_event_runs, in the (object, category) pairs with a run in the versions
      // ($4, $5] only.
      return R"sql(DELETE FROM events WHERE id IN (
               SELECT id FROM (
                 SELECT e.id, row_number() OVER (PARTITION BY e.object_id, e.category
                                                 ORDER BY e.id DESC) AS n
                 FROM (SELECT DISTINCT object_id, category FROM events
                       WHERE resource_version > $4::bigint
                         AND resource_version <= $5::bigint) AS p
                 JOIN objects AS o ON o.id = p.object_id
                 JOIN events AS e ON e.object_id = p.object_id AND e.category = p.category
                 WHERE o."group" = $1 AND o.kind = $2) AS ranked
               WHERE n > $3::bigint))sql";
    case Q::old_events_page_end:
      return R"sql(SELECT e.last_at FROM events AS e JOIN objects AS o ON o.id = e.object_id
             WHERE e.last_at > $3::bigint AND e.last_at < $4::bigint
               AND o."group" = $1 AND o.kind = $2
             ORDER BY e.last_at LIMIT 1 OFFSET $5::bigint - 1)sql";
    case Q::trim_old_events:
      // The pair's current run stays while another of its runs is young (see SQLite's).
      return R"sql(DELETE FROM events WHERE id IN (
               SELECT e.id FROM events AS e JOIN objects AS o ON o.id = e.object_id
               WHERE e.last_at > $3::bigint AND e.last_at <= $4::bigint
                 AND e.last_at < $5::bigint AND o."group" = $1 AND o.kind = $2
                 AND NOT (e.id = (SELECT max(c.id) FROM events AS c
                                  WHERE c.object_id = e.object_id AND c.category = e.category)
                          AND EXISTS (SELECT 1 FROM events AS y
                                      WHERE y.object_id = e.object_id
                                        AND y.category = e.category
                                        AND y.last_at >= $5::bigint))))sql";
    case Q::set_labels:
      return "UPDATE objects SET labels = $2, resource_version = $3, updated_at = $4 WHERE id = $1";
    case Q::delete_labels:
      return "DELETE FROM labels WHERE object_id = $1";
    case Q::insert_label:
      return "INSERT INTO labels (object_id, key, value) VALUES ($1, $2, $3)";
    case Q::log_change:
      return R"sql(INSERT INTO change_log (resource_version, object_id, "group", kind, parts, at,
             final_body) VALUES ($1, $2, $3, $4, $5, $6, $7))sql";
    case Q::change_log_since:
      return R"sql(SELECT resource_version, object_id, "group", kind, parts, final_body
             FROM change_log WHERE resource_version > $1 ORDER BY resource_version)sql";
    case Q::change_log_horizon:
      return "SELECT value FROM beehive_meta WHERE key = 'change_log_horizon'";
    case Q::change_log_first_young:
      return R"sql(SELECT (SELECT min(resource_version) FROM change_log),
             (SELECT max(resource_version) FROM change_log), y.resource_version, y.at
             FROM (SELECT 1) AS one LEFT JOIN (SELECT resource_version, at FROM change_log
               WHERE at >= $1 ORDER BY resource_version LIMIT 1) AS y ON true)sql";
    case Q::change_log_nth_newest:
      return R"sql(SELECT resource_version FROM change_log ORDER BY resource_version DESC
             LIMIT 1 OFFSET $1::bigint - 1)sql";
    case Q::change_log_nth_oldest:
      return R"sql(SELECT resource_version FROM change_log ORDER BY resource_version
             LIMIT 1 OFFSET $1::bigint - 1)sql";
    case Q::change_log_newest:
      return "SELECT resource_version, at FROM change_log ORDER BY resource_version DESC LIMIT 1";
    case Q::lower_change_log_times:
      return "UPDATE change_log SET at = $2 WHERE resource_version <= $1 AND at > $2";
    case Q::trim_change_log:
      return "DELETE FROM change_log WHERE resource_version <= $1";
    case Q::set_change_log_horizon:
      return "UPDATE beehive_meta SET value = greatest(value, $1::bigint) "
             "WHERE key = 'change_log_horizon'";
    case Q::lease_renew:
      // Extends the lease `holder` holds (same term); returns the term when it did. Only
      // the expiry changes: a plain UPDATE, which the fence's lock (FOR KEY SHARE) lets
      // through, so that the leader's own long transactions never hold up its renewals.
      // A build whose schema version ($3) is older than the database's neither renews
      // nor takes the lease: a newer build migrated it, and leads.
      return R"sql(UPDATE leadership SET
               expires_at = now() + $2::bigint * interval '1 millisecond', lease_ms = $2
             WHERE id = 1 AND holder = $1 AND expires_at > now()
               AND (SELECT coalesce(max(version), 0) FROM beehive_schema) <= $3
             RETURNING term)sql";
    case Q::lease_take:
      // Takes the lease when it has expired (a new term; run after lease_renew, in its
      // transaction); returns the term. Expired on the server's clock, or unrenewed: $4
      // is the row version (lease_look) the caller has seen unchanged for a whole lease
      // (its own or the holder's, the longer) on its own steady clock (else ''), so
      // that a server clock stepped back does not
      // hold a takeover up by the step. The row is locked FOR UPDATE first, the one lock
      // the fence's conflicts with: a takeover waits for the leader's fenced transactions.
      return R"sql(UPDATE leadership SET term = term + 1, holder = $1,
               expires_at = now() + $2::bigint * interval '1 millisecond', lease_ms = $2
             WHERE id = (SELECT id FROM leadership WHERE id = 1
                           AND (expires_at <= now() OR xmin::text = $4)
                         FOR UPDATE)
               AND (SELECT coalesce(max(version), 0) FROM beehive_schema) <= $3
             RETURNING term)sql";
    case Q::lease_look:
      // The lease row's version (each renewal writes a new one) and its holder's lease.
      return "SELECT xmin::text, lease_ms FROM leadership WHERE id = 1";
    case Q::lease_check:
      // Fencing: in the leader's own write transaction, the lease row is read and locked
      // (FOR KEY SHARE): a takeover waits for this transaction, and this transaction fails
      // when a takeover committed first. Renewals are not held up (see lease_renew).
      return "SELECT 1 FROM leadership WHERE id = 1 AND holder = $1 AND term = $2 "
             "AND expires_at > now() FOR KEY SHARE";
    case Q::lease_release:
      return "UPDATE leadership SET expires_at = '-infinity' WHERE id = 1 AND holder = $1 "
             "AND term = $2";
    case Q::lease_blockers_end:
      // Ends the sessions whose locks the campaign session $1 waits for and that sit idle
      // inside a fenced transaction: one that locked this schema's lease row (FOR KEY
      // SHARE takes RowShareLock on the table; the fence is the only statement of
      // beehive's that does) and holds no ACCESS EXCLUSIVE lock (a migration's, which
      // is waited for). Only an expired lease's takeover waits for such a transaction,
      // so it is a deposed leader's, left open by a process cut off or paused. Stuck
      // sending a result its process does not read (paused or cut off mid-read) is as
      // idle: the session is active, but waits for that process alone. (Sessions of
      // other roles show no state to an unprivileged one, and are never ended.)
      return R"sql(SELECT count(pg_terminate_backend(a.pid)) FROM pg_stat_activity a
             WHERE a.pid = ANY (pg_blocking_pids($1::int))
               AND (a.state IN ('idle in transaction', 'idle in transaction (aborted)')
                    OR (a.state = 'active' AND a.wait_event = 'ClientWrite'))
               AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.granted
                             AND l.relation = 'leadership'::regclass
                             AND l.mode = 'RowShareLock')
               AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid
                                 AND l.mode = 'AccessExclusiveLock'))sql";
    case Q::count_:
      break;
  }
  throw Error(errc::store, "unknown query");
}

struct Catalog {
  std::array<std::string, static_cast<int>(Q::count_)> sql, names;
  Catalog() {
    for (int i = 0; i < static_cast<int>(Q::count_); ++i) {
      sql[i] = sql_for(static_cast<Q>(i));
      names[i] = "bh" + std::to_string(i);
    }
  }
};

const Catalog& catalog() {
  static const Catalog c;
  return c;
}

}  // namespace

std::string select_objects_sql(const std::string& where) { return select_objects(where.c_str()); }

std::string object_columns_sql() { return object_columns; }

Statement statement(Q q, Params params) {
  auto i = static_cast<int>(q);
  return Statement{catalog().names[i], catalog().sql[i], std::move(params)};
}

Result run(Connection& c, Q q, const Params& params) {
  auto i = static_cast<int>(q);
  return c.run(catalog().names[i].c_str(), catalog().sql[i], params);
}

}  // namespace beehive::store::pg
