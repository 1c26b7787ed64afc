// The leadership campaign's thread: renew (or try to take) the lease on a cadence,
// publish the term in SharedState (which the writer's fence() checks), and report
// changes.

#include "store/postgres/pg_campaign.hpp"

#include <algorithm>

#include <libpq-fe.h>

#include "store/postgres/pg_faults.hpp"
#include "store/postgres/pg_queries.hpp"
#include "store/postgres/pg_schema.hpp"

namespace beehive::store::pg {

Campaign::Campaign(std::string conninfo, std::string schema,
                   std::chrono::milliseconds connect_timeout, std::chrono::milliseconds lease,
                   std::int64_t session, std::shared_ptr<SharedState> shared,
                   std::function<void(bool)> changed)
    : conninfo_(std::move(conninfo)),
      schema_(std::move(schema)),
      connect_timeout_(connect_timeout),
      lease_(lease),
      session_(session),
      shared_(std::move(shared)),
      changed_(std::move(changed)) {
  // The first attempt before returning: a beehive starting on the store knows at once
  // whether it leads (a standby never starts its controllers' work for nothing).
  first_attempt_ = Clock::now();
  try {
    set_term(attempt(first_, first_attempt_ + lease_ / 3));
  } catch (const std::exception&) {
    first_.reset();
  }
  // A write that finds the lease taken wakes the loop: this process says at once that it
  // no longer leads (is_leader already does).
  shared_->on_depose([this] {
    { std::lock_guard g(mu_); }
    cv_.notify_all();
  });
  thread_ = std::thread([this] { loop(); });
}

Campaign::~Campaign() {
  shared_->on_depose({});
  stopping_.store(true);
  {
    std::lock_guard g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Campaign::set_term(std::int64_t term) {
  auto before = shared_->term.exchange(term, std::memory_order_acq_rel);
  if (!changed_) return;
  if (before != 0 && term != 0 && before != term) {
    // Its own lease lapsed on the server's clock (a clock stepped forward) and it took
    // the next term: as a step-down and a takeover, so that the passes of the term that
    // ended are cancelled and what it knew as its leader is forgotten.
    changed_(false);
    changed_(true);
  } else if ((before != 0) != (term != 0)) {
    changed_(term != 0);
  }
}

std::int64_t Campaign::attempt(std::unique_ptr<Connection>& c, Clock::time_point deadline) {
  // Whatever hangs (a connection, a statement, a server that stopped answering) is given
  // up at `deadline`, so that a leader steps down in time: its connection is cut rather
  // than the statement cancelled, since a cancel needs the server to answer.
  // The connection keeps the whole connect timeout for its later reconnects (a connect
  // bounded by what was left of one attempt would fail the next): this attempt's connect
  // ends at its deadline through keep_waiting.
  if (!c || c->lost()) {
    c.reset();
    c = std::make_unique<Connection>(
        conninfo_, schema_, connect_timeout_, lease_ / 3,
        [this, deadline] { return !stopping_.load() && Clock::now() < deadline; });
  }
  // A stop does not wait for a server that stopped answering: the lease then expires.
  // A takeover that waits (for the lease row's lock) waits for an expired lease's holder:
  // after a moment, its transactions left idle are ended rather than waited out.
  c->set_keep_waiting([this, deadline, conn = c.get(),
                       look_at = Clock::now() + std::chrono::milliseconds(100)]() mutable {
    if (stopping_.load() || Clock::now() >= deadline) return false;
    // Looked at again and again while it waits: the first look can come before the take
    // waits (a slow round trip, a connection being made again: no session yet).
    if (Clock::now() >= look_at) {
      look_at = Clock::now() + std::chrono::milliseconds(100);
      if (int pid = PQbackendPID(conn->raw())) end_blockers(pid, deadline);
    }
    return true;
  });
  // An attempt cut while its take waits for the lease row's lock (a stop, its deadline)
  // leaves its statement waiting on the server, which would take the lease for a process
  // that no longer runs once the lock is free (and hold it for a lease: no takeover
  // meanwhile). The server gives it up once the client is gone; a server that does not
  // support the check lets the lease expire as it would. Kept by the connections that
  // replace this one (the server may end an idle session: a restart, a failover).
  c->check_client_while_waiting();
  std::vector<Statement> s;
  if (faults::stall_campaign_of.load() == session_) {
    // A server that does not answer; its session ends once this one gives up on it,
    // rather than sleeping on with the statements' locks.
    s.push_back({"", "SET client_connection_check_interval = 100", {}});
    s.push_back({"", "SELECT pg_sleep(60)", {}});
  }
  // One implicit transaction (one sync): the takeover sees the renewal's effect.
  auto p = Params()
               .add(session_)
               .add(static_cast<std::int64_t>(lease_.count()))
               .add(static_cast<std::int64_t>(pg_schema::latest_version()));
  auto take = p;
  // The row version seen unchanged for a whole lease: its holder stopped renewing,
  // whatever the server's clock says (a clock stepped back would hold the expiry off).
  // The holder's lease, when longer: it renews a third of its own lease apart.
  const auto unrenewed_for = std::max(lease_, seen_lease_);
  take.add(!seen_version_.empty() && Clock::now() - seen_since_ >= unrenewed_for ? seen_version_
                                                                                 : std::string());
  // A process whose beehive stops renews a lease it holds, but takes none.
  const bool may_take = !shared_->standing_down.load(std::memory_order_acquire);
  s.push_back(statement(Q::lease_renew, p));
  if (may_take) s.push_back(statement(Q::lease_take, take));
  s.push_back(statement(Q::lease_look));
  auto r = c->pipeline(std::move(s));
  auto version = r.back().rows() ? r.back().str(0, 0) : std::string();
  if (version != seen_version_) {
    // Seen now, after its renewal committed: a lease from here ends after the lease
    // its holder counts from that renewal's start.
    seen_version_ = version;
    seen_since_ = Clock::now();
    seen_lease_ = std::chrono::milliseconds(r.back().rows() ? r.back().i64(0, 1) : 0);
  }
  const auto& renewed = r[r.size() - (may_take ? 3 : 2)];
  if (renewed.rows()) return renewed.i64(0, 0);
  if (!may_take) return 0;
  const auto& taken = r[r.size() - 2];
  return taken.rows() ? taken.i64(0, 0) : 0;
}

void Campaign::end_blockers(int pid, Clock::time_point deadline) {
  // After a failure, not again for a while: the looks come every 100 ms, and connections
  // that keep failing (a server at max_connections) would be tried as often, each one
  // holding up the wait they are made from.
  if (!helper_ && Clock::now() < helper_retry_at_) return;
  try {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left <= std::chrono::milliseconds(0)) return;
    auto keep_waiting = [this, deadline] { return !stopping_.load() && Clock::now() < deadline; };
    if (!helper_ || helper_->lost()) {
      helper_.reset();
      // The whole connect timeout, kept for its reconnects: keep_waiting bounds this one.
      helper_ = std::make_unique<Connection>(conninfo_, schema_, connect_timeout_, lease_ / 3,
                                             keep_waiting);
    }
    helper_->set_keep_waiting(keep_waiting);
    run(*helper_, Q::lease_blockers_end, Params().add(static_cast<std::int64_t>(pid)));
  } catch (const std::exception&) {
    helper_.reset();
    helper_retry_at_ = Clock::now() + std::chrono::seconds(1);
  }
}

void Campaign::loop() {
  std::unique_ptr<Connection> c = std::move(first_);
  auto renewed = first_attempt_;  // the lease, if held, was renewed no earlier
  const auto renew_every = lease_ / 3;
  // A standby looks more often than the leader renews, so that a lease that expires is
  // taken over within a fraction of a second; so does a leader whose renewal failed.
  const auto retry_every =
      std::min<std::chrono::milliseconds>(renew_every, std::chrono::milliseconds(250));
  bool failed = false;
  for (;;) {
    // Unrenewed for two thirds of the lease, the leader steps down, before the lease can
    // expire under it (on the database's clock, from a renewal no earlier than
    // `renewed`): every wait and attempt ends by then.
    const auto step_down_at = renewed + lease_ * 2 / 3;
    const bool leads = shared_->term.load() != 0;
    {
      std::unique_lock lk(mu_);
      // A leader's renewals start a third of a lease apart, however long each took: from
      // the end of a slow one, the next would have less than its third before step-down.
      auto wake = leads && !failed ? renewed + renew_every : Clock::now() + retry_every;
      if (leads) wake = std::min(wake, step_down_at);
      if (cv_.wait_until(lk, wake, [&] { return stop_ || shared_->deposed.load(); }) && stop_)
        break;
    }
    auto started = Clock::now();
    if (shared_->deposed.load()) {
      set_term(0);  // first: leads() never reads true in between
      shared_->deposed.store(false);
    }
    if (shared_->term.load() != 0 && started >= step_down_at) set_term(0);
    try {
      auto deadline = started + renew_every;
      if (shared_->term.load() != 0) deadline = std::min(deadline, step_down_at);
      auto term = attempt(c, deadline);
      if (term != 0) renewed = started;
      set_term(term);
      failed = false;
    } catch (const std::exception&) {
      c.reset();
      failed = true;
      if (shared_->term.load() != 0 && Clock::now() >= step_down_at) set_term(0);
    }
  }
  // Leaving: hand the lease over at once rather than letting it expire, on a connection
  // of its own when the stop cut the attempt in flight (or the last one failed).
  auto term = shared_->term.load();
  if (term != 0) {
    try {
      // Bounded for the stop waiting on it (a healthy server answers in milliseconds).
      auto deadline =
          Clock::now() + std::min<std::chrono::milliseconds>(renew_every, std::chrono::seconds(1));
      if (!c || c->lost()) {
        c.reset();
        c = std::make_unique<Connection>(conninfo_, schema_, connect_timeout_, lease_ / 3,
                                         [deadline] { return Clock::now() < deadline; });
      }
      c->set_keep_waiting([deadline] { return Clock::now() < deadline; });
      run(*c, Q::lease_release, Params().add(session_).add(term));
    } catch (const std::exception&) {
    }
    set_term(0);
  }
}

}  // namespace beehive::store::pg
