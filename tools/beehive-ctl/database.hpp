#pragma once

// A beehive database opened for inspection: one read-only SQLite connection (the
// store layer's own Connection, so rows decode exactly as the library reads them) plus
// the few queries the library has no use for (kind summaries, condition transition
// times).
//
// Safe next to a running application: the connection is SQLITE_OPEN_READONLY, and in
// WAL mode readers never block the writer nor wait for it. A busy timeout covers the
// short moments (WAL recovery, checkpoints) in which SQLite reports SQLITE_BUSY.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <beehive/condition.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/time.hpp>

#include "store/sqlite/sqlite_connection.hpp"

namespace beehive::ctl {

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
  /// Throws NotFound for a missing file, std::runtime_error for a file that is not a
  /// beehive database or was written by another schema version.
  Database(const std::filesystem::path& file, std::chrono::milliseconds busy_timeout);

  const std::filesystem::path& file() const { return file_; }
  store::Connection& connection() { return *conn_; }

  std::vector<KindSummary> kinds();
  /// Ordered by type, like Object::conditions.
  std::vector<ConditionRow> conditions(ObjectID id);
  /// The store-wide resource version: it moves with every committed change.
  std::int64_t resource_version();

  /// Holds one read transaction, so that the several reads of a command see one
  /// snapshot. The store layer's reads join it instead of opening their own.
  class Snapshot {
   public:
    explicit Snapshot(Database& db);
    ~Snapshot();
    Snapshot(const Snapshot&) = delete;
    Snapshot& operator=(const Snapshot&) = delete;

   private:
    Database& db_;
  };

 private:
  std::filesystem::path file_;
  std::optional<store::Connection> conn_;
};

}  // namespace beehive::ctl
