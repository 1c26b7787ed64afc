#pragma once

// The store the tests run on, from one place: SQLite by default, or PostgreSQL when the
// environment says so (CTest's pg.* tests set it; see the tests section of
// CMakeLists.txt):
//
//   BEEHIVE_TEST_BACKEND=postgres   (unset or "sqlite": SQLite)
//   BEEHIVE_TEST_PG=<libpq conninfo of a database the tests may create schemas in>
//
// Under PostgreSQL each database path a test names stands for a schema of its own, so a
// test that closes and reopens "its file" reopens the same data, and two paths are two
// independent stores. The schemas go when the TempDir holding the paths goes.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <beehive/sqlite.hpp>
#include <beehive/store.hpp>

namespace beehive::test {

/// Whether the tests run on PostgreSQL (BEEHIVE_TEST_BACKEND=postgres). Any value other
/// than "postgres", "sqlite" or none is refused (std::runtime_error): a typo must not
/// quietly run the SQLite suite again.
bool test_backend_is_postgres();

/// Opens the test store for `db_path`: sqlite::open(db_path, sqlite_options), or under
/// PostgreSQL the schema that stands for `db_path` (created fresh the first time this
/// process names the path; `sqlite_options` do not apply there).
std::shared_ptr<Store> open_test_store(const std::filesystem::path& db_path,
                                       const sqlite::Options& sqlite_options = {});

/// The PostgreSQL schema that stands for `db_path` in this process ("" under SQLite).
/// Unique across processes: it carries the pid.
std::string test_schema_for(const std::filesystem::path& db_path);

/// The rows `sql` (a read-only query) returns from the store's tables, as text (NULL:
/// ""): with SQLite on the file `db_path`, with PostgreSQL in the schema that stands for
/// it (search_path). For checks of what is stored that the API does not show; they
/// assume the PostgreSQL backend names its tables and columns as the SQLite one does.
std::vector<std::vector<std::string>> query_test_store(const std::filesystem::path& db_path,
                                                       const std::string& sql);

/// Runs `sql` (statements that write, separated by ';') on the store's tables, as
/// query_test_store reads them: for rows a test plants or removes behind the API's back.
void write_test_store(const std::filesystem::path& db_path, const std::string& sql);

/// Drops the schemas of every path under `dir` (TempDir's destructor calls it; a no-op
/// under SQLite). Never throws: a failed drop is reported on stderr.
void drop_test_schemas_under(const std::filesystem::path& dir) noexcept;

}  // namespace beehive::test
