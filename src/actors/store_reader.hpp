#pragma once

// The store_reader actor: serves the actor surface's reads (get_request, list_request,
// ...) on the store's read connections, so that they never wait for, nor hold up, the
// write connection. The store_writer delegates the reads it receives to it; a read sent
// after a write's reply arrived sees that write (WAL readers see every commit before
// their read began).
//
// Thread-safety: spawned detached (SQLite reads block); only its own thread runs its
// handlers. The backend's reader pool is thread-safe.

#include <exception>
#include <memory>

#include <caf/result.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <beehive/actors.hpp>

#include "store/backend.hpp"

namespace beehive::detail {

/// `fn()`'s value as a reply, or the error it threw as a caf::error in beehive's
/// category.
template <class Fn>
auto reply_or_error(Fn&& fn) -> caf::result<decltype(fn())> {
  try {
    return fn();
  } catch (const Error& e) {
    return make_error(e.value(), e.message());
  } catch (const std::exception& e) {
    return make_error(errc::store, e.what());
  }
}

/// Answers each read of read_request_types with its reply_type.
using store_reader_actor = typename beehive::detail::replies_for<read_request_types>::type;

store_reader_actor::behavior_type store_reader(store_reader_actor::pointer self,
                                               std::shared_ptr<store::Backend> backend);

}  // namespace beehive::detail
