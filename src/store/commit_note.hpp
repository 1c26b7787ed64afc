#pragma once

// What a commit tells other processes on the same database (PostgreSQL's NOTIFY
// payload): the session that committed, the resource versions it took, and, when it
// fits, what it changed. A process whose watches stand just before those versions
// publishes the record as it arrives, without reading the change log: the read was most
// of the time between another process's commit and its delivery here. Any other note
// (one it missed, one too large to carry its record, one from an older build) sends it
// to the change log, as before.
//
// The text: "<session> <after> <through>", then, when the record travels, a space, its
// HMAC-SHA256 in hex, a newline and the record as JSON. Anyone who may connect to the
// database may also send a notification on any channel: a record is trusted only when
// signed with the schema's note key, which only roles that may read the schema's tables
// know (pg_schema::Opened). An older build's note is the session alone.
//
// The functions are pure: safe on any thread. A NoteKey is not (see below).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <beehive/commit_record.hpp>

namespace beehive::store {

/// A record that would make a longer note stays behind. Well below PostgreSQL's limit
/// (8000 bytes with its default block size): notes wait in the server's notification
/// queue until every listener has read them, and a longer cap would fill it all the
/// faster behind a stalled one. (The server sends the note without its record when the
/// queue is 5% full, or its block size is smaller: Q::close_transaction.)
inline constexpr std::size_t kMaxCommitNoteBytes = 4000;

struct CommitNote {
  std::int64_t session = 0;
  /// The store's resource version before the commit, and after it: the commit took the
  /// versions in (after, through]. -1 when the note does not say (an older build).
  std::int64_t after = -1;
  std::int64_t through = -1;
  /// What the commit changed, as the committing process published it; absent when it
  /// did not travel.
  std::optional<commit_record> record;
};

/// The schema's note key (pg_schema::Opened), keyed into an HMAC-SHA256 context once:
/// keying costs several times what signing a note does. Empty (default, or when the
/// key is): signs nothing. Not thread-safe: one per thread that signs or checks notes.
class NoteKey {
 public:
  NoteKey();
  explicit NoteKey(std::string_view key);
  ~NoteKey();
  NoteKey(NoteKey&&) noexcept;
  NoteKey& operator=(NoteKey&&) noexcept;

  bool empty() const { return !impl_; }
  /// The signature of a note's header and body, in hex; empty when there is no key.
  std::string sign(std::string_view header, std::string_view body) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The note for a commit of `session` that took the versions in (after, through],
/// signed with `key`. The record is left out when there is none, when there is no key,
/// when the note would be too long, and when it holds what a receiver must read for
/// itself: event runs (read by version, with their own cursor) and liveness conditions
/// (whose status depends on who reads them).
std::string write_commit_note(std::int64_t session, std::int64_t after, std::int64_t through,
                              const commit_record* record, const NoteKey& key);

/// `text` when it carries no record or its record is signed with `key`; otherwise the
/// note without its record (the receiver then reads the change log).
std::string trusted_commit_note(std::string_view text, const NoteKey& key);

/// The committing session, read from the note's start (cheaply: a listener drops its
/// own process's notes with it). nullopt: not a note.
std::optional<std::int64_t> commit_note_session(std::string_view text);

/// The whole note, its signature unchecked (see trusted_commit_note). Never throws: a note
/// that does not read, or whose record holds a version outside (after, through], is one
/// without a record (the receiver reads the change log).
CommitNote read_commit_note(std::string_view text);

}  // namespace beehive::store
