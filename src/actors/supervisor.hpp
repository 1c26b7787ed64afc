#pragma once

// The supervisor: beehive's root actor. It monitors the other actors and, when one
// fails (any exit but a normal one or the user_shutdown that stop sends), asks the
// runtime to restart it from the store: a controller re-lists its kind and reconciles
// it, the gc runs a pass, the watch hub comes back for new watches (the watches it
// served end with errc::store, so their readers can reopen them). Nothing committed is
// lost: state that matters lives in the store, and the rest is rebuilt from it.

#include <caf/all.hpp>

namespace beehive::detail {

class Runtime;

/// Send the supervisor a child (`caf::actor`) to watch.
caf::behavior supervisor(caf::event_based_actor* self, Runtime* rt);

}  // namespace beehive::detail
