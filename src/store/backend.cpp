// The functions of the backend interface that are not a backend's: finding the Backend
// behind the public Store handle, and the one-Beehive-at-a-time guard.
//
// Safe on any thread.

#include "store/backend.hpp"

#include <beehive/errors.hpp>

namespace beehive::store {

std::shared_ptr<void> Backend::serve() {
  if (served_.exchange(true))
    throw Error(errc::store_in_use,
                describe() +
                    " already serves a Beehive that has not stopped; for a second one, open "
                    "the store again");
  return std::shared_ptr<void>(&served_, [](std::atomic<bool>* served) { *served = false; });
}

Backend& backend_of(Store& s) {
  auto* b = dynamic_cast<Backend*>(&s);
  if (!b) throw Error(errc::invalid_argument, "not a beehive store backend");
  return *b;
}

}  // namespace beehive::store
