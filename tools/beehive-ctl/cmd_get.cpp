// `get KIND[.GROUP] [SLUG|ID]`: a table of objects, or the objects as JSON.

#include <beehive/options.hpp>

#include "commands.hpp"
#include "database.hpp"
#include "render.hpp"
#include "selector.hpp"

namespace beehive::ctl {

int run_get(Database& db, const GetOptions& o, std::ostream& out) {
  Database::Snapshot snapshot(db);
  auto gk = resolve_kind(db, o.kind);
  // JSON carries the edges too; the table has no column for them.
  unsigned loads = o.output == Output::json
                       ? LoadOption::owner | LoadOption::dependencies | LoadOption::dependents
                       : 0;
  std::vector<ObjectRow> rows;
  if (o.object)
    rows.push_back(find_object(db, gk, *o.object, loads));
  else
    rows = db.connection().list(gk, loads);

  if (o.output == Output::json) {
    Json all = Json::array();
    for (auto& r : rows) all.push_back(object_json(r, db.conditions(r.meta.id)));
    // One object asked for by name is printed bare, a listing as an array.
    out << (o.object ? all.front() : all).dump(2) << '\n';
    return 0;
  }
  auto now = std::chrono::system_clock::now();
  auto t = object_table();
  for (auto& r : rows) add_object_row(t, r, now);
  t.print(out);
  return 0;
}

}  // namespace beehive::ctl
