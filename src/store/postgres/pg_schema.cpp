// The PostgreSQL schema as a list of migrations, applied in order inside one
// transaction when a store is opened, which also starts the store's new session.
//
// Its tables mirror the SQLite schema at its version 7 (see sqlite_schema.cpp for why
// each exists), in PostgreSQL's types, plus what several processes need: the write
// tokens that resolve a commit interrupted by a lost connection, and the leadership
// lease. The migration numbers are this backend's own.
//
// Runs on the thread opening the store; holds no state of its own.

#include "store/postgres/pg_schema.hpp"

#include <string>
#include <vector>

#include <beehive/errors.hpp>

#include "store/postgres/pg_faults.hpp"

namespace beehive::store::pg_schema {

namespace {

// Migration i takes the schema from version i to i + 1. Never edit a released entry;
// append a new one.
const std::vector<const char*>& migrations() {
  static const std::vector<const char*> m = {
      R"sql(
CREATE TABLE beehive_meta (
  key   TEXT PRIMARY KEY,
  value BIGINT NOT NULL
);
INSERT INTO beehive_meta (key, value) VALUES ('resource_version', 0), ('session', 0),
  ('object_id', 0), ('change_log_horizon', 0);

CREATE TABLE objects (
  id                    BIGINT PRIMARY KEY,
  "group"               TEXT NOT NULL,
  kind                  TEXT NOT NULL,
  slug                  TEXT,
  spec                  TEXT NOT NULL,
  spec_version          INTEGER NOT NULL DEFAULT 0,
  status                TEXT,
  status_version        INTEGER NOT NULL DEFAULT 0,
  generation            BIGINT NOT NULL,
  observed_generation   BIGINT,
  observed_at           BIGINT,
  resource_version      BIGINT NOT NULL,
  deletion_requested_at BIGINT,
  finalizers            TEXT NOT NULL DEFAULT '[]',
  created_at            BIGINT NOT NULL,
  updated_at            BIGINT NOT NULL,
  conditions_count      INTEGER NOT NULL DEFAULT 0,
  labels                TEXT,
  UNIQUE ("group", kind, slug)
);
CREATE INDEX objects_by_kind ON objects ("group", kind, id);
CREATE INDEX objects_deleting ON objects (deletion_requested_at)
  WHERE deletion_requested_at IS NOT NULL;
CREATE INDEX objects_unsettled ON objects ("group", kind)
  WHERE observed_generation IS DISTINCT FROM generation OR deletion_requested_at IS NOT NULL;

CREATE TABLE conditions (
  object_id           BIGINT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
  type                TEXT NOT NULL,
  status              TEXT NOT NULL,
  reason              TEXT NOT NULL,
  message             TEXT NOT NULL,
  liveness            INTEGER NOT NULL DEFAULT 0,
  session             BIGINT NOT NULL DEFAULT 0,
  last_transition_at  BIGINT NOT NULL,
  observed_generation BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (object_id, type)
);

CREATE TABLE refs (
  from_id  BIGINT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
  relation TEXT NOT NULL CHECK (relation IN ('owned_by', 'depends_on')),
  to_id    BIGINT NOT NULL REFERENCES objects (id) ON DELETE RESTRICT,
  PRIMARY KEY (from_id, relation, to_id)
);
CREATE INDEX refs_by_target ON refs (to_id, relation, from_id);

CREATE TABLE events (
  id               BIGSERIAL PRIMARY KEY,
  object_id        BIGINT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
  category         TEXT NOT NULL,
  type             TEXT NOT NULL,
  reason           TEXT NOT NULL,
  message          TEXT NOT NULL,
  detail           TEXT,
  count            INTEGER NOT NULL,
  first_at         BIGINT NOT NULL,
  last_at          BIGINT NOT NULL,
  resource_version BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX events_by_object ON events (object_id, category, last_at);
CREATE INDEX events_by_run ON events (object_id, category, id);

CREATE TABLE labels (
  object_id BIGINT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
  key       TEXT NOT NULL,
  value     TEXT NOT NULL,
  PRIMARY KEY (key, value, object_id)
);
CREATE INDEX labels_by_object ON labels (object_id);

CREATE TABLE change_log (
  resource_version BIGINT PRIMARY KEY,
  object_id        BIGINT NOT NULL,
  "group"          TEXT NOT NULL,
  kind             TEXT NOT NULL,
  parts            BIGINT NOT NULL,
  at               BIGINT NOT NULL,
  final_body       TEXT
);

-- One row per writer session: the token of its last committed transaction.
CREATE TABLE write_tokens (
  session BIGINT PRIMARY KEY,
  token   BIGINT NOT NULL
);

-- The leadership lease: who leads, in which term, until when (the database's clock).
CREATE TABLE leadership (
  id         INTEGER PRIMARY KEY CHECK (id = 1),
  holder     BIGINT NOT NULL,
  term       BIGINT NOT NULL,
  expires_at TIMESTAMPTZ NOT NULL
);
INSERT INTO leadership (id, holder, term, expires_at) VALUES (1, 0, 0, '-infinity');
)sql",
      // 1 -> 2: other processes' event runs are found by the version of their last
      // write (Reader::event_runs_between).
      R"sql(
CREATE INDEX events_by_version ON events (resource_version);
)sql",
      // 2 -> 3: event retention's age bound reads only the runs old enough to go.
      R"sql(
CREATE INDEX events_by_age ON events (last_at);
)sql",
      // 3 -> 4: a GC pass finds the collectible rows without reading the ones that
      // finalizers still hold.
      R"sql(
CREATE INDEX objects_collectible ON objects (deletion_requested_at)
  WHERE deletion_requested_at IS NOT NULL AND finalizers = '[]';
)sql",
      // 4 -> 5: the holder's lease length, so that a standby with a shorter one waits for
      // the holder's before it takes an unrenewed lease over.
      R"sql(
ALTER TABLE leadership ADD COLUMN lease_ms BIGINT NOT NULL DEFAULT 0;
)sql",
  };
  return m;
}

}  // namespace

