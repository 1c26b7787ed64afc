// A Database on a schema of a PostgreSQL database: a connection of the store layer's
// own whose transactions are read-only.

#include <limits>

#include <beehive/errors.hpp>

#include "database.hpp"
#include "failure.hpp"
#include "store/postgres/pg_reads.hpp"
#include "store/postgres/pg_schema.hpp"

namespace beehive::ctl {

namespace {

namespace pg = store::pg;

/// The store layer's reader, with its connection in reach for the tool's own queries.
/// A session no process has, nor the two the reads report (row_json.hpp: the leader's
/// and "another process's", 0): a liveness condition reads as written only when the
/// process that wrote it leads, as in every process but that one.
class SchemaReader : public pg::PgReader {
 public:
  explicit SchemaReader(const Location& where)
      : Reading(where.conninfo, where.schema, where.timeout,
                /*session=*/std::numeric_limits<std::int64_t>::min()) {}
  pg::Connection& connection() { return conn_; }
};

/// Whether the connection's schema holds beehive's tables.
bool holds_store(pg::Connection& c) {
  return c
      .run("ctl_holds_store",
           "SELECT to_regclass(format('%I.beehive_schema', $1::text)) IS NOT NULL",
           pg::Params().add(c.schema()))
      .boolean(0, 0);
}

class PostgresDatabase final : public Database {
 public:
  explicit PostgresDatabase(const Location& where) : Database(where), reader_(where) {
    auto& c = reader_.connection();
    c.set_read_only();  // the tool's reads never write, reconnected or not
    if (!holds_store(c)) throw NotFound("no beehive store in " + name());
    auto version =
        c.run("ctl_schema_version", "SELECT coalesce(max(version), 0) FROM beehive_schema")
            .i64(0, 0);
    require_schema_version(name(), static_cast<int>(version), store::pg_schema::latest_version());
  }

  store::Reader& reader() override { return reader_; }

  std::vector<KindSummary> kinds() override {
    auto r = conn().run("ctl_kinds", R"sql(
      SELECT "group", kind, count(*), count(deletion_requested_at),
             count(*) FILTER (WHERE observed_generation IS DISTINCT FROM generation
                                 OR deletion_requested_at IS NOT NULL)
      FROM objects GROUP BY "group", kind
      ORDER BY "group" COLLATE "C", kind COLLATE "C")sql");
    std::vector<KindSummary> out;
    for (int i = 0; i < r.rows(); ++i)
      out.push_back({{r.str(i, 0), r.str(i, 1)}, r.i64(i, 2), r.i64(i, 3), r.i64(i, 4)});
    return out;
  }

  std::vector<ConditionRow> conditions(ObjectID id) override {
    // The library's liveness rule on PostgreSQL (pg_queries.cpp, object_columns): trusted
    // while the process that wrote it leads.
    auto r = conn().run("ctl_conditions", R"sql(
      SELECT type, status, reason, message, liveness <> 0,
             liveness <> 0 AND session IS DISTINCT FROM (
               SELECT l.holder FROM leadership AS l WHERE l.id = 1 AND l.expires_at > now()),
             last_transition_at, observed_generation
      FROM conditions WHERE object_id = $1 ORDER BY type COLLATE "C")sql",
                        pg::Params().add(std::int64_t{id}));
    std::vector<ConditionRow> out;
    for (int i = 0; i < r.rows(); ++i) {
      ConditionRow row;
      row.stored = condition_status_from_string(r.str(i, 1));
      row.condition = {r.str(i, 0), row.stored,      r.str(i, 2),
                       r.str(i, 3), r.boolean(i, 4), r.i64(i, 7)};
      if (r.boolean(i, 5)) row.condition.status = ConditionStatus::Unknown;
      row.last_transition_at = from_millis(r.i64(i, 6));
      out.push_back(std::move(row));
    }
    return out;
  }

  int newest_spec_version(const GroupKind& gk) override {
    return static_cast<int>(conn()
                                .run("ctl_newest_spec_version",
                                     R"sql(SELECT coalesce(max(spec_version), 0) FROM objects
                                           WHERE "group" = $1 AND kind = $2)sql",
                                     pg::Params().add(gk.group).add(gk.kind))
                                .i64(0, 0));
  }

  std::int64_t resource_version() override {
    return conn()
        .run("ctl_resource_version",
             "SELECT value FROM beehive_meta WHERE key = 'resource_version'")
        .i64(0, 0);
  }

  const char* stale_liveness_writer() const override { return "a process that does not lead now"; }

  std::optional<bool> application_runs() override {
    return conn()
        .run("ctl_leader_runs", "SELECT EXISTS (SELECT 1 FROM leadership WHERE expires_at > now())")
        .boolean(0, 0);
  }

  const char* nobody_runs() const override { return "no process holds its leadership lease"; }

 protected:
  void begin_snapshot() override { conn().exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); }
  void end_snapshot() noexcept override {
    try {
      if (conn().in_transaction()) conn().exec("COMMIT");
    } catch (...) {  // the reads are done; a failed COMMIT of a read-only one changes nothing
    }
  }

 private:
  pg::Connection& conn() { return reader_.connection(); }

  SchemaReader reader_;
};

}  // namespace

std::unique_ptr<Database> open_postgres_database(const Location& where) {
  return std::make_unique<PostgresDatabase>(where);
}

void check_postgres_location(const Location& where) {
  auto usage = [](const char* option, const Error& e) {
    std::string why = e.what();
    if (why.rfind("postgres: ", 0) == 0) why.erase(0, 10);
    return UsageError(option + why);
  };
  try {
    pg::check_conninfo(where.conninfo);
  } catch (const Error& e) {
    throw usage("--pg: ", e);
  }
  // Read as the library would refuse it to write (a long name would be cut by the server,
  // and name another schema).
  try {
    pg::check_schema_name(where.schema);
  } catch (const Error& e) {
    throw usage("--schema: ", e);
  }
}

void require_postgres_store(const Location& where) {
  pg::Connection c(where.conninfo, where.schema, where.timeout);
  if (!holds_store(c)) throw NotFound("no beehive store in " + where.name());
}

void require_postgres_store_to_write(const Location& where) {
  // One connection: a session just closed may still be listed as connected.
  pg::Connection c(where.conninfo, where.schema, where.timeout);
  if (!holds_store(c)) throw NotFound("no beehive store in " + where.name());
  auto version = static_cast<int>(
      c.run("ctl_schema_version", "SELECT coalesce(max(version), 0) FROM beehive_schema")
          .i64(0, 0));
  const int latest = store::pg_schema::latest_version();
  if (version >= latest) return;
  // Every process of the store names its sessions after the schema (pg::session_name;
  // earlier builds gave the schema as it is, $2), unless its connection string names
  // them otherwise, as this one's may. A started application holds the leadership lease
  // (its leader does) whatever its sessions are called.
  bool others = c.run("ctl_others_connected", R"sql(
      SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                     WHERE pid <> pg_backend_pid() AND datname = current_database()
                       AND application_name IN (current_setting('application_name'), $1,
                                                left('beehive ' || $2::text, 63)))
          OR EXISTS (SELECT 1 FROM leadership WHERE expires_at > now()))sql",
                      pg::Params().add(pg::session_name(where.schema)).add(where.schema))
                    .boolean(0, 0);
  if (others) throw std::runtime_error(migration_refusal(where.name(), version, latest));
}

int postgres_schema_version() { return store::pg_schema::latest_version(); }

}  // namespace beehive::ctl
