// The one function of the backend interface that is not a backend's: finding the
// Backend behind the public Store handle.
//
// Stateless: safe on any thread.

#include "store/backend.hpp"

#include <beehive/errors.hpp>

namespace beehive::store {

Backend& backend_of(Store& s) {
  auto* b = dynamic_cast<Backend*>(&s);
  if (!b) throw Error(errc::invalid_argument, "not a beehive store backend");
  return *b;
}

}  // namespace beehive::store
