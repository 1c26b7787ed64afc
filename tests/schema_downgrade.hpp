#pragma once

// Turns a beehive database file back into an older schema version, as a beehive of that
// version left it, so that tests can open it with this build and check its migration.
// One step per migration of src/store/sqlite/sqlite_schema.cpp, undone newest first.

#include <string>

#include <SQLiteCpp/SQLiteCpp.h>

namespace beehive::test {

/// Undoes the migrations above `version` (the file is at the latest, 9).
inline void downgrade_schema(SQLite::Database& db, int version) {
  if (version < 10) db.exec("DROP INDEX objects_collectible");
  if (version < 9) db.exec("DROP INDEX events_by_age");
  if (version < 8) db.exec("DROP INDEX events_by_version");
  if (version < 7) {
    // Schema 7 keeps the store's version in the log's newest entry too; 6 only had the
    // counter.
    db.exec(
        "UPDATE beehive_meta SET value = max(value, (SELECT max(resource_version) FROM "
        "change_log)) WHERE key = 'resource_version'");
    db.exec("DROP TABLE labels");
    db.exec("DROP TABLE change_log");
    db.exec("ALTER TABLE objects DROP COLUMN labels");
    db.exec("DELETE FROM beehive_meta WHERE key = 'change_log_horizon'");
    db.exec("CREATE INDEX objects_by_version ON objects (resource_version)");
  }
  if (version < 6) db.exec("ALTER TABLE conditions DROP COLUMN observed_generation");
  if (version < 5) {
    db.exec("DROP INDEX objects_by_version");
    db.exec("DROP INDEX events_by_run");
  }
  if (version < 4) db.exec("ALTER TABLE objects DROP COLUMN conditions_count");
  if (version < 3) db.exec("DROP INDEX objects_unsettled");
  if (version < 2) db.exec("ALTER TABLE events DROP COLUMN resource_version");
  db.exec("UPDATE beehive_schema SET version = " + std::to_string(version));
}

}  // namespace beehive::test
