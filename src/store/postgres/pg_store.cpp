// Placeholder replaced by the PostgreSQL store proper.
#include <beehive/errors.hpp>
#include <beehive/postgres.hpp>

namespace beehive::postgres {
std::shared_ptr<Store> open(std::string, Options) {
  throw Error(errc::store, "postgres store: not built yet");
}
}  // namespace beehive::postgres
