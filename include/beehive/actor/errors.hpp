#pragma once

/// Errors on the actor surface: beehive's failures travel between actors as
/// `caf::error` values in the "beehive" category whose code is the `beehive::errc`
/// value; `make_error` builds one and `to_errc` reads one back (mapping CAF's own
/// errors onto the closest code).
///
/// The functions keep no state: call them from any thread or actor.

#include <optional>
#include <string>

#include <caf/atom.hpp>
#include <caf/error.hpp>

#include <beehive/errors.hpp>

namespace beehive {

/// The category atom of beehive's caf::error values.
constexpr caf::atom_value error_category_atom = caf::atom("beehive");

/// A caf::error in beehive's category; `what` travels as the error's context.
caf::error make_error(errc code, std::string what = {});

/// The beehive code of `err`: its own code in beehive's category; `stopped` when the
/// receiving actor is gone or the handle was null; `deadline_exceeded` for a request
/// timeout (the request's outcome is then unknown); `store` for any other failure.
/// Empty (`std::nullopt`) for "no error".
std::optional<errc> to_errc(const caf::error& err);

/// The message `make_error` attached, or "".
std::string error_message(const caf::error& err);

}  // namespace beehive
