// A prepared object read on the SQLite C API, and the decoding of its row (the columns
// sqlite_queries.cpp selects) into an ObjectRow; see row_statement.hpp for why it
// bypasses SQLiteCpp.
//
// Runs on the thread using the statement's connection; not thread-safe.

#include "store/sqlite/row_statement.hpp"

#include <optional>
#include <string>

#include <SQLiteCpp/Exception.h>
#include <sqlite3.h>
#include <nlohmann/json.hpp>

#include <beehive/time.hpp>

#include "store/row_json.hpp"

namespace beehive::store {

namespace {

std::string text(sqlite3_stmt* s, int i) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s, i))) : std::string();
}

bool is_null(sqlite3_stmt* s, int i) { return sqlite3_column_type(s, i) == SQLITE_NULL; }

std::optional<std::int64_t> opt_int(sqlite3_stmt* s, int i) {
  if (is_null(s, i)) return std::nullopt;
  return sqlite3_column_int64(s, i);
}

std::optional<Time> opt_time(sqlite3_stmt* s, int i) {
  if (is_null(s, i)) return std::nullopt;
  return from_millis(sqlite3_column_int64(s, i));
}

}  // namespace

RowStatement::RowStatement(sqlite3* db, const std::string& sql) : db_(db) {
  int rc = sqlite3_prepare_v3(db, sql.c_str(), static_cast<int>(sql.size()) + 1,
                              SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  if (rc != SQLITE_OK) throw SQLite::Exception(db, rc);
}

RowStatement::~RowStatement() { sqlite3_finalize(stmt_); }

void RowStatement::bind(int index, std::int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) throw SQLite::Exception(db_, rc);
}

void RowStatement::bind(int index, std::string_view value) {
  // An empty view may have no data at all, which SQLite would bind as NULL: the empty
  // slug is a real value, distinct from none.
  const char* text = value.data() ? value.data() : "";
  int rc = sqlite3_bind_text(stmt_, index, text, static_cast<int>(value.size()), SQLITE_STATIC);
  if (rc != SQLITE_OK) throw SQLite::Exception(db_, rc);
}

bool RowStatement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw SQLite::Exception(db_, rc);
}

void RowStatement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

ObjectRow RowStatement::row(std::int64_t session) const {
  auto* s = stmt_;
  ObjectRow r;
  auto& m = r.meta;
  m.id = sqlite3_column_int64(s, 0);
  m.group = text(s, 1);
  m.kind = text(s, 2);
  if (!is_null(s, 3)) m.slug = text(s, 3);
  r.spec = text(s, 4);
  r.spec_version = sqlite3_column_int(s, 5);
  if (!is_null(s, 6)) r.status = text(s, 6);
  r.status_version = sqlite3_column_int(s, 7);
  m.generation = sqlite3_column_int64(s, 8);
  m.observed_generation = opt_int(s, 9);
  m.observed_at = opt_time(s, 10);
  m.resource_version = sqlite3_column_int64(s, 11);
  m.deletion_requested_at = opt_time(s, 12);
  auto finalizers = text(s, 13);
  if (finalizers != "[]")
    m.finalizers = nlohmann::json::parse(finalizers).get<std::vector<std::string>>();
  m.created_at = from_millis(sqlite3_column_int64(s, 14));
  m.updated_at = from_millis(sqlite3_column_int64(s, 15));
  if (!is_null(s, 16))
    m.labels = nlohmann::json::parse(text(s, 16)).get<std::map<std::string, std::string>>();
  m.conditions = stored_conditions(text(s, 17), session);
  return r;
}

}  // namespace beehive::store
