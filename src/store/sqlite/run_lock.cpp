// The flock(2) on `<db>.beehive-lock` that claims a database for one running beehive
// (see run_lock.hpp).
//
// acquire() runs on the thread starting beehive; a RunLock is only closed after that.

#include "store/sqlite/run_lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <thread>

#include <beehive/errors.hpp>

namespace beehive::store {

namespace {

std::filesystem::path lock_file(const std::filesystem::path& database) {
  auto path = database;
  path += ".beehive-lock";
  return path;
}

int try_flock(int fd, int how) {
  int rc;
  do {
    rc = ::flock(fd, how | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  return rc == 0 ? 0 : errno;
}

}  // namespace

std::unique_ptr<RunLock> RunLock::acquire(const std::filesystem::path& database,
                                          std::int64_t session) {
  auto path = lock_file(database);
  // Never through a symlink: a run as root would truncate (and hand over) its target.
  // Made here, run as root, the file goes to the database's owner, as SQLite does with
  // its -wal and -shm files: else the owner's own later runs could not open it.
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 3; ++tries) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      if (auto owner = owner_for(::geteuid(), database);
          owner && ::fchown(fd, owner->first, owner->second) != 0) {
        // The owner's later runs cannot open it (and say so); this run can.
      }
      break;
    }
    if (errno != EEXIST) break;
    fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT) break;  // removed in between: made again
  }
  if (fd < 0) {
    int err = errno;
    throw Error(errc::store, "cannot open the lock file " + path.string() + ": " +
                                 std::strerror(err) +
                                 (err == EACCES ? " (made by another user, a run as root? remove "
                                                  "it while no beehive runs on the database)"
                                                : ""));
  }
  // A reader looking (running_session) holds it shared for an instant: a holder holds it
  // for good. 20 tries over 100 ms tell them apart.
  int err = try_flock(fd, LOCK_EX);
  for (int i = 0; err == EWOULDBLOCK && i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    err = try_flock(fd, LOCK_EX);
  }
  if (err != 0) {
    ::close(fd);
    if (err == EWOULDBLOCK)
      throw Error(errc::store_in_use, database.string() + " is used by another running beehive (" +
                                          path.string() + " is locked)");
    throw Error(errc::store, "cannot lock " + path.string() + ": " + std::strerror(err));
  }
  // The pid tells a reader whether the holder wrote it: a build before this one writes
  // nothing, and a crashed holder leaves its line behind.
  auto text = std::to_string(session) + ' ' + std::to_string(::getpid()) + '\n';
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    // Not worth failing the start for: readers then fall back to the latest session.
  }
  return std::unique_ptr<RunLock>(new RunLock(fd));
}

std::optional<std::pair<uid_t, gid_t>> RunLock::owner_for(uid_t euid,
                                                          const std::filesystem::path& database) {
  struct stat db {};
  if (euid != 0 || ::stat(database.c_str(), &db) != 0) return std::nullopt;
  return std::pair(db.st_uid, db.st_gid);
}

std::optional<std::int64_t> RunLock::running_session(const std::filesystem::path& database) {
  int fd = ::open(lock_file(database).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? std::optional<std::int64_t>(0) : std::nullopt;
  int err = try_flock(fd, LOCK_SH);
  if (err == 0) {  // nobody holds it: nothing runs
    ::close(fd);
    return 0;
  }
  std::optional<std::int64_t> session;
  if (err == EWOULDBLOCK) {
    char buf[64] = {};
    auto n = ::pread(fd, buf, sizeof buf - 1, 0);
    const char* last = buf + std::max<ssize_t>(n, 0);
    std::int64_t value = 0;
    pid_t pid = 0;
    auto [end, ec] = std::from_chars(buf, last, value);
    if (ec == std::errc() && end < last && *end == ' ') {
      auto [pid_end, pid_ec] = std::from_chars(end + 1, last, pid);
      bool holder_wrote = pid_ec == std::errc() && pid_end < last && *pid_end == '\n' && pid > 0 &&
                          (::kill(pid, 0) == 0 || errno == EPERM);
      if (holder_wrote && value > 0) session = value;
    }
  }
  ::close(fd);
  return session;
}

std::optional<bool> RunLock::held(const std::filesystem::path& database) {
  int fd = ::open(lock_file(database).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? std::optional<bool>(false) : std::nullopt;
  int err = try_flock(fd, LOCK_SH);
  ::close(fd);  // releases the shared lock, if taken
  if (err == 0) return false;
  return err == EWOULDBLOCK ? std::optional<bool>(true) : std::nullopt;
}

RunLock::~RunLock() {
  // Still locked: nobody reads a session that no longer runs.
  if (::ftruncate(fd_, 0) != 0) {
    // the next holder's line replaces it; a reader meanwhile finds the lock free
  }
  ::close(fd_);
}

}  // namespace beehive::store
