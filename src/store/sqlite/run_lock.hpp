#pragma once

// The claim of a database by one running beehive, across processes: an exclusive
// flock(2) on a sidecar file beside the database (`<db>.beehive-lock`, created 0600).
// The kernel drops it when its holder closes it or dies (SIGKILL included), so a crashed
// beehive never leaves its database claimed. It is never a lock on the database file
// itself: SQLite's own POSIX locks on that file would be broken by closing another
// descriptor of it. flock conflicts between two opens in one process as well.
//
// The holder writes its store session and pid into the file (and empties it on
// release), so that a reader in another process (beehive-ctl) can tell whose liveness
// conditions hold now: those of the session that runs, none when nothing runs.
//
// Taken by the thread starting beehive and held until it stops; a RunLock is immutable.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include <sys/types.h>

namespace beehive::store {

class RunLock {
 public:
  /// Takes the lock for `database`; throws Error(errc::store_in_use) while another
  /// holder has it, Error(errc::store) when the sidecar cannot be opened.
  /// `session`: the store session of the beehive taking it.
  static std::unique_ptr<RunLock> acquire(const std::filesystem::path& database,
                                          std::int64_t session);
  /// The store session of the beehive running on `database`, 0 when none runs; nothing
  /// when that cannot be told (the lock file is not this user's to read, or its holder
  /// did not write its session: a build before this one, under a line a dead process
  /// left). Looks without holding on: the lock is taken shared for
  /// an instant, which acquire waits out.
  static std::optional<std::int64_t> running_session(const std::filesystem::path& database);
  /// Whether a beehive holds the lock of `database` now, whichever build (it may have
  /// written no session); nothing when the lock file cannot be opened (another user's).
  /// Looks as running_session does.
  static std::optional<bool> held(const std::filesystem::path& database);
  /// Whom a lock file made by a process of effective user `euid` is handed to: run as
  /// root, the database's owner (as SQLite hands over its -wal and -shm files, so that
  /// the owner's own later runs can open it); otherwise nobody (it stays the maker's).
  static std::optional<std::pair<uid_t, gid_t>> owner_for(uid_t euid,
                                                          const std::filesystem::path& database);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  explicit RunLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace beehive::store
