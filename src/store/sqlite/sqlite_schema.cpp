// The SQLite schema as a list of migrations, applied in order inside one transaction
// when a store is opened, which also starts the store's new session.
//
// Runs on the thread opening the store (beehive's start, beehive-ctl, the benchmarks),
// on the connection it passes; holds no state of its own.

#include "store/sqlite/sqlite_schema.hpp"

#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include <beehive/errors.hpp>

namespace beehive::store::sqlite_schema {

namespace {

// Migration i takes the schema from version i to i + 1. Never edit a released entry;
// append a new one.
const std::vector<const char*>& migrations() {
  static const std::vector<const char*> m = {
      R"sql(
CREATE TABLE beehive_meta (
  key   TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO beehive_meta (key, value) VALUES ('resource_version', 0), ('session', 0);

CREATE TABLE objects (
  id                    INTEGER PRIMARY KEY AUTOINCREMENT,
  "group"               TEXT NOT NULL,
  kind                  TEXT NOT NULL,
  slug                  TEXT,
  spec                  TEXT NOT NULL,
  spec_version          INTEGER NOT NULL DEFAULT 0,
  status                TEXT,
  status_version        INTEGER NOT NULL DEFAULT 0,
  generation            INTEGER NOT NULL,
  observed_generation   INTEGER,
  observed_at           INTEGER,
  resource_version      INTEGER NOT NULL,
  deletion_requested_at INTEGER,
  finalizers            TEXT NOT NULL DEFAULT '[]',
  created_at            INTEGER NOT NULL,
  updated_at            INTEGER NOT NULL,
  UNIQUE ("group", kind, slug)
);
CREATE INDEX objects_by_kind ON objects ("group", kind);
CREATE INDEX objects_deleting ON objects (deletion_requested_at)
  WHERE deletion_requested_at IS NOT NULL;

CREATE TABLE conditions (
  object_id          INTEGER NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
  type               TEXT NOT NULL,
  status             TEXT NOT NULL,
  reason             TEXT NOT NULL,
  message            TEXT NOT NULL,
  liveness           INTEGER NOT NULL DEFAULT 0,
  session            INTEGER NOT NULL DEFAULT 0,
  last_transition_at INTEGER NOT NULL,
  PRIMARY KEY (object_id, type)
) WITHOUT ROWID;

CREATE TABLE refs (
  from_id  INTEGER NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
  relation TEXT NOT NULL CHECK (relation IN ('owned_by', 'depends_on')),
  to_id    INTEGER NOT NULL REFERENCES objects (id) ON DELETE RESTRICT,
  PRIMARY KEY (from_id, relation, to_id)
) WITHOUT ROWID;
CREATE INDEX refs_by_target ON refs (to_id, relation, from_id);

CREATE TABLE events (
  id        INTEGER PRIMARY KEY AUTOINCREMENT,
  object_id INTEGER NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
  category  TEXT NOT NULL,
  type      TEXT NOT NULL,
  reason    TEXT NOT NULL,
  message   TEXT NOT NULL,
  detail    TEXT,
  count     INTEGER NOT NULL,
  first_at  INTEGER NOT NULL,
  last_at   INTEGER NOT NULL
);
CREATE INDEX events_by_object ON events (object_id, category, last_at);
)sql",
      // 1 -> 2: event runs carry the resource version of their last write, so that an
      // event watch joins its snapshot to live runs without gap or duplicate.
      R"sql(
ALTER TABLE events ADD COLUMN resource_version INTEGER NOT NULL DEFAULT 0;
)sql",
      // 2 -> 3: resync reads only the unsettled objects of a kind, through this index,
      // instead of scanning every object of the kind.
      R"sql(
CREATE INDEX objects_unsettled ON objects ("group", kind)
  WHERE observed_generation IS NOT generation OR deletion_requested_at IS NOT NULL;
)sql",
      // How many conditions an object has, kept by the writer with every condition
      // write: a read looks conditions up only for objects that have some.
      R"sql(
ALTER TABLE objects ADD COLUMN conditions_count INTEGER NOT NULL DEFAULT 0;
UPDATE objects SET conditions_count =
  (SELECT count(*) FROM conditions WHERE object_id = objects.id)
  WHERE id IN (SELECT object_id FROM conditions);
)sql",
      // 4 -> 5: a running beehive picks up other processes' commits by reading only the
      // rows above the last resource version it saw; and the current run of an (object,
      // category) is the one started last: record_event finds it by id through
      // events_by_run, whatever the clock did to last_at.
      R"sql(
CREATE INDEX objects_by_version ON objects (resource_version);
CREATE INDEX events_by_run ON events (object_id, category, id);
)sql",
      // 5 -> 6: a condition carries the generation its controller observed it at (0 =
      // not given), as Condition::observed_generation.
      R"sql(
