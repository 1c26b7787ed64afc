#include "writer.hpp"

#include <caf/scoped_actor.hpp>

#include <beehive/actors.hpp>
#include <beehive/detail/codec.hpp>
#include <beehive/postgres.hpp>
#include <beehive/sqlite.hpp>

#include "beehive_core.hpp"

namespace beehive::ctl {

WriteSession::WriteSession(const Location& where) : timeout_(where.timeout) {
  // A file that is not a beehive database is refused before the store opens it (which
  // would make it one); the reads check that when they open it their own way.
  if (where.postgres())
    require_postgres_store_to_write(where);
  else
    require_sqlite_store_to_write(where);
  // open migrates an older schema forward, so the read-only Database (which reads only
  // the current one) is opened after it.
  if (where.postgres()) {
    postgres::Options opts;
    opts.schema = where.schema;
    opts.connections = 1;  // one command, one thread
    opts.connect_timeout = where.timeout;
    store_ = postgres::open(where.conninfo, opts);
  } else {
    sqlite::Options opts;
    opts.busy_timeout = where.timeout;
    opts.read_connections = 1;
    store_ = sqlite::open(where.file, opts);
  }
  bh_ = std::make_unique<Beehive>(store_);
  db_ = Database::open(where);
}

WriteSession::~WriteSession() {
  db_.reset();
  bh_.reset();
  store_.reset();
}

void WriteSession::within(const std::function<void(const Context&)>& fn) {
  bh_->core()->within(ctx_, fn);
}

ObjectRow WriteSession::create_or_update(const Context& tx, const GroupKind& gk,
                                         const std::string& slug, const nlohmann::json& spec,
                                         int spec_version, const Labels& labels) {
  create_or_update_request req;
  req.gk = gk;
  req.slug = slug;
  req.spec = detail::encode(spec);  // as a Client of nlohmann::json writes it
  req.spec_version = spec_version;
  req.labels = labels;
  return bh_->core()->write(tx, std::move(req), {}).row;
}

ObjectRow WriteSession::set_labels(const Context& tx, const GroupKind& gk, ObjectID id,
                                   const Labels& labels) {
  return bh_->core()->write(tx, set_labels_request{gk, id, labels, std::nullopt}, {}).row;
}

void WriteSession::log_requeue(const GroupKind& gk, ObjectID id, bool reset_backoff) {
  caf::scoped_actor self{actor_system_of(*bh_)};
  // A lock held by another writer is waited out for the busy timeout; then some slack.
  auto limit = timeout_ + std::chrono::seconds(10);
  self->request(bh_->store_writer(), limit, log_requeue_request{gk, id, reset_backoff})
      .receive([](bool) {},
               [](caf::error& err) {
                 auto code = to_errc(err);
                 throw Error(code ? *code : errc::store, error_message(err));
               });
}

}  // namespace beehive::ctl
