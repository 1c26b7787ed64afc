// `watch KIND[.GROUP]`: the kind's objects, then a line per change.
//
// Another process cannot subscribe to the application's commits, so watch polls: the
// store-wide resource version moves with every commit (removals included), and only
// when it moved is the kind re-read and compared with what was printed last. Rows that
// vanished are DELETED, new ones ADDED, ones whose resource version moved MODIFIED.

#include <iostream>
#include <map>

#include "commands.hpp"
#include "database.hpp"
#include "render.hpp"
#include "selector.hpp"
#include "stop_signal.hpp"

namespace beehive::ctl {

namespace {

struct Seen {
  std::int64_t resource_version;
  std::string slug;
  std::int64_t generation;
};

std::map<ObjectID, Seen> index(const std::vector<ObjectRow>& rows) {
  std::map<ObjectID, Seen> out;
  for (auto& r : rows)
    out[r.meta.id] = {r.meta.resource_version, r.meta.slug ? *r.meta.slug : "<none>",
                      r.meta.generation};
  return out;
}

}  // namespace

int run_watch(Database& db, const WatchOptions& o, std::ostream& out) {
  // Before anything is printed: a test (or a person) that saw output may signal.
  install_stop_handlers();
  auto gk = resolve_kind(db, o.kind, /*allow_absent=*/true);
  auto started = std::chrono::steady_clock::now();
  auto& conn = db.connection();

  std::int64_t version = 0;
  auto rows = conn.snapshot(gk, std::nullopt, version);
  auto table = object_table();
  auto now = std::chrono::system_clock::now();
  for (auto& r : rows) add_object_row(table, r, now);
  table.print(out);
  out.flush();
  auto seen = index(rows);

  int changes = 0;
  auto emit = [&](const char* type, ObjectID id, const Seen& s) {
    out << type << std::string(10 - std::char_traits<char>::length(type), ' ') << id << "  "
        << s.slug << "  " << s.generation << std::endl;
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
