// The flock(2) on `<db>.beehive-lock` that claims a database for one running beehive
// (see run_lock.hpp).
//
// acquire() runs on the thread starting beehive; a RunLock is only closed after that.

#include "store/sqlite/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <beehive/errors.hpp>

namespace beehive::store {

std::unique_ptr<RunLock> RunLock::acquire(const std::filesystem::path& database) {
  auto path = database;
  path += ".beehive-lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    throw Error(errc::store,
                "cannot open the lock file " + path.string() + ": " + std::strerror(errno));
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK)
      throw Error(errc::store_in_use, database.string() + " is used by another running beehive (" +
                                          path.string() + " is locked)");
    throw Error(errc::store, "cannot lock " + path.string() + ": " + std::strerror(err));
  }
  return std::unique_ptr<RunLock>(new RunLock(fd));
}

RunLock::~RunLock() { ::close(fd_); }

}  // namespace beehive::store