std::string notify_channel(const std::string& schema) {
  std::string channel = "beehive_" + schema;
  if (channel.size() <= 63) return channel;
  std::size_t end = 63;
  while (end > 0 && (static_cast<unsigned char>(channel[end]) & 0xC0) == 0x80) --end;
  channel.resize(end);
  return channel;
}

int latest_version() { return static_cast<int>(migrations().size()); }

Opened migrate_and_open_session(pg::Connection& c, std::chrono::milliseconds idle_limit) {
  static const std::string lock_sql = "SELECT pg_advisory_xact_lock(hashtext($1))";
  static const std::string exists_sql = "SELECT to_regclass('beehive_schema') IS NOT NULL";
  static const std::string version_sql = "SELECT coalesce(max(version), 0) FROM beehive_schema";
  static const std::string session_sql =
      "UPDATE beehive_meta SET value = value + 1 WHERE key = 'session' RETURNING value";
  c.exec("BEGIN");
  try {
    // A paused opener's transaction holds the lock below and, while it migrates, the
    // counters' rows every write takes: the server ends it once idle for that long.
    c.exec("SET LOCAL idle_in_transaction_session_timeout = " + std::to_string(idle_limit.count()));
    // The others wait for it whatever lock_timeout the role or the connection string
    // sets (an opener that stalls is ended by the idle timeout above, not waited for).
    c.exec("SET LOCAL lock_timeout = 0");
    // Processes opening one new schema at once: the first creates it, the others wait.
    c.run("", lock_sql, pg::Params().add("beehive:" + c.schema()));
    if (auto hook = pg::faults::inside_open_migration.load()) hook();
    // Created only when missing: a role given a prepared schema needs no CREATE on
    // the database.
    if (c.run("", "SELECT 1 FROM pg_namespace WHERE nspname = $1", pg::Params().add(c.schema()))
            .rows() == 0)
      c.exec("CREATE SCHEMA " + c.quote_identifier(c.schema()));
    int version = 0;
    if (c.run("", exists_sql).boolean(0, 0))
      version = static_cast<int>(c.run("", version_sql).i64(0, 0));
    if (version > latest_version())
      throw Error(errc::store, "database schema version " + std::to_string(version) +
                                   " is newer than this build's " +
                                   std::to_string(latest_version()));
    // Writers of a running older build are held off until this commits, and then see
    // the new version (PgWriter::begin reads it after taking these rows).
    if (version > 0 && version < latest_version())
      c.exec(
          "SELECT 1 FROM beehive_meta WHERE key IN ('object_id', 'resource_version') "
          "ORDER BY key FOR UPDATE");
    if (version == 0) c.exec("CREATE TABLE beehive_schema (version INTEGER NOT NULL)");
    for (int i = version; i < latest_version(); ++i) c.exec(migrations()[i]);
    c.exec("DELETE FROM beehive_schema");
    c.run("", "INSERT INTO beehive_schema (version) VALUES ($1)",
          pg::Params().add(static_cast<std::int64_t>(latest_version())));
    Opened opened;
    opened.session = c.run("", session_sql).i64(0, 0);
    // Four 64-bit words from the server's strong random source (gen_random_uuid, 60
    // random bits in each word's 16 hex digits), made once: rows an older build of the
    // same schema version ignores.
    static const std::string key_sql =
        "SELECT value FROM beehive_meta WHERE key IN ('note_key_0', 'note_key_1', "
        "'note_key_2', 'note_key_3') ORDER BY key";
    auto key = c.run("", key_sql);
    if (key.rows() < 4) {
      c.exec(R"sql(INSERT INTO beehive_meta (key, value)
        SELECT 'note_key_' || i,
               ('x' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 16))::bit(64)::bigint
          FROM generate_series(0, 3) AS i
        ON CONFLICT (key) DO NOTHING)sql");
      key = c.run("", key_sql);
    }
    if (key.rows() != 4)
      throw Error(errc::store, "postgres: the schema's note key is incomplete (" +
                                   std::to_string(key.rows()) + " of its 4 rows in beehive_meta)");
    for (int i = 0; i < key.rows(); ++i) {
      auto word = static_cast<std::uint64_t>(key.i64(i, 0));
      for (int b = 7; b >= 0; --b) opened.note_key.push_back(static_cast<char>(word >> (8 * b)));
    }
    c.exec("COMMIT");
    return opened;
  } catch (...) {
    if (!c.lost()) {
      try {
        c.exec("ROLLBACK");
      } catch (...) {
      }
    }
    throw;
  }
}

}  // namespace beehive::store::pg_schema
