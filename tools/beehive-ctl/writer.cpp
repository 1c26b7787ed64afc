#include "writer.hpp"

#include <caf/scoped_actor.hpp>

#include <beehive/actors.hpp>
#include <beehive/sqlite.hpp>

#include "failure.hpp"

namespace beehive::ctl {

WriteSession::WriteSession(const std::filesystem::path& file,
                           std::chrono::milliseconds busy_timeout)
    : busy_timeout_(busy_timeout) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    throw NotFound("no such database file: " + file.string());
  sqlite::Options opts;
  opts.busy_timeout = busy_timeout;
  opts.read_connections = 1;  // one command, one thread
  // open migrates an older schema forward, so the read-only Database (which reads only
  // the current one) is opened after it.
  store_ = sqlite::open(file, opts);
  bh_ = std::make_unique<Beehive>(store_);
  db_.emplace(file, busy_timeout);
}

WriteSession::~WriteSession() {
  db_.reset();
  bh_.reset();
  store_.reset();
}

void WriteSession::log_requeue(const GroupKind& gk, ObjectID id) {
  caf::scoped_actor self{actor_system_of(*bh_)};
  // A lock held by another writer is waited out for the busy timeout; then some slack.
  auto limit = busy_timeout_ + std::chrono::seconds(10);
  self->request(bh_->store_writer(), limit, log_requeue_request{gk, id})
      .receive([](bool) {},
               [](caf::error& err) {
                 auto code = to_errc(err);
                 throw Error(code ? *code : errc::store, error_message(err));
               });
}

}  // namespace beehive::ctl
