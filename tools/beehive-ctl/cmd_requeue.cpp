// `requeue KIND[.GROUP] SLUG|ID [--reset-backoff]`: asks the kind's controller to reconcile
// the object now (and, with --reset-backoff, to forget its retry backoff).
//
// Client::requeue talks to the controller of this process, and beehive-ctl runs none:
// the request is recorded in the change log instead (log_requeue_request), where the
// beehive running the controller, in whatever process, finds it within its
// foreign-commit poll. Nothing about the object changes. With no application running
// nothing would ever act on the entry (a start reconciles what is unsettled, and reads
// the change log only from where it starts), so the request is refused rather than
// reported done.

#include <stdexcept>

#include "commands.hpp"
#include "render.hpp"
#include "selector.hpp"
#include "terminal_text.hpp"
#include "writer.hpp"

namespace beehive::ctl {

int run_requeue(WriteSession& ws, const ObjectName& o, bool reset_backoff, std::ostream& out) {
  auto gk = resolve_kind(ws.db(), o.kind);
  auto row = find_object(ws.db(), gk, o.object);
  if (ws.db().application_runs() == false)
    throw std::runtime_error(object_name(row.meta) + " not requeued: no application runs on " +
                             ws.db().name() + " (" + ws.db().nobody_runs() +
                             ") to reconcile it; an application reconciles every unsettled "
                             "object when it starts");
  ws.log_requeue(gk, row.meta.id, reset_backoff);
  out << printable(object_name(row.meta)) << " requeued" << std::endl;
  return 0;
}

}  // namespace beehive::ctl
