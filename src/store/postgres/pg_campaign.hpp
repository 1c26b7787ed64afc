#pragma once

// Leadership among the processes running one PostgreSQL store: a lease in the database
// (the `leadership` row), taken when free or expired, each taking a new term, and
// renewed by its holder every third of Options::lease. Time is the database's clock
// (now()), so the processes' own clocks do not matter.
//
// A campaign runs while a Beehive is started on the store (Backend::claim). The leader
// steps down when a renewal fails for longer than two thirds of the lease, or when one
// of its writes found the lease taken (SharedState::deposed), at its next renewal; the
// lease is released when the campaign ends, so a standby takes over at once.
//
// Owns one thread, stopped and joined by the destructor. subscribe() and leads() may be
// called from any thread.

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
  void loop();
  /// One renewal (or attempt to take over); returns the term held after it, 0 for none.
  std::int64_t attempt(std::unique_ptr<Connection>& c);
  void set_term(std::int64_t term);

  std::string conninfo_, schema_;
  std::chrono::milliseconds connect_timeout_, lease_;
  std::int64_t session_;
  std::shared_ptr<SharedState> shared_;
  std::function<void(bool)> changed_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::unique_ptr<Connection> first_;  // the constructor's connection, handed to the loop
  std::thread thread_;
};

}  // namespace beehive::store::pg
