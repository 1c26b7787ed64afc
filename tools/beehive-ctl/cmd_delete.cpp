// `delete KIND[.GROUP] SLUG|ID [--resource-version RV]`: requests the object's deletion,
// as Client::remove does (a soft delete: it goes once its finalizers are removed).

#include "commands.hpp"
#include "render.hpp"
#include "selector.hpp"
#include "terminal_text.hpp"
#include "writer.hpp"

namespace beehive::ctl {

int run_delete(WriteSession& ws, const ObjectName& o, std::ostream& out) {
  auto gk = resolve_kind(ws.db(), o.kind);
  auto row = find_object(ws.db(), gk, o.object);
  auto name = printable(object_name(row.meta));
  if (row.meta.deletion_requested_at && !o.resource_version) {
    out << name << " already deleting" << std::endl;
    return 0;
  }
  auto client = ws.client(gk);
  if (o.resource_version)
    client.remove(ws.context(), row.meta.id, with_resource_version(*o.resource_version));
  else
    client.remove(ws.context(), row.meta.id);
  // With --resource-version the check above is the write's own (it may refuse); a
  // deletion already requested is then a write of nothing.
  out << name << (row.meta.deletion_requested_at ? " already deleting" : " deletion requested")
      << std::endl;
  return 0;
}

}  // namespace beehive::ctl
