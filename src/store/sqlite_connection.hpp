#pragma once

// One SQLite connection with its prepared statements, and the row reads shared by the
// read-only connections and the write connection.

#include <array>
#include <filesystem>
#include <memory>
#include <optional>

#include <SQLiteCpp/SQLiteCpp.h>

#include <beehive/sqlite.hpp>

#include "store/backend.hpp"

namespace beehive::store {

enum class Query : int {
  get,
  get_by_slug,
  list,
  next_resource_version,
  insert_object,
  update_spec,
  request_deletion,
  count_,  // not a query
};

class Connection {
 public:
  Connection(const std::filesystem::path& file, bool read_only, const sqlite::Options& opts,
             std::int64_t session);

  /// The prepared statement for `q`, reset and unbound when the returned guard dies so
  /// that no read snapshot outlives its use.
  class Use {
   public:
    explicit Use(SQLite::Statement& s) : s_(s) {}
    ~Use() {
      s_.tryReset();
      s_.clearBindings();
    }
    SQLite::Statement* operator->() { return &s_; }
    SQLite::Statement& operator*() { return s_; }

   private:
    SQLite::Statement& s_;
  };
  Use use(Query q);

  std::optional<ObjectRow> get(ObjectID id);
  std::optional<ObjectRow> get_by_slug(const GroupKind& gk, std::string_view slug);
  std::vector<ObjectRow> list(const GroupKind& gk);

  SQLite::Database& db() { return db_; }

 private:
  ObjectRow read_row(SQLite::Statement& s) const;

  SQLite::Database db_;
  std::int64_t session_;
  std::array<std::unique_ptr<SQLite::Statement>, static_cast<int>(Query::count_)> stmts_;
};

/// Runs `fn`, turning SQLite failures into Error(errc::store) with SQLite's message.
template <class Fn>
auto guarded(Fn&& fn) -> decltype(fn());

[[noreturn]] void rethrow_sqlite(const SQLite::Exception& e);

template <class Fn>
auto guarded(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const SQLite::Exception& e) {
    rethrow_sqlite(e);
  }
}

}  // namespace beehive::store
