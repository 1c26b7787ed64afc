#include "actors/supervisor.hpp"

#include "runtime.hpp"

namespace beehive::detail {

caf::behavior supervisor(caf::event_based_actor* self, Runtime* rt) {
  self->set_down_handler([rt](caf::down_msg& m) {
    if (m.reason == caf::exit_reason::normal || m.reason == caf::exit_reason::user_shutdown) return;
    rt->restart(m.source, m.reason);
  });
  return {
      [self](const caf::actor& child) { self->monitor(child); },
  };
}

}  // namespace beehive::detail
