#pragma once

// Fault injection for tests: a SQLite VFS shim over the default VFS that fails file
// operations on demand, so that tests can show what a failing disk does to a beehive
// (errors carry SQLite's message, nothing is half-written, the beehive keeps serving).
//
// Test-only: built into the beehive_test_support library, which only the tests link (the
// shipped library opens every file through SQLite's default VFS, whatever that is). A
// `FaultVfs` scope makes the shim SQLite's default VFS, so every connection opened while
// it lives (the store's anchor, writer and read connections alike) goes through it
// without the store knowing; with no rule armed it passes every call through unchanged.
// Its end restores the previous default; connections opened meanwhile keep using the
// (then inert) shim.

#include <cstdint>
#include <optional>
#include <thread>

namespace beehive::test::fault {

/// The file operations a rule can fail.
enum class Op { open, read, write, sync, truncate };

/// Which files a rule applies to (bits), by what SQLite opens them as.
namespace files {
constexpr unsigned main_db = 1;  ///< the database file itself
constexpr unsigned wal = 2;      ///< its -wal file
constexpr unsigned journal = 4;  ///< a rollback journal
constexpr unsigned other = 8;    ///< temporary files, sub-journals
constexpr unsigned any = 15;
}  // namespace files

/// Which threads a rule applies to: a read connection runs on its caller's thread, the
/// write connection on the store writer's, so this is how a test aims at either.
enum class Threads { any, this_one, others };

struct Rule {
  Op op = Op::write;
  unsigned files = files::any;
  Threads threads = Threads::any;
  /// Matching calls let through before the rule fires.
  int skip = 0;
  /// Matching calls failed once it fires; negative: until cleared.
  int count = 1;
  /// The SQLite result code returned (SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN, ...);
  /// 0 picks the usual one for the operation (SQLITE_IOERR_READ for a read, ...).
  int code = 0;
  /// The file handle that fails stays broken: every later read, write and sync on it
  /// fails too, as a connection whose file went bad. Only a new handle works.
  bool poison = false;
};

/// While alive, the shim is SQLite's default VFS. One at a time.
class FaultVfs {
 public:
  FaultVfs();
  ~FaultVfs();
  FaultVfs(const FaultVfs&) = delete;
  FaultVfs& operator=(const FaultVfs&) = delete;

  /// Adds a rule (rules are independent; each counts its own matching calls). A rule
  /// with Threads::this_one applies to the calling thread.
  void arm(const Rule& r);
  /// Removes every rule and the free-space limit; poisoned handles stay broken.
  void clear();

  /// Simulates a full disk: writes that would grow the files beyond `bytes` more than
  /// they are now fail with SQLITE_FULL (as ENOSPC does); overwrites in place succeed.
  /// nullopt lifts the limit.
  void set_free_space(std::optional<std::int64_t> bytes);

  /// Faults injected so far by this scope (each failed call counts one).
  int injected() const;
  /// Calls of `op` seen so far by this scope (passed through or failed).
  int calls(Op op) const;
};

}  // namespace beehive::test::fault
