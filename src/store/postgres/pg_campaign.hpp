#pragma once

// Leadership among the processes running one PostgreSQL store: a lease in the database
// (the `leadership` row), taken when free or expired, each taking a new term, and
// renewed by its holder every third of Options::lease. A lease has expired when the
// database's clock (now()) says so, or when a candidate has seen its row unrenewed for a
// whole lease on its own steady clock: a server clock stepped back delays nothing, and
// one stepped forward ends a lease early, which fencing makes safe. A build whose schema
// version is older than the database's neither renews nor takes the lease.
//
// A campaign runs while a Beehive is started on the store (Backend::claim). The leader
// steps down once two thirds of the lease have passed since its last renewal began (a
// renewal that hangs is given up by then), or at once when one of its writes found the
// lease taken (SharedState::depose); the lease is released when the campaign ends, so a
// standby takes over at once.
//
// Owns one thread, stopped and joined by the destructor. subscribe() and leads() may be
// called from any thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "store/postgres/pg_writer.hpp"

namespace beehive::store::pg {

class Campaign {
 public:
  Campaign(std::string conninfo, std::string schema, std::chrono::milliseconds connect_timeout,
           std::chrono::milliseconds lease, std::int64_t session,
           std::shared_ptr<SharedState> shared, std::function<void(bool)> changed);
  ~Campaign();
  Campaign(const Campaign&) = delete;
  Campaign& operator=(const Campaign&) = delete;

 private:
  using Clock = std::chrono::steady_clock;
  void loop();
  /// One renewal (or attempt to take over), given up at `deadline`; returns the term
  /// held after it, 0 for none.
  std::int64_t attempt(std::unique_ptr<Connection>& c, Clock::time_point deadline);
  void set_term(std::int64_t term);
  /// Ends the idle transactions that hold up `pid`'s takeover (Q::lease_blockers_end),
  /// on a connection of its own, by `deadline`; a failure is ignored (the server ends them
  /// itself once idle for a lease).
  void end_blockers(int pid, Clock::time_point deadline);

  std::string conninfo_, schema_;
  std::chrono::milliseconds connect_timeout_, lease_;
  std::int64_t session_;
  std::shared_ptr<SharedState> shared_;
  std::function<void(bool)> changed_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> stopping_{false};    // stop_, for an attempt in flight to give up at once
  std::unique_ptr<Connection> first_;    // the constructor's connection, handed to the loop
  std::unique_ptr<Connection> helper_;   // end_blockers' connection, made when first needed
  Clock::time_point helper_retry_at_{};  // after a failed look, the next one no sooner
  Clock::time_point first_attempt_;      // when the constructor's attempt began
  // The lease row's version as last seen, and since when (attempt()): unchanged for a
  // lease, the lease is taken over whatever the server's clock says.
  std::string seen_version_;
  Clock::time_point seen_since_;
  std::chrono::milliseconds seen_lease_{0};  // the holder's lease, as its row says
  std::thread thread_;
};

}  // namespace beehive::store::pg
