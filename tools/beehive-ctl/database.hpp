#pragma once

// A beehive database opened for inspection: the library's own reads (store::Reader, so
// rows decode exactly as the library reads them) on one connection of the tool's, plus
// the few queries the library has no use for (kind summaries, condition transition
// times).
//
// Either backend:
// - a SQLite file, opened SQLITE_OPEN_READONLY: in WAL mode readers never block the
//   writer nor wait for it, and a busy timeout covers the short moments (WAL recovery,
//   checkpoints) in which SQLite reports SQLITE_BUSY;
// - a schema of a PostgreSQL database, on a session whose transactions are read-only.
// Either way safe next to running applications, and never written.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <beehive/condition.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/time.hpp>

#include "store/backend.hpp"

namespace beehive::ctl {

/// How an object argument (SLUG|ID) is read: as an id when it is all digits and names an
/// object of the kind, else as a slug, refusing a token that names one object by id and
/// another by slug (--by, default either); or only as one of them.
enum class Naming { either, id, slug };

/// Where the database is: a SQLite file (--db), or a schema of a PostgreSQL database
/// (--pg, --schema).
struct Location {
  std::filesystem::path file;
  std::string conninfo;  ///< libpq keywords or URI; set: PostgreSQL
  std::string schema = "beehive";
  /// SQLite: how long a read waits out a busy database. PostgreSQL: the connect timeout.
  std::chrono::milliseconds timeout{5000};
  Naming naming = Naming::either;

  bool postgres() const { return !conninfo.empty(); }
  /// How messages name it: the file, or `schema "S"`.
  std::string name() const;
};

/// Throws NotFound when `where` holds no beehive store (a missing file, a schema without
/// beehive's tables): a typo must not create a database, nor read as an empty one.
void require_store(const Location& where);

struct KindSummary {
  GroupKind gk;
  std::int64_t objects = 0;
  std::int64_t deleting = 0;   ///< deletion requested, not yet collected
  std::int64_t unsettled = 0;  ///< what resync would requeue: generation not observed, or deleting
};

/// A condition with what the library's Condition leaves out.
struct ConditionRow {
  Condition condition;     ///< status as the library reads it (stale liveness = Unknown)
  ConditionStatus stored;  ///< status as written
  Time last_transition_at{};
};

class Database {
 public:
  /// Throws NotFound for a missing store, std::runtime_error for one this build does not
  /// read (another schema version), beehive::Error(errc::store) when the database fails.
  static std::unique_ptr<Database> open(const Location& where);
  virtual ~Database() = default;

  /// How messages name the database.
  const std::string& name() const { return name_; }
  /// How object arguments are read (Location::naming).
  Naming naming() const { return naming_; }
  /// The library's reads.
  virtual store::Reader& reader() = 0;

  /// Kinds with objects, ordered by group then kind (bytewise).
  virtual std::vector<KindSummary> kinds() = 0;
  /// Ordered by type, like Object::conditions.
  virtual std::vector<ConditionRow> conditions(ObjectID id) = 0;
  /// The store-wide resource version: it moves with every committed change.
  virtual std::int64_t resource_version() = 0;
  /// The highest schema version a spec of the kind is stored at: 0 when none is
  /// versioned (its application uses no Migrator) or the kind has no object.
  virtual int newest_spec_version(const GroupKind& gk) = 0;
  /// Who wrote a liveness condition that reads as Unknown, for messages: SQLite trusts
  /// the running beehive's store session, PostgreSQL the leading process's.
  virtual const char* stale_liveness_writer() const = 0;
  /// Whether an application runs on the store to act on a requeue: on SQLite a started
  /// beehive (it holds the file's run lock), on PostgreSQL a leader (its leadership
  /// lease is live). Nothing when the tool cannot tell (a lock file of another user's).
  virtual std::optional<bool> application_runs() = 0;
  /// What application_runs() == false means, for messages.
  virtual const char* nobody_runs() const = 0;
  /// Looks again at whose liveness conditions hold, for a command that runs on while an
  /// application starts or stops (watch). PostgreSQL's reads ask at every read already.
  virtual void refresh_liveness() {}
  /// Why this database cannot be followed as it changes (watch), empty when it can: a
  /// SQLite file in a directory this user may not write is read as the stopped
  /// application left it, and SQLite would see nothing committed after.
  virtual std::string cannot_follow() const { return {}; }

  /// Holds one read transaction, so that the several reads of a command see one
  /// snapshot. The library's reads join it instead of opening their own.
  class Snapshot {
   public:
    explicit Snapshot(Database& db) : db_(db) { db_.begin_snapshot(); }
    ~Snapshot() { db_.end_snapshot(); }
    Snapshot(const Snapshot&) = delete;
    Snapshot& operator=(const Snapshot&) = delete;

   private:
    Database& db_;
  };

 protected:
  explicit Database(const Location& where) : name_(where.name()), naming_(where.naming) {}
  virtual void begin_snapshot() = 0;
  virtual void end_snapshot() noexcept = 0;

 private:
  std::string name_;
  Naming naming_;
};

/// Throws std::runtime_error unless `version`, the schema version of the store `name`,
/// is `latest`, the one this build reads (an older one is migrated by the write commands,
/// never by the read ones).
void require_schema_version(const std::string& name, int version, int latest);

// Each backend's (database_sqlite.cpp, database_postgres.cpp), for Database::open.
std::unique_ptr<Database> open_sqlite_database(const Location& where);
std::unique_ptr<Database> open_postgres_database(const Location& where);
void require_postgres_store(const Location& where);
/// Throws UsageError for a --pg connection string that cannot be parsed (before any
/// connection is tried: a typo is a usage error, not an unreachable server).
void check_postgres_location(const Location& where);

/// The write commands' checks of a store before they open it through the library: that
/// it is a beehive store (require_store; a SQLite file is opened read-only, so that
/// nothing is created in another program's database), and that opening it, which
/// migrates an older schema forward, migrates nothing under a running application,
/// which could then no longer write (std::runtime_error). Running on SQLite: a started
/// beehive (its run lock is held); on PostgreSQL: any process connected to the schema's
/// database under its sessions' name, `beehive SCHEMA` (or this tool's own, when its
/// connection string names it), another beehive-ctl included.
void require_sqlite_store_to_write(const Location& where);
void require_postgres_store_to_write(const Location& where);
/// The refusal's text.
std::string migration_refusal(const std::string& name, int version, int latest);
/// The schema versions this build reads and writes (--version).
int sqlite_schema_version();
int postgres_schema_version();

}  // namespace beehive::ctl
