// `watch KIND[.GROUP] [--resume-from RV]`: the kind's objects, then a row per change, in
// one table.
//
// Another process cannot subscribe to the application's commits, so watch polls the
// durable change log: each tick, when the store-wide resource version moved, it reads
// the log above the last version printed (Reader::changes_since, folded per object, on
// the read-only connection) and prints a row per object that changed: ADDED, MODIFIED or
// DELETED (with the removed object's final body). No re-listing of the kind per tick.
// A Beehive watch_list with with_resume_from would deliver the same, but needs a
// Beehive over the file, and that opens it writable (sqlite::open creates, migrates and
// holds a writer connection): watch stays a reader, like get and describe.
//
// The objects present at the start are EXISTING; with --resume-from there is no such
// listing, only the changes above that version (watch_too_old when the log no longer
// reaches back that far, watch_too_new when the version was never handed out).

#include <iostream>
#include <map>
#include <stdexcept>

#include <beehive/errors.hpp>

#include "commands.hpp"
#include "database.hpp"
#include "render.hpp"
#include "selector.hpp"
#include "stop_signal.hpp"
#include "terminal_text.hpp"

namespace beehive::ctl {

namespace {

/// What a row shows of an object, kept to print its DELETED row after it is gone.
struct Seen {
  std::int64_t resource_version;
  std::string slug;
  std::int64_t generation;
  std::optional<std::int64_t> observed_generation;
  std::string ready;
  std::optional<Time> deletion_requested_at;
};

Seen seen(const ObjectMeta& m) {
  return {m.resource_version,    slug_cell(m.slug), m.generation,
          m.observed_generation, ready_status(m),   m.deletion_requested_at};
}

std::map<ObjectID, Seen> index(const std::vector<ObjectRow>& rows) {
  std::map<ObjectID, Seen> out;
  for (auto& r : rows) out[r.meta.id] = seen(r.meta);
  return out;
}

const char* event_name(ChangeType t) {
  switch (t) {
    case ChangeType::Added:
      return "ADDED";
    case ChangeType::Deleted:
      return "DELETED";
    default:
      return "MODIFIED";
  }
}

/// The log above `rv`; throws watch_too_old once it no longer reaches back that far.
store::ChangeLogRead read_log(Database& db, const GroupKind& gk, std::int64_t rv) {
  auto log = db.reader().changes_since(rv, gk, std::nullopt, {});
  if (rv < log.horizon)
    throw Error(errc::watch_too_old, "resource version " + std::to_string(rv) +
                                         " is older than the change log keeps (it starts after " +
                                         std::to_string(log.horizon) + ")");
  return log;
}

std::vector<std::string> cells(const char* event, ObjectID id, const Seen& s, Time now) {
  return {event,
          std::to_string(id),
          s.slug,
          std::to_string(s.generation),
          s.observed_generation ? std::to_string(*s.observed_generation) : "-",
          s.ready,
          s.deletion_requested_at ? age(*s.deletion_requested_at, now) : "-",
          std::to_string(s.resource_version)};
}

/// Widths for values of the usual size, so that later rows line up with the first ones
/// (EVENT fits MODIFIED and EXISTING, READY fits Unknown); the header and the objects
/// present at the start widen them.
StreamTable watch_table() {
  return StreamTable(
      {"EVENT", "ID", "SLUG", "GENERATION", "OBSERVED", "READY", "DELETING", "RESOURCE-VERSION"},
      {8, 6, 16, 10, 8, 7, 8, 0});
}

}  // namespace

int run_watch(Database& db, const WatchOptions& o, std::ostream& out) {
  // Before anything is printed: a test (or a person) that saw output may signal.
  install_stop_handlers();
  if (auto why = db.cannot_follow(); !why.empty()) throw std::runtime_error(why);
  auto gk = resolve_kind(db, o.kind, /*allow_absent=*/true);
  auto started = std::chrono::steady_clock::now();
  auto table = watch_table();

  std::int64_t version = 0;
  if (o.resume_from) {
    version = *o.resume_from;
    auto log = read_log(db, gk, version);
    if (version < 0 || version > log.head)
      throw Error(errc::watch_too_new, "resource version " + std::to_string(version) +
                                           " is above the store's " + std::to_string(log.head));
    table.print_header(out);
  } else {
    auto existing = index(db.reader().snapshot(gk, std::nullopt, nullptr, version));
    auto now = std::chrono::system_clock::now();
    for (auto& [id, s] : existing) table.fit(cells("EXISTING", id, s, now));
    table.print_header(out);
    for (auto& [id, s] : existing) {
      table.print_row(out, cells("EXISTING", id, s, now));
      if (stop_requested()) return 0;  // after the row in progress
    }
  }

  int changes = 0;
  bool first = o.resume_from.has_value();  // a resumed watch reads the log at once
  // Output that cannot be written (a full disk; a closed pipe, SIGPIPE ignored) ends the
  // watch: main reports it and exits 1.
  while (!stop_requested() && out) {
    if (!first) {
      auto wait = o.interval;
      if (o.for_) {
        // Not `started + for_`, which overflows for a --for of centuries.
        auto left = *o.for_ - std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - started);
        if (left <= std::chrono::milliseconds::zero()) break;
        wait = std::min(wait, left);
      }
      sleep_unless_stopped(wait);
      if (stop_requested()) break;
    }
    store::ChangeLogRead log;
    try {
      // One cheap query when nothing was committed anywhere.
      if (!first && db.resource_version() == version) continue;
      db.refresh_liveness();  // the application may have started or stopped meanwhile
      log = read_log(db, gk, version);
    } catch (const Error& e) {
      // The database failed (a PostgreSQL connection lost to a restart or a network
      // blip, SQLite busy past its timeout): a watch outlives it, reading again at the
      // next interval (a lost connection is made again then).
      if (e.code() != make_error_code(errc::store)) throw;
      std::cerr << "beehive-ctl: " << printable(e.what(), true) << " (retrying)" << std::endl;
      first = false;
      continue;
    }
    first = false;
    for (auto& c : log.changes) {
      if (!c.row) continue;  // only a requeue was logged: the object did not change
      // Created and removed above the version read from: never shown, so no DELETED row
      // for it either (as the library's watches).
      if (c.type == ChangeType::Deleted && (c.parts & object_change::created)) continue;
      table.print_row(out, cells(event_name(c.type), c.ref.id, seen(c.row->meta),
                                 std::chrono::system_clock::now()));
      if (!out || stop_requested()) return 0;
      if (o.max_changes && ++changes >= *o.max_changes) return 0;
    }
    version = std::max(version, log.head);
  }
  return 0;
}

}  // namespace beehive::ctl
