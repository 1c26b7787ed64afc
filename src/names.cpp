#include "names.hpp"

#include <string>

#include <beehive/detail/codec.hpp>
#include <beehive/errors.hpp>

namespace beehive {

void require_name(std::string_view name, std::string_view what) {
  detail::require_text(name, what);
  if (name.size() > max_name_bytes)
    throw Error(errc::invalid_argument, std::string(what) + " is " + std::to_string(name.size()) +
                                            " bytes long; a group, kind, slug, condition type, "
                                            "event category or finalizer holds at most " +
                                            std::to_string(max_name_bytes));
}

void require_new_finalizer(std::string_view finalizer) {
  require_name(finalizer, "finalizer");  // a name, bounded like the others
  if (finalizer.empty()) throw Error(errc::invalid_argument, "a finalizer needs a name");
}

}  // namespace beehive
