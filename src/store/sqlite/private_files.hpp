#pragma once

// Files beehive creates are private to the user it runs as, whatever the umask: the
// directories it creates for a database 0700, a new database file 0600 (SQLite then
// creates the -wal and -shm files with the database file's mode). Existing files and
// directories keep their permissions; `exposure` tells whether others can read one.
// They act on the SQLite file and its path, so they live with the SQLite backend.
//
// Called by the thread opening the store; stateless, safe on any thread.

#include <filesystem>
#include <string>

namespace beehive::store {

/// Creates `file`'s missing parent directories (0700 each) and, when `file` does not
/// exist, an empty `file` (0600); through a symlink to no file yet, its target (and the
/// target's missing directories). Throws Error(errc::store) when it cannot.
void create_private(const std::filesystem::path& file);

/// Throws Error(errc::store) unless this process may write `file` (best resolved: the
/// side files are the link target's), its -wal and -shm
/// files where they exist, and its directory where they do not (SQLite makes them
/// there). SQLite would open such a database read-only, and its first read would leave
/// -wal and -shm files behind with the database's mode: later opens kept failing after
/// the mode was put right.
void require_writable(const std::filesystem::path& file);

/// A warning for an operator when the group or others may read `file`; empty otherwise.
std::string exposure(const std::filesystem::path& file);

}  // namespace beehive::store
