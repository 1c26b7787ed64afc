// The leadership campaign's thread: renew (or try to take) the lease on a cadence,
// publish the term in SharedState (which the writer's fence() checks), and report
// changes.

#include "store/postgres/pg_campaign.hpp"

#include "store/postgres/pg_queries.hpp"

namespace beehive::store::pg {

Campaign::Campaign(std::string conninfo, std::string schema,
                   std::chrono::milliseconds connect_timeout, std::chrono::milliseconds lease,
                   std::int64_t session, std::shared_ptr<SharedState> shared,
                   std::function<void(bool)> changed)
    : conninfo_(std::move(conninfo)),
      schema_(std::move(schema)),
      connect_timeout_(connect_timeout),
      lease_(std::max(lease, std::chrono::milliseconds(300))),
      session_(session),
      shared_(std::move(shared)),
      changed_(std::move(changed)) {
  // The first attempt before returning: a beehive starting on the store knows at once
  // whether it leads (a standby never starts its controllers' work for nothing).
  try {
    set_term(attempt(first_));
  } catch (const std::exception&) {
    first_.reset();
  }
  thread_ = std::thread([this] { loop(); });
}

Campaign::~Campaign() {
  {
    std::lock_guard g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Campaign::set_term(std::int64_t term) {
  auto before = shared_->term.exchange(term, std::memory_order_acq_rel);
  if ((before != 0) != (term != 0) && changed_) changed_(term != 0);
}

std::int64_t Campaign::attempt(std::unique_ptr<Connection>& c) {
  // A renewal that hangs (a silent network) fails within a third of the lease.
  if (!c || c->lost())
    c = std::make_unique<Connection>(conninfo_, schema_, connect_timeout_, lease_ / 3);
  auto r = run(*c, Q::lease_acquire,
               Params().add(session_).add(static_cast<std::int64_t>(lease_.count())));
  return r.rows() ? r.i64(0, 0) : 0;
}

void Campaign::loop() {
  using clock = std::chrono::steady_clock;
  std::unique_ptr<Connection> c = std::move(first_);
  auto renewed = clock::now();
  const auto renew_every = lease_ / 3;
  // A standby looks more often than the leader renews, so that a lease that expires is
  // taken over within a fraction of a second.
  const auto standby_every =
      std::min<std::chrono::milliseconds>(renew_every, std::chrono::milliseconds(250));
  for (;;) {
    {
      std::unique_lock lk(mu_);
      auto wait = shared_->term.load() != 0 ? renew_every : standby_every;
      if (cv_.wait_for(lk, wait, [&] { return stop_; })) break;
    }
    auto started = clock::now();
    if (shared_->deposed.exchange(false)) set_term(0);
    try {
      auto term = attempt(c);
      if (term != 0) renewed = started;
      set_term(term);
    } catch (const std::exception&) {
      c.reset();
      // Unrenewed for two thirds of the lease: step down before it can expire under us.
      if (shared_->term.load() != 0 && clock::now() - renewed > lease_ * 2 / 3) set_term(0);
    }
  }
  // Leaving: hand the lease over at once rather than letting it expire.
  auto term = shared_->term.load();
  if (term != 0) {
    try {
      if (c && !c->lost()) run(*c, Q::lease_release, Params().add(session_).add(term));
    } catch (const std::exception&) {
    }
    set_term(0);
  }
}

}  // namespace beehive::store::pg
