// `watch KIND[.GROUP]`: the kind's objects, then a row per change, in one table.
//
// Another process cannot subscribe to the application's commits, so watch polls: the
// store-wide resource version moves with every commit (removals included), and only
// when it moved is the kind re-read and compared with what was printed last. Rows that
// vanished are DELETED, new ones ADDED, ones whose resource version moved MODIFIED; the
// objects present at the start are EXISTING.

#include <iostream>
#include <map>

#include "commands.hpp"
#include "database.hpp"
#include "render.hpp"
#include "selector.hpp"
#include "stop_signal.hpp"

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

std::map<ObjectID, Seen> index(const std::vector<ObjectRow>& rows) {
  std::map<ObjectID, Seen> out;
  for (auto& r : rows) {
    auto& m = r.meta;
    out[m.id] = {m.resource_version, m.slug ? *m.slug : "<none>",
                 m.generation,       m.observed_generation,
                 ready_status(m),    m.deletion_requested_at};
  }
  return out;
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
  auto gk = resolve_kind(db, o.kind, /*allow_absent=*/true);
  auto started = std::chrono::steady_clock::now();
  auto& conn = db.connection();

  std::int64_t version = 0;
  auto seen = index(conn.snapshot(gk, std::nullopt, version));
  auto table = watch_table();
  auto now = std::chrono::system_clock::now();
  for (auto& [id, s] : seen) table.fit(cells("EXISTING", id, s, now));
  table.print_header(out);
  for (auto& [id, s] : seen) table.print_row(out, cells("EXISTING", id, s, now));

  int changes = 0;
  auto emit = [&](const char* event, ObjectID id, const Seen& s) {
    table.print_row(out, cells(event, id, s, std::chrono::system_clock::now()));
    return o.max_changes && ++changes >= *o.max_changes;
  };

  while (!stop_requested()) {
    auto wait = o.interval;
    if (o.for_) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          started + *o.for_ - std::chrono::steady_clock::now());
      if (left <= std::chrono::milliseconds::zero()) break;
      wait = std::min(wait, left);
    }
    sleep_unless_stopped(wait);
    if (stop_requested()) break;
    if (db.resource_version() == version) continue;

    auto current = index(conn.snapshot(gk, std::nullopt, version));
    bool done = false;
    for (auto& [id, s] : seen)
      if (!done && !current.count(id)) done = emit("DELETED", id, s);
    for (auto& [id, s] : current) {
      if (done) break;
      auto it = seen.find(id);
      if (it == seen.end())
        done = emit("ADDED", id, s);
      else if (it->second.resource_version != s.resource_version)
        done = emit("MODIFIED", id, s);
    }
    seen = std::move(current);
    if (done) break;
  }
  return 0;
}

}  // namespace beehive::ctl
