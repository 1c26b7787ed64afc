#pragma once

// A prepared object read (get, get by slug, list, owned objects) on the SQLite C API.
// These run on every read, and SQLiteCpp's column accessors cost a shared_ptr copy per
// column (two atomic operations each, 20-odd per row): as much as a fifth of a point
// read. Everything else keeps using SQLiteCpp.
//
// Not thread-safe: used by the one thread using its Connection at the time.

#include <cstdint>
#include <string_view>

#include <beehive/object_row.hpp>

struct sqlite3;
struct sqlite3_stmt;

namespace beehive::store {

class RowStatement {
 public:
  RowStatement(sqlite3* db, const std::string& sql);
  ~RowStatement();
  RowStatement(const RowStatement&) = delete;
  RowStatement& operator=(const RowStatement&) = delete;

  /// Bindings last until the next reset(); text is not copied (it must outlive the step).
  void bind(int index, std::int64_t value);
  void bind(int index, std::string_view text);
  /// The next row, or false when there is none; throws SQLite::Exception on failure.
  bool step();
  /// Ready to run again; ends the implicit read transaction of the last run.
  void reset();
  /// The current row (the columns of `object_columns`); liveness conditions written
  /// in another session than `session` read as Unknown.
  ObjectRow row(std::int64_t session) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace beehive::store
