#pragma once

/// The SQLite store: one database file in WAL mode, one write connection (owned by the
/// beehive's store_writer actor) and a pool of read-only connections that readers use
/// on their own threads, so reads never wait for the writer.
///
/// `open` creates the file and its parent directory when missing and migrates an older
/// schema forward; a file written by a newer schema is refused (`errc::store`), and so
/// is an older one while a beehive (of the older build) runs on it (`errc::store_in_use`:
/// migrating it would stop that one from writing). Through a symlink to no file yet, the
/// link's target is created. Failures throw `Error(errc::store)` with SQLite's message.
///
/// `open` may be called from any thread; the returned store is thread-safe.

#include <chrono>
#include <filesystem>
#include <memory>

#include <beehive/store.hpp>

namespace beehive::sqlite {

/// PRAGMA synchronous in WAL mode. `normal` survives an application crash but may lose
/// the last transactions on power loss; `full` survives both and costs an fsync per
/// commit.
enum class Synchronous { normal, full };

struct Options {
  /// Default: normal.
  Synchronous synchronous = Synchronous::normal;
  /// Read-only connections kept for readers; a reader waits when all are busy.
  /// Default: 4; values below 1 mean 1.
  int read_connections = 4;
  /// How long a connection waits for a lock held by another process. Default: 5 s.
  /// A write waits no longer than its caller's context either: when that ends first
  /// the call throws deadline_exceeded (or cancelled) and nothing of it is written;
  /// past the busy timeout it throws `errc::store` ("database is locked"). 0 to
  /// 2 147 483 647 ms (SQLite's limit, about 24.8 days); outside that, `open` throws
  /// `errc::invalid_argument`.
  std::chrono::milliseconds busy_timeout{5000};
};

std::shared_ptr<Store> open(const std::filesystem::path& file, Options options = {});

}  // namespace beehive::sqlite
