#pragma once

// The store_writer actor: sole owner of the write connection. It runs each write in
// its own transaction, replies after the commit, and publishes a commit_record to its
// subscribers. Besides the public store_writer_actor interface it serves the blocking
// facade through BlockingWrite messages, which carry a reply slot instead of a
// response promise (one thread hand-off each way, no scoped_actor).

#include <functional>
#include <memory>
#include <variant>

#include <beehive/actors.hpp>
#include <beehive/time.hpp>

#include "rendezvous.hpp"
#include "store/backend.hpp"

namespace beehive::detail {

using WriteOp = std::variant<create_request, update_request, create_or_update_request,
                             get_or_create_request, remove_request, remove_by_slug_request>;

/// Decodes a written row back into the caller's types inside the transaction; throwing
/// rolls the write back.
using RowCheck = std::function<void(const ObjectRow&)>;

struct WriteReply {
  ObjectRow row;
  bool flag = false;  // get_or_create: created; remove_by_slug: deletion requested
};

struct BlockingWrite {
  WriteOp op;
  RowCheck check;
  std::shared_ptr<Rendezvous<WriteReply>> reply = std::make_shared<Rendezvous<WriteReply>>();

  /// A write dropped unserved (its actor is gone) releases its caller.
  ~BlockingWrite() { reply->fail(errc::stopped, "beehive stopped"); }
};

using BlockingWritePtr = std::shared_ptr<BlockingWrite>;

using store_writer_impl = store_writer_actor::extend<caf::reacts_to<BlockingWritePtr>>;

struct StoreWriterConfig {
  std::unique_ptr<store::Writer> writer;
  std::shared_ptr<Clock> clock;
};

store_writer_impl::behavior_type store_writer(store_writer_impl::stateful_pointer<struct StoreWriterState> self,
                                              std::shared_ptr<StoreWriterConfig> cfg);

struct StoreWriterState {
  std::shared_ptr<StoreWriterConfig> cfg;
  std::vector<caf::actor> subscribers;
  static inline const char* name = "beehive.store_writer";
};

}  // namespace beehive::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::detail::BlockingWritePtr)
