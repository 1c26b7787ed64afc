// `events KIND[.GROUP] SLUG|ID [--category C]`: an object's event runs, newest first.
// `events ID` (the original form) still works: an id names one object of any kind.

#include <beehive/options.hpp>

#include "commands.hpp"
#include "database.hpp"
#include "failure.hpp"
#include "render.hpp"
#include "selector.hpp"

namespace beehive::ctl {

void check_events_usage(const EventsOptions& o) {
  if (o.object) return check_kind_text(o.kind);
  if (!o.object && !parse_id(o.kind))
    throw UsageError("events takes KIND SLUG|ID, or an object ID alone; \"" + o.kind +
                     "\" alone names no object");
}

int run_events(Database& db, const EventsOptions& o, std::ostream& out) {
  check_events_usage(o);
  Database::Snapshot snapshot(db);
  ObjectID id = 0;
  if (o.object) {
    id = find_object(db, resolve_kind(db, o.kind), *o.object).meta.id;
  } else {
    id = *parse_id(o.kind);
    if (!db.reader().get(id)) throw NotFound("object " + o.kind + " not found");
  }
  detail::EventQuery q;
  q.category = o.category;
  if (o.limit > 0) q.limit = o.limit;
  auto runs = db.reader().list_events(id, q);
  if (o.output == Output::json) {
    Json j = Json::array();
    for (auto& e : runs) j.push_back(event_json(e));
    out << json_output(j) << '\n';
    return 0;
  }
  event_table(runs, std::chrono::system_clock::now()).print(out);
  return 0;
}

}  // namespace beehive::ctl
