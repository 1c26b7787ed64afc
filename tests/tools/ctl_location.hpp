#pragma once

// How beehive-ctl is told where a test's store is: --db FILE, or under PostgreSQL (the
// pg.* run) --pg CONNINFO --schema S, the schema that stands for the file
// (support/test_store.hpp).

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "support/test_store.hpp"

namespace beehive::test {

inline std::vector<std::string> ctl_location(const std::filesystem::path& db_path) {
  if (!test_backend_is_postgres()) return {"--db", db_path.string()};
  return {"--pg", std::getenv("BEEHIVE_TEST_PG"), "--schema", test_schema_for(db_path)};
}

/// beehive-ctl `rest...` on the store of `db_path`.
inline std::vector<std::string> ctl_command(const char* ctl, const std::filesystem::path& db_path,
                                            std::vector<std::string> rest) {
  auto where = ctl_location(db_path);
  rest.insert(rest.begin(), where.begin(), where.end());
  rest.insert(rest.begin(), ctl);
  return rest;
}

/// Whether anything exists where `db_path`'s store would be: the file, or the schema.
inline bool store_exists(const std::filesystem::path& db_path) {
  if (!test_backend_is_postgres()) return std::filesystem::exists(db_path);
  auto rows = query_test_store(db_path, "SELECT count(*) FROM pg_namespace WHERE nspname = '" +
                                            test_schema_for(db_path) + "'");
  return rows.at(0).at(0) != "0";
}

/// What beehive-ctl says of a store that is not there.
inline const char* no_store_message() {
  return test_backend_is_postgres() ? "no beehive store in schema" : "no such database file";
}

}  // namespace beehive::test
