#pragma once

// The reader actor: runs the blocking store reads that beehive's event-based actors
// need (a controller's listing of its kind, a requeue's existence check), so that no
// SQLite call holds one of CAF's scheduler threads. Detached: its own thread blocks on
// the read pool. Reads queue in its mailbox and run one after another; each reply is
// the job's result, or a caf::error (errc::store) when the read threw.
//
// A caller sends `ReadJob` with `request(...).then(...)` and gets the message the job
// returns.

#include <functional>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/message.hpp>

#include "store/backend.hpp"

namespace beehive::detail {

/// A read to run on the reader's thread, given a connection of the read pool; returns
/// the reply.
using ReadJob = std::function<caf::message(store::Reader&)>;

caf::behavior reader(caf::event_based_actor* self, std::shared_ptr<store::Backend> backend);

}  // namespace beehive::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::detail::ReadJob)
