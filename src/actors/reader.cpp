#include "actors/reader.hpp"
#include "actors/thread_name.hpp"

#include <exception>

#include <beehive/actor/errors.hpp>

namespace beehive::detail {

caf::behavior reader(caf::event_based_actor*, std::shared_ptr<store::Backend> backend) {
  name_this_thread("bh.reader");
  return {
      [backend](const ReadJob& job) -> caf::message {
        try {
          auto lease = backend->reader();
          return job(*lease);
        } catch (const std::exception& e) {
          return caf::make_message(make_error(errc::store, e.what()));
        } catch (...) {
          return caf::make_message(make_error(errc::store, "unknown exception"));
        }
      },
  };
}

}  // namespace beehive::detail
