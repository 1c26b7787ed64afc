// `events ID [--category C]`: an object's event runs, newest first.

#include <beehive/options.hpp>

#include "commands.hpp"
#include "database.hpp"
#include "failure.hpp"
#include "render.hpp"

namespace beehive::ctl {

int run_events(Database& db, const EventsOptions& o, std::ostream& out) {
  Database::Snapshot snapshot(db);
  if (!db.connection().get(o.id)) throw NotFound("object " + std::to_string(o.id) + " not found");
  detail::EventQuery q;
  q.category = o.category;
  if (o.limit > 0) q.limit = o.limit;
  auto runs = db.connection().list_events(o.id, q);
  if (o.output == Output::json) {
    Json j = Json::array();
    for (auto& e : runs) j.push_back(event_json(e));
    out << j.dump(2) << '\n';
    return 0;
  }
  event_table(runs, std::chrono::system_clock::now()).print(out);
  return 0;
}

}  // namespace beehive::ctl
