// `requeue KIND[.GROUP] SLUG|ID [--reset-backoff]`: asks the kind's controller to reconcile
// the object now (and, with --reset-backoff, to forget its retry backoff).
//
// Client::requeue talks to the controller of this process, and beehive-ctl runs none:
// the request is recorded in the change log instead (log_requeue_request), where the
// beehive running the controller, in whatever process, finds it within its
// foreign-commit poll. Nothing about the object changes; with no beehive running, the
// entry is simply never acted on.

#include "commands.hpp"
#include "render.hpp"
#include "selector.hpp"
#include "terminal_text.hpp"
#include "writer.hpp"

namespace beehive::ctl {

int run_requeue(WriteSession& ws, const ObjectName& o, bool reset_backoff, std::ostream& out) {
  auto gk = resolve_kind(ws.db(), o.kind);
  auto row = find_object(ws.db(), gk, o.object);
  ws.log_requeue(gk, row.meta.id, reset_backoff);
  out << printable(object_name(row.meta)) << " requeued" << std::endl;
  return 0;
}

}  // namespace beehive::ctl
