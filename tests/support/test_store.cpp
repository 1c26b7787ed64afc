#include "support/test_store.hpp"

#include <libpq-fe.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include <beehive/postgres.hpp>

namespace beehive::test {
namespace {

std::string conninfo() {
  const char* c = std::getenv("BEEHIVE_TEST_PG");
  if (!c || !*c)
    throw std::runtime_error(
        "BEEHIVE_TEST_BACKEND=postgres but BEEHIVE_TEST_PG (the conninfo of the test "
        "database) is not set; run the pg.* tests through ctest, whose postgres fixture "
        "starts a server (scripts/pg-test-server.sh)");
  return c;
}

/// Runs `sql` on its own connection (the stores under test keep theirs). lock_timeout:
/// a store left open by a test would otherwise hang the drop of its schema forever.
void exec(const std::string& sql) {
  PGconn* conn = PQconnectdb(conninfo().c_str());
  std::string error;
  if (PQstatus(conn) != CONNECTION_OK) {
    error = PQerrorMessage(conn);
  } else {
    PGresult* r = PQexec(
        conn, ("SET client_min_messages = warning; SET lock_timeout = '10s'; " + sql).c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK) error = PQresultErrorMessage(r);
    PQclear(r);
  }
  PQfinish(conn);
  if (!error.empty()) throw std::runtime_error(sql + ": " + error);
}

std::string sql_identifier(const std::string& identifier) { return "\"" + identifier + "\""; }

/// Which schema stands for which path, in this process.
struct Registry {
  std::mutex mu;
  std::map<std::string, std::string> schemas;  ///< normalised path -> schema
  int counter = 0;

  ~Registry() {
    // Whatever no TempDir dropped (a path outside one): the server is thrown away at the
    // end of the run anyway, but a long run should not accumulate schemas.
    for (auto& [path, schema] : schemas) try {
        exec("DROP SCHEMA IF EXISTS " + sql_identifier(schema) + " CASCADE");
      } catch (...) {
      }
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string key_of(const std::filesystem::path& p) {
  return std::filesystem::absolute(p).lexically_normal().string();
}

/// The schema for `db_path`, and whether this call named it first.
std::pair<std::string, bool> schema_of(const std::filesystem::path& db_path) {
  auto& r = registry();
  std::lock_guard lk(r.mu);
  auto [it, fresh] = r.schemas.try_emplace(key_of(db_path));
  if (fresh)
    it->second = "bh_test_" + std::to_string(::getpid()) + "_" + std::to_string(++r.counter);
  return {it->second, fresh};
}

}  // namespace

bool test_backend_is_postgres() {
  const char* b = std::getenv("BEEHIVE_TEST_BACKEND");
  if (!b || !*b || std::string_view(b) == "sqlite") return false;
  if (std::string_view(b) == "postgres") return true;
  throw std::runtime_error(std::string("BEEHIVE_TEST_BACKEND=") + b +
                           ": expected sqlite or postgres");
}

std::string test_schema_for(const std::filesystem::path& db_path) {
  if (!test_backend_is_postgres()) return "";
  return schema_of(db_path).first;
}

std::shared_ptr<Store> open_test_store(const std::filesystem::path& db_path,
                                       const sqlite::Options& sqlite_options) {
  if (!test_backend_is_postgres()) return sqlite::open(db_path, sqlite_options);
  auto [schema, fresh] = schema_of(db_path);
  // A pid reused from an earlier run on the same server must not find old data.
  if (fresh) exec("DROP SCHEMA IF EXISTS " + sql_identifier(schema) + " CASCADE");
  return postgres::open(conninfo(), {.schema = schema});
}

namespace {

std::vector<std::vector<std::string>> run_on_test_store(const std::filesystem::path& db_path,
                                                        const std::string& sql, bool writes) {
  std::vector<std::vector<std::string>> rows;
  if (!test_backend_is_postgres()) {
    SQLite::Database db(db_path.string(), writes ? SQLite::OPEN_READWRITE : SQLite::OPEN_READONLY);
    if (writes) {
      db.exec(sql);
      return rows;
    }
    SQLite::Statement q(db, sql);
    while (q.executeStep()) {
      auto& row = rows.emplace_back();
      for (int i = 0; i < q.getColumnCount(); ++i) row.push_back(q.getColumn(i).getString());
    }
    return rows;
  }
  PGconn* conn = PQconnectdb(conninfo().c_str());
  std::string error;
  if (PQstatus(conn) != CONNECTION_OK) {
    error = PQerrorMessage(conn);
  } else {
    PGresult* set =
        PQexec(conn, ("SET search_path TO " + sql_identifier(schema_of(db_path).first)).c_str());
    if (PQresultStatus(set) != PGRES_COMMAND_OK) error = PQresultErrorMessage(set);
    PQclear(set);
    if (error.empty()) {
      PGresult* r = PQexec(conn, sql.c_str());
      const auto status = PQresultStatus(r);
      if (status != PGRES_TUPLES_OK && !(writes && status == PGRES_COMMAND_OK)) {
        error = PQresultErrorMessage(r);
        if (error.empty()) error = "returns no rows (write_test_store runs writes)";
      } else {
        for (int i = 0; i < PQntuples(r); ++i) {
          auto& row = rows.emplace_back();
          for (int j = 0; j < PQnfields(r); ++j) row.emplace_back(PQgetvalue(r, i, j));
        }
      }
      PQclear(r);
    }
  }
  PQfinish(conn);
  if (!error.empty()) throw std::runtime_error(sql + ": " + error);
  return rows;
}

}  // namespace

std::vector<std::vector<std::string>> query_test_store(const std::filesystem::path& db_path,
                                                       const std::string& sql) {
  return run_on_test_store(db_path, sql, false);
}

void write_test_store(const std::filesystem::path& db_path, const std::string& sql) {
  run_on_test_store(db_path, sql, true);
}

void drop_test_schemas_under(const std::filesystem::path& dir) noexcept {
  try {
    if (!test_backend_is_postgres()) return;
    std::vector<std::string> doomed;
    {
      auto& r = registry();
      std::lock_guard lk(r.mu);
      auto prefix = key_of(dir);
      if (!prefix.empty() && prefix.back() != '/') prefix += '/';
      for (auto it = r.schemas.begin(); it != r.schemas.end();) {
        if (it->first.starts_with(prefix)) {
          doomed.push_back(it->second);
          it = r.schemas.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& schema : doomed)
      exec("DROP SCHEMA IF EXISTS " + sql_identifier(schema) + " CASCADE");
  } catch (const std::exception& e) {
    std::cerr << "beehive tests: could not drop a test schema: " << e.what() << "\n";
  }
}

}  // namespace beehive::test
