#pragma once

// The PostgreSQL schema, as migrations applied in order when a store is opened.
//
// Runs on the thread opening the store, on the connection it passes.

#include <chrono>
#include <cstdint>
#include <string>

#include "store/postgres/pg_connection.hpp"

namespace beehive::store::pg_schema {

/// The schema version this build writes.
int latest_version();

/// What opening the schema gives a store.
struct Opened {
  std::int64_t session = 0;
  /// The key commit notes are signed with (commit_note.hpp), 32 bytes: made at random by
  /// the first process to open the schema, kept in beehive_meta, so that only roles that
  /// may read the schema's tables can sign a note other processes trust.
  std::string note_key;
};

/// Creates the schema (the PostgreSQL schema named by the connection included) or
/// migrates it to latest_version() in one transaction, serialised with every other
/// process opening it; starts the store's new session. Throws errc::store for a schema
/// newer than this build's. The server ends the transaction once it sits idle for
/// `idle_limit` (a process paused or cut off mid-open holds every other process's
/// opens and writes up that long at most).
Opened migrate_and_open_session(pg::Connection& c, std::chrono::milliseconds idle_limit);

/// The channel commits are notified on: "beehive_" and the schema name, clipped to the
/// 63 bytes PostgreSQL keeps of a name, at a character boundary (a name cut inside a
/// UTF-8 character is text the server refuses).
std::string notify_channel(const std::string& schema);

}  // namespace beehive::store::pg_schema
