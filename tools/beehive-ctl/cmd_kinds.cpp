// `kinds`: what the database holds, per kind.

#include "commands.hpp"
#include "database.hpp"
#include "render.hpp"

namespace beehive::ctl {

int run_kinds(Database& db, Output output, std::ostream& out) {
  auto kinds = db.kinds();
  if (output == Output::json) {
    Json j = Json::array();
    for (auto& k : kinds)
      j.push_back({{"group", k.gk.group},
                   {"kind", k.gk.kind},
                   {"objects", k.objects},
                   {"deleting", k.deleting},
                   {"unsettled", k.unsettled}});
    out << json_output(j) << '\n';
    return 0;
  }
  Table t({"KIND", "GROUP", "OBJECTS", "UNSETTLED", "DELETING"});
  for (auto& k : kinds)
    t.add({k.gk.kind, k.gk.group.empty() ? "<core>" : k.gk.group, std::to_string(k.objects),
           std::to_string(k.unsettled), std::to_string(k.deleting)});
  t.print(out);
  return 0;
}

}  // namespace beehive::ctl
