// The fault test's foreign process: holds a database's write lock until told to let go,
// as another program sharing the file would. Usage: lock_holder <db>.
// Prints "locked" once it holds the lock (BEGIN IMMEDIATE plus a write), then waits for
// a line on stdin, commits, prints "released" and exits 0. Any failure: exit 2.

#include <sqlite3.h>

#include <cstdio>
#include <iostream>
#include <string>

namespace {

[[noreturn]] void fail(sqlite3* db, const char* what) {
  std::fprintf(stderr, "lock_holder: %s: %s\n", what, db ? sqlite3_errmsg(db) : "");
  std::fflush(stderr);
  std::_Exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: lock_holder <db>\n");
    return 2;
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) fail(db, "open");
  sqlite3_busy_timeout(db, 5000);  // the beehive may be committing right now
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK)
    fail(db, "begin");
  // A real write (that changes nothing): the beehive's connections see a foreign commit.
  if (sqlite3_exec(db, "UPDATE beehive_meta SET value = value + 1 WHERE key = 'resource_version'",
                   nullptr, nullptr, nullptr) != SQLITE_OK)
    fail(db, "write");
  std::cout << "locked" << std::endl;
  std::string line;
  std::getline(std::cin, line);
  if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) fail(db, "commit");
  sqlite3_close(db);
  std::cout << "released" << std::endl;
  return 0;
}
