// Creating a database's file and directories private to the user (see
// private_files.hpp), and the warning when an existing one is not.
//
// Runs on the thread opening the store; stateless, safe on any thread.

#include "store/sqlite/private_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include <beehive/errors.hpp>

namespace beehive::store {

namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& p, int err) {
  throw Error(errc::store, what + " " + p.string() + ": " + std::strerror(err));
}

}  // namespace

namespace {

void create_following(const std::filesystem::path& file, int links_followed) {
  // The missing directories, outermost first: mkdir's mode is cut by the umask, so each
  // is set to 0700 explicitly once it exists (only those created here).
  std::vector<std::filesystem::path> missing;
  // Without throwing: a directory that cannot be searched reads as missing, and its
  // mkdir below says why (errc::store).
  std::error_code ec;
  for (auto dir = file.parent_path(); !dir.empty() && !std::filesystem::exists(dir, ec);
       dir = dir.parent_path()) {
    missing.push_back(dir);
    if (dir == dir.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0700) != 0 && errno != EEXIST) fail("cannot create", *it, errno);
    if (::chmod(it->c_str(), 0700) != 0) fail("cannot set the mode of", *it, errno);
  }
  int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    struct stat st {};
    // A symlink to no file yet: O_EXCL refuses to follow it, and SQLite would create
    // the target with the umask's mode. Its target is created here instead.
    if (err == EEXIST && ::lstat(file.c_str(), &st) == 0 && S_ISLNK(st.st_mode) &&
        ::stat(file.c_str(), &st) != 0 && errno == ENOENT) {
      if (links_followed >= 40) fail("cannot create", file, ELOOP);
      std::error_code link_ec;
      auto target = std::filesystem::read_symlink(file, link_ec);
      if (link_ec) fail("cannot read the symlink", file, link_ec.value());
      return create_following(target.is_absolute() ? target : file.parent_path() / target,
                              links_followed + 1);
    }
    if (err == EEXIST) return;  // an existing database keeps its permissions
    fail("cannot create", file, err);
  }
  ::fchmod(fd, 0600);  // 0600 already unless the umask took bits the owner needs
  ::close(fd);
}

}  // namespace

void create_private(const std::filesystem::path& file) { create_following(file, 0); }

void require_writable(const std::filesystem::path& file) {
  auto writable = [](const std::filesystem::path& p, int mode) {
    return ::faccessat(AT_FDCWD, p.c_str(), mode, AT_EACCESS) == 0;
  };
  if (!writable(file, R_OK | W_OK)) fail("cannot open for writing", file, errno);
  bool side_files = true;
  for (const char* suffix : {"-wal", "-shm"}) {
    auto side = file;
    side += suffix;
    struct stat st {};
    if (::stat(side.c_str(), &st) != 0) {
      side_files = false;
      continue;
    }
    if (!writable(side, R_OK | W_OK))
      throw Error(errc::store, "cannot open for writing " + side.string() + ": " +
                                   std::strerror(errno) +
                                   " (left by a run that could not write the database? remove "
                                   "it while nothing runs on the database)");
  }
  auto dir = file.parent_path();
  if (dir.empty()) dir = ".";  // a bare file name: the working directory
  if (!side_files && !writable(dir, W_OK | X_OK))
    throw Error(errc::store, "cannot create files in " + dir.string() + ": " +
                                 std::strerror(errno) +
                                 " (SQLite keeps its -wal and -shm files "
                                 "beside " +
                                 file.filename().string() + ")");
}

std::string exposure(const std::filesystem::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return {};
  if ((st.st_mode & (S_IRGRP | S_IROTH)) == 0) return {};
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return file.string() + " is readable by " +
         ((st.st_mode & S_IROTH) ? "every user" : "its group") + " (mode " + mode +
         "): its specs and statuses may hold secrets; chmod 600 it";
}

}  // namespace beehive::store