ALTER TABLE conditions ADD COLUMN observed_generation INTEGER NOT NULL DEFAULT 0;
)sql",
      // 6 -> 7: labels, selected in SQL through `labels` (the objects column holds the
      // same map as JSON, so that reads need no join); and the change log: one row per
      // committed change of an object, written in the change's transaction, from which
      // watches resume and other processes learn of commits (removals included). The log
      // starts now: the horizon says that nothing at or below it is in the log.
      R"sql(
ALTER TABLE objects ADD COLUMN labels TEXT;
CREATE TABLE labels (
  object_id INTEGER NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
  key       TEXT NOT NULL,
  value     TEXT NOT NULL,
  PRIMARY KEY (key, value, object_id)
) WITHOUT ROWID;
CREATE INDEX labels_by_object ON labels (object_id);

CREATE TABLE change_log (
  resource_version INTEGER PRIMARY KEY,
  object_id        INTEGER NOT NULL,
  "group"          TEXT NOT NULL,
  kind             TEXT NOT NULL,
  parts            INTEGER NOT NULL,
  at               INTEGER NOT NULL,
  final_body       TEXT
);
INSERT INTO beehive_meta (key, value)
  SELECT 'change_log_horizon', value FROM beehive_meta WHERE key = 'resource_version';
-- Other processes' commits are read from the log now: the index that found them among
-- the objects would cost every write a page for nothing.
DROP INDEX objects_by_version;
)sql",
      // 7 -> 8: other processes' event runs are found by the version of their last
      // write (Reader::event_runs_between).
      R"sql(
CREATE INDEX events_by_version ON events (resource_version);
)sql",
      // 8 -> 9: event retention's age bound reads only the runs old enough to go.
      R"sql(
CREATE INDEX events_by_age ON events (last_at);
)sql",
      // 9 -> 10: a GC pass finds the collectible rows without reading the ones that
      // finalizers still hold.
      R"sql(
CREATE INDEX objects_collectible ON objects (deletion_requested_at)
  WHERE deletion_requested_at IS NOT NULL AND finalizers = '[]';
)sql",
  };
  return m;
}

int stored_version(SQLite::Database& db) {
  if (!db.tableExists("beehive_schema")) return 0;
  SQLite::Statement q(db, "SELECT version FROM beehive_schema");
  return q.executeStep() ? q.getColumn(0).getInt() : 0;
}

}  // namespace

int latest_version() { return static_cast<int>(migrations().size()); }

std::int64_t migrate_and_open_session(SQLite::Database& db,
                                      const std::function<void(int from)>& before_migrating) {
  SQLite::Transaction txn(db, SQLite::TransactionBehavior::IMMEDIATE);
  int version = stored_version(db);
  if (version > latest_version())
    throw Error(errc::store, "database schema version " + std::to_string(version) +
                                 " is newer than this build's " + std::to_string(latest_version()));
  if (version >= 1 && version < latest_version() && before_migrating) before_migrating(version);
  if (version == 0) db.exec("CREATE TABLE beehive_schema (version INTEGER NOT NULL)");
  for (int v = version; v < latest_version(); ++v) db.exec(migrations()[v]);
  db.exec("DELETE FROM beehive_schema");
  db.exec("INSERT INTO beehive_schema (version) VALUES (" + std::to_string(latest_version()) + ")");
  SQLite::Statement s(db,
                      "UPDATE beehive_meta SET value = value + 1 WHERE key = 'session' "
                      "RETURNING value");
  s.executeStep();
  std::int64_t session = s.getColumn(0).getInt64();
  s.reset();
  txn.commit();
  return session;
}

}  // namespace beehive::store::sqlite_schema
