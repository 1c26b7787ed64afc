#pragma once

// The SQLite schema and its forward migration.
//
// Run by whoever opens a store, on its own connection and thread (see sqlite_schema.cpp).

#include <cstdint>
#include <functional>

namespace SQLite {
class Database;
}

namespace beehive::store::sqlite_schema {

/// The version this build writes.
int latest_version();

/// Creates or migrates the schema to the latest version inside one transaction and
/// starts a new store session (returned). Throws Error(errc::store) for a file written
/// by a newer schema. `before_migrating(from)` runs, in the transaction, before an
/// existing schema (from >= 1) is migrated; it may throw to refuse.
std::int64_t migrate_and_open_session(SQLite::Database& db,
                                      const std::function<void(int from)>& before_migrating = {});

}  // namespace beehive::store::sqlite_schema
