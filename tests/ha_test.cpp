// Several processes on one PostgreSQL store (tests/ha/node.cpp is each of them):
// exactly one leads; killing it (SIGKILL) hands leadership to a standby within the
// lease + 2 s and loses no acknowledged write; a leader paused past its lease
// (SIGSTOP) and resumed after a takeover writes nothing as a leader and steps down; one
// that stops hands over at once; one whose sessions the server ends keeps leading; a
// process killed inside a write transaction holds nobody up.
// Leadership on SQLite: a started beehive always leads.
//
// The PostgreSQL tests run in the pg.* set (they skip, saying so, on SQLite).

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <libpq-fe.h>

#include <caf/scoped_actor.hpp>

#include <beehive/actors.hpp>
#include <beehive/postgres.hpp>
#include <beehive/testing.hpp>

#include "actors/atoms.hpp"
#include "beehive_core.hpp"
#include "child_process.hpp"
#include "controller_fixture.hpp"
#include "ha/node_types.hpp"
#include "held_reader.hpp"
#include "pass_faults.hpp"
#include "store/backend.hpp"
#include "store/postgres/pg_connection.hpp"
#include "store/postgres/pg_faults.hpp"
#include "support/test_store.hpp"

#ifndef BEEHIVE_HA_NODE
#error "BEEHIVE_HA_NODE (the node process's path) is set by CMakeLists.txt"
#endif

namespace beehive::test {
namespace {

using namespace std::chrono_literals;

using Nodes = Client<NodeSpec, NodeStatus>;
using Node = Object<NodeSpec, NodeStatus>;

constexpr auto lease = 1000ms;

/// A node process on the test's schema.
std::unique_ptr<ChildProcess> node(const std::string& schema, bool verbose = false,
                                   std::chrono::milliseconds its_lease = lease,
                                   bool resync = true) {
  std::vector<std::string> args{std::getenv("BEEHIVE_TEST_PG"), schema,
                                std::to_string(its_lease.count())};
  if (verbose) args.push_back("verbose");
  if (!resync) args.push_back("no-resync");
  return std::make_unique<ChildProcess>(BEEHIVE_HA_NODE, args);
}

/// A PostgreSQL store on the test schema of `path`, with its own lease.
std::shared_ptr<Store> open_with_lease(const std::filesystem::path& path,
                                       std::chrono::milliseconds its_lease) {
  return postgres::open(std::getenv("BEEHIVE_TEST_PG"),
                        {.schema = test_schema_for(path), .lease = its_lease});
}

/// Reads lines until `want` (10 s per line at most); a failure, naming the lines read, at
/// the end of its output.
::testing::AssertionResult read_until(ChildProcess& p, const std::string& want,
                                      std::vector<std::string>* seen = nullptr) {
  std::string read;
  for (;;) {
    auto line = p.read_line();
    if (seen) seen->push_back(line);
    if (line == want) return ::testing::AssertionSuccess();
    read += "\n  " + line;
    if (line.ends_with("<eof>"))
      return ::testing::AssertionFailure() << "no \"" << want << "\" in what it said:" << read;
  }
}

/// Waits (on a watch of the kind, no sleeps) until every id in `ids` carries a status
/// for its spec's `n`; returns false after `limit`.
bool all_reconciled(Nodes& c, const std::vector<std::pair<ObjectID, int>>& ids,
                    std::chrono::seconds limit) {
  std::map<ObjectID, int> want(ids.begin(), ids.end());
  auto watch = c.watch_list({});
  auto until = std::chrono::steady_clock::now() + limit;
  std::map<ObjectID, int> have;
  auto done = [&] {
    for (auto& [id, n] : want) {
      auto it = have.find(id);
      if (it == have.end() || it->second != n) return false;
    }
    return true;
  };
  while (!done()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left <= 0ms) return false;
    auto ch = watch.next_for(left);
    if (!ch) continue;
    if (ch->object.status) have[ch->object.id] = ch->object.status->n;
  }
  return true;
}

class HaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_POSTGRES();
    store_ = open_test_store(path_);          // creates the schema the nodes share
    bh_ = std::make_unique<Beehive>(store_);  // never started: a client, not a candidate
    client_ = std::make_unique<Nodes>(*bh_, widget_kind);
  }
  std::string schema() const { return test_schema_for(path_); }
  /// A store for a candidate in this process, on the nodes' schema.
  std::shared_ptr<Store> open_candidate(std::chrono::milliseconds its_lease = lease) const {
    postgres::Options o;
    o.schema = schema();
    o.lease = its_lease;
    return postgres::open(std::getenv("BEEHIVE_TEST_PG"), o);
  }
  /// Starts `a`, which finds no leader on the schema, checking that its leadership
  /// stream (opened first) says "not leading" and then "leading"; returns the stop and
  /// the stream, for the changes that follow.
  std::pair<Stop, Stream<bool>> start_leading(Beehive& a) const {
    auto changes = a.watch_leadership({});
    EXPECT_EQ(changes.next_for(5s), std::optional<bool>(false));
    auto stop = a.start({});
    EXPECT_EQ(changes.next_for(5s), std::optional<bool>(true));
    return {std::move(stop), std::move(changes)};
  }
  void TearDown() override {
    store::pg::faults::stall_campaign_of = 0;
    store::pg::faults::fail_change_log_reads = false;
    store::pg::faults::hold_listener_notes = false;
    detail::faults::reconcile_pass = nullptr;
  }
  /// From now on, the renewals of the session that holds the lease get no answer (until
  /// the test clears the fault, or ends); returns that session.
  std::int64_t silence_leader() const {
    auto holder = lease_holder();
    EXPECT_NE(holder, 0);
    store::pg::faults::stall_campaign_of = holder;
    return holder;
  }
  /// Whether a campaign attempt stalled by stall_campaign_of is waiting on the server.
  bool an_attempt_is_stuck() const {
    return query_test_store(path_,
                            "SELECT count(*) FROM pg_stat_activity WHERE query = "
                            "'SELECT pg_sleep(60)' AND state = 'active'")
               .at(0)
               .at(0) != "0";
  }
  /// The leader `a` kept leading (its stream `changes` heard of no change), and the
  /// standby `b`, told to quit, quits without having led; then `a` stops.
  static void expect_leader_stayed(Beehive& a, Stream<bool>& changes, ChildProcess& b,
                                   Stop& stop_a) {
    EXPECT_EQ(changes.next_for(0ms), std::nullopt) << "leadership changed";
    EXPECT_TRUE(a.is_leader());
    b.write_line("quit");
    EXPECT_FALSE(read_until(b, "leader")) << "the standby took over";
    EXPECT_EQ(b.wait(), 0);
    stop_a({});
  }
  /// Starts a leader without resync (`leader`), creates a widget (`o`) and waits until
  /// it is reconciled and the leader watches the widgets and has seen it.
  void watching_leader(std::unique_ptr<ChildProcess>& leader, Node& o) const {
    leader = node(schema(), false, 10s, /*resync=*/false);
    ASSERT_EQ(leader->read_line(), "leader");
    o = client_->create({}, {1, 0});
    ASSERT_TRUE(all_reconciled(*client_, {{o.id, 1}}, 30s));
    leader->write_line("watch");
    ASSERT_TRUE(read_until(*leader, "seen " + std::to_string(o.id) + " 1"));
  }
  /// Pauses `p` (SIGSTOP) once no session of the schema is inside a transaction: a
  /// process whose callers just wrote at once holds the next transaction, begun with its
  /// last commit, until its queue is idle, and a pause then would hold the others' writes
  /// up for its lease.
  void pause_when_idle(ChildProcess& p) const {
    ASSERT_TRUE(eventually([&] {
      return query_test_store(path_,
                              "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                              "'beehive " +
                                  schema() + "' AND state = 'idle in transaction'")
                 .at(0)
                 .at(0) == "0";
    }));
    p.pause();
  }
  /// Trims the change log through `rv` at once, as the leader's GC would by age or count.
  void trim_change_log(std::int64_t rv) const {
    const auto cut = std::to_string(rv);
    write_test_store(path_, "DELETE FROM change_log WHERE resource_version <= " + cut +
                                "; UPDATE beehive_meta SET value = " + cut +
                                " WHERE key = 'change_log_horizon'");
  }
  /// Registers widgets on `a` and creates one, whose first pass sets `entered` and then
  /// does work outside that looks at its context now and then (half a minute at most),
  /// setting `saw_cancel` if it ended.
  static void with_a_pass_that_watches_its_context(Beehive& a, std::promise<void>& entered,
                                                   std::atomic<bool>& saw_cancel) {
    register_controller<WidgetSpec, WidgetStatus>(
        a, widget_kind,
        [&, once = std::make_shared<std::atomic<bool>>(false)](
            const Context& rctx, ControllerClient<WidgetStatus>&,
            const Object<WidgetSpec, WidgetStatus>&) {
          if (once->exchange(true)) return Result{};
          entered.set_value();
          for (int i = 0; i < 6000 && !rctx.done(); ++i) std::this_thread::sleep_for(5ms);
          saw_cancel = rctx.done();
          return Result{};
        });
    Widgets(a, widget_kind).create({}, {"a", 1});
  }
  /// How many of the server's sessions named `application` meet `condition` (SQL on
  /// pg_stat_activity).
  std::string sessions(const std::string& application, const std::string& condition) const {
    return query_test_store(path_,
                            "SELECT count(*) FROM pg_stat_activity WHERE "
                            "application_name = '" +
                                application + "' AND " + condition)
        .at(0)
        .at(0);
  }
  /// The session that holds the lease (the leadership campaign's `holder`); 0: none.
  std::int64_t lease_holder() const {
    auto rows = query_test_store(path_, "SELECT holder FROM leadership");
    return rows.size() == 1 ? std::stoll(rows[0][0]) : 0;
  }
  /// A standby's takeover waits for the lease row's lock (an expired leader's transaction
  /// still running), and the standby stops meanwhile: the server must give its waiting
  /// take up with it, rather than take the lease for a process that no longer runs once
  /// the lock is free (no takeover would then be possible for a lease). `first` runs once
  /// the standby has started, before the lease row is locked.
  void stop_a_standby_whose_take_waits(const std::function<void()>& first) const {
    constexpr auto long_lease = 30s;  // its attempts wait for the lock up to a third of it
    constexpr const char* nobody = "987654321";
    write_test_store(path_, std::string("UPDATE leadership SET holder = ") + nobody +
                                ", expires_at = now() + interval '1 hour' WHERE id = 1");
    Beehive b(open_candidate(long_lease));
    auto stop_b = b.start({});
    ASSERT_FALSE(b.is_leader());
    if (first) first();
    // A leader's fenced transaction, busy (not idle: a takeover does not end it).
    auto holding = std::async(std::launch::async, [&] {
      try {
        query_test_store(path_,
                         "SET application_name = 'held lease row'; BEGIN; SELECT 1 FROM "
                         "leadership WHERE id = 1 FOR KEY SHARE; SELECT pg_sleep(60); COMMIT");
      } catch (const std::exception&) {  // ended below
      }
    });
    // Ended however the test ends (it sleeps for a minute otherwise).
    struct EndHolder {
      const std::filesystem::path& path;
      ~EndHolder() {
        try {
          write_test_store(path,
                           "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                           "application_name = 'held lease row'");
        } catch (...) {
        }
      }
    } end_holder{path_};
    auto sessions_waiting = [&] {
      return sessions("beehive " + schema(), "wait_event_type = 'Lock'");
    };
    ASSERT_TRUE(
        eventually([&] { return sessions("held lease row", "wait_event = 'PgSleep'") == "1"; }));
    write_test_store(path_, "UPDATE leadership SET expires_at = now() - interval '1 second'");
    ASSERT_TRUE(eventually([&] { return sessions_waiting() != "0"; }));  // its take waits
    stop_b({});
    EXPECT_TRUE(eventually([&] { return sessions_waiting() == "0"; }, 5s))
        << "a stopped process's take still waits for the lock";
    write_test_store(path_,
                     "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                     "application_name = 'held lease row'");
    holding.get();
    EXPECT_EQ(lease_holder(), std::stoll(nobody)) << "the stopped process took the lease";
  }

  TempDir dir_;
  std::filesystem::path path_ = dir_.file("ha.db");
  std::shared_ptr<Store> store_;
  std::unique_ptr<Beehive> bh_;
  std::unique_ptr<Nodes> client_;
};

TEST_F(HaTest, ExactlyOneProcessLeadsAndAStandbySeesEveryChange) {
  auto a = node(schema());
  ASSERT_EQ(a->read_line(), "leader");
  auto b = node(schema());
  ASSERT_EQ(b->read_line(), "standby");
  auto c = node(schema());
  ASSERT_EQ(c->read_line(), "standby");
  // Only the leader reconciles: every status is written by a's pid.
  std::vector<std::pair<ObjectID, int>> ids;
  for (int i = 0; i < 20; ++i) ids.emplace_back(client_->create({}, {i, 0}).id, i);
  ASSERT_TRUE(all_reconciled(*client_, ids, 30s));
  std::set<int> writers;
  for (auto& o : client_->list({})) writers.insert(o.status ? o.status->pid : 0);
  EXPECT_EQ(writers.size(), 1u);
  // Stopping the leader hands over (it releases the lease): one of the standbys
  // reconciles what comes next.
  a->write_line("quit");
  EXPECT_EQ(a->wait(), 0);
  auto after = client_->create({}, {100, 0});
  ASSERT_TRUE(all_reconciled(*client_, {{after.id, 100}}, 30s));
  auto o = client_->get({}, after.id);
  ASSERT_TRUE(o.status);
  EXPECT_NE(o.status->pid, *writers.begin()) << "reconciled by the leader that stopped";
  b->write_line("quit");
  c->write_line("quit");
  EXPECT_EQ(b->wait(), 0);
  EXPECT_EQ(c->wait(), 0);
}

TEST_F(HaTest, KillingTheLeaderTwentyTimesUnderLoadLosesNothingAndEachTakeoverIsInTime) {
  auto leader = node(schema());
  ASSERT_EQ(leader->read_line(), "leader");
  // Client load from this process for the whole test; every acknowledged create must
  // exist at the end and be reconciled by whichever process leads then.
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::pair<ObjectID, int>> acked;
  int failed = 0;
  std::string failures;  // what they said
  std::thread load([&] {
    for (int i = 0; !stop.load(); ++i) {
      try {
        auto o = client_->create({}, {i, 0});
        std::lock_guard g(mu);
        acked.emplace_back(o.id, i);
      } catch (const Error& e) {
        std::lock_guard g(mu);
        ++failed;
        failures += std::string(e.what()) + "\n";
      }
      // Paced: a steady load, not a flood the 2-core test machine spends the test on.
      std::this_thread::sleep_for(20ms);
    }
  });
  for (int round = 0; round < 20; ++round) {
    auto standby = node(schema());
    ASSERT_EQ(standby->read_line(), "standby") << "round " << round;
    leader->kill(SIGKILL);
    auto killed = std::chrono::steady_clock::now();
    ASSERT_EQ(standby->read_line(), "leader") << "round " << round;
    auto took = std::chrono::steady_clock::now() - killed;
    EXPECT_LE(took, lease + 2s)
        << "round " << round << ": takeover after "
        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
    leader = std::move(standby);
  }
  stop = true;
  load.join();
  std::lock_guard g(mu);
  ASSERT_GT(acked.size(), 20u);
  EXPECT_EQ(failed, 0) << "client writes failed while leaders died:\n" << failures;
  for (auto& [id, n] : acked) {
    auto o = client_->get({}, id);
    EXPECT_EQ(o.spec.n, n) << "acknowledged create " << id << " lost";
  }
  EXPECT_TRUE(all_reconciled(*client_, acked, 60s)) << "the last leader left work undone";
  leader->write_line("quit");
  EXPECT_EQ(leader->wait(), 0);
}

// A leader whose renewals get no answer at all (a server, or a path to it, that stopped
// answering rather than refusing) gives them up in time and steps down within two thirds
// of its lease, before the lease can expire and a standby take over.
// A stop keeps its deadline while the leadership campaign waits on a server that stopped
// answering: the attempt in flight is given up at once (it would otherwise hold the stop
// for up to a third of the lease).
TEST_F(HaTest, AStopKeepsItsDeadlineWhileTheCampaignWaitsOnAServerThatStoppedAnswering) {
  namespace faults = store::pg::faults;
  auto a = node(schema());
  ASSERT_EQ(a->read_line(), "leader");
  // A standby with a long lease: it tries to take the lease every 250 ms, each attempt
  // given up a third of its lease (10 s) after it began.
  auto store_b = open_candidate(30s);
  auto session_b = std::dynamic_pointer_cast<store::Backend>(store_b)->session();
  Beehive b(store_b);
  auto stop_b = b.start({});
  ASSERT_FALSE(b.is_leader());
  faults::stall_campaign_of = session_b;
  ASSERT_TRUE(eventually([&] { return an_attempt_is_stuck(); })) << "no attempt of b's got stuck";
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_NO_THROW(stop_b(Context{}.with_timeout(200ms)));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  faults::stall_campaign_of = 0;
  a->write_line("quit");
  EXPECT_EQ(a->wait(), 0);
}

// A leader whose stop gave up on a pass still running hands the leadership over all
// the same: the pass's writes fail by term, and the standby must not wait until the
// stopped beehive is destroyed (on SQLite the claim is kept instead, unfenced).
TEST_F(HaTest, AStopThatLeftAPassRunningHandsTheLeadershipOver) {
  Gate gate;  // first: it outlives the pass that waits on it
  Beehive a(open_candidate(30s));
  register_controller<WidgetSpec, WidgetStatus>(a, widget_kind,
                                                [&](const Context&, auto&, const auto&) {
                                                  gate.pass();  // ignores its context
                                                  return Result{};
                                                });
  Widgets(a, widget_kind).create({}, {"n", 1});
  auto [stop_a, changes] = start_leading(a);
  gate.wait_entered();
  EXPECT_ERRC(stop_a(Context{}.with_timeout(100ms)), errc::deadline_exceeded);
  Beehive b(open_candidate(30s));
  auto stop_b = b.start({});
  EXPECT_TRUE(eventually([&] { return b.is_leader(); }, 5s));  // the lease is 30 s
  gate.open();
  stop_b({});
}

// A leader stopped while its renewal waits on a server that does not answer (the stop
// cuts that attempt's connection) still hands the lease over, on a connection of its
// own: a standby need not wait for the lease to expire.
TEST_F(HaTest, ALeaderStoppedDuringAStuckRenewalStillHandsTheLeaseOver) {
  namespace faults = store::pg::faults;
  Beehive a(open_candidate(9s));  // renewed every 3 s, each attempt given up after 3 s
  auto stop_a = a.start({});
  ASSERT_TRUE(a.is_leader());
  silence_leader();
  ASSERT_TRUE(eventually([&] { return an_attempt_is_stuck(); })) << "no renewal of a's got stuck";
  faults::stall_campaign_of = 0;  // the release is not stalled (the attempt stays stuck)
  EXPECT_NO_THROW(stop_a(Context{}.with_timeout(5s)));
  auto expired = query_test_store(path_, "SELECT expires_at < now() FROM leadership");
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0][0], "t") << "the lease was left to expire";
}

TEST_F(HaTest, ALeaderWhoseRenewalsGetNoAnswerStepsDownBeforeAStandbyTakesOver) {
  namespace faults = store::pg::faults;
  Beehive a(open_candidate());
  auto stop_a = a.start({});
  ASSERT_TRUE(a.is_leader());
  auto b = node(schema());
  ASSERT_EQ(b->read_line(), "standby");
  silence_leader();
  using Clock = std::chrono::steady_clock;
  auto stalled = Clock::now();
  auto b_leads = std::async(std::launch::async, [&] {
    bool took = read_until(*b, "leader");
    return std::pair{took, Clock::now()};
  });
  std::optional<Clock::time_point> a_down;
  while (b_leads.wait_for(1ms) != std::future_status::ready)
    if (!a_down && !a.is_leader()) a_down = Clock::now();
  faults::stall_campaign_of = 0;
  auto [took, b_up] = b_leads.get();
  EXPECT_TRUE(took) << "the standby never took over";
  ASSERT_TRUE(a_down) << "the leader stepped down only after the standby took over";
  EXPECT_LT(*a_down, b_up);
  // Its last renewal began before the stall: down within two thirds of the lease after
  // that, give or take the campaign thread's wake-up.
  EXPECT_LE(*a_down - stalled, lease * 2 / 3 + 200ms);
  EXPECT_FALSE(a.is_leader());
  b->write_line("quit");
  EXPECT_EQ(b->wait(), 0);
  stop_a({});
}

// A leader that steps down cancels the context of the passes it has in flight: a pass
// waiting on something outside (here it watches its context) stops driving it while the
// new leader reconciles the same object, rather than only finding its writes refused.
TEST_F(HaTest, ALeaderThatStepsDownCancelsThePassesInFlight) {
  namespace faults = store::pg::faults;
  Beehive a(open_candidate());
  std::promise<void> entered;
  std::atomic<bool> saw_cancel{false};
  with_a_pass_that_watches_its_context(a, entered, saw_cancel);
  auto stop_a = a.start({});
  ASSERT_TRUE(a.is_leader());
  ASSERT_EQ(entered.get_future().wait_for(10s), std::future_status::ready);
  silence_leader();
  ASSERT_TRUE(eventually([&] { return !a.is_leader(); }, 10s)) << "it never stepped down";
  EXPECT_TRUE(eventually([&] { return saw_cancel.load(); }, 5s)) << "the pass ran on";
  faults::stall_campaign_of = 0;
  stop_a({});
  EXPECT_TRUE(saw_cancel.load());
}

// The server's clock steps forward past the leader's lease: its next renewal finds the
// lease expired and takes the next term. The term its passes began in has ended (their
// writes would fail the fence): it is a step-down and a takeover, said as such, and the
// pass in flight is cancelled rather than failing as an error.
TEST_F(HaTest, ALeaderWhoseOwnLeaseLapsedAndWhoTakesTheNextTermStepsDownAndUpAgain) {
  Beehive a(open_candidate());
  std::promise<void> entered;
  std::atomic<bool> saw_cancel{false};
  with_a_pass_that_watches_its_context(a, entered, saw_cancel);
  auto [stop_a, leadership] = start_leading(a);
  ASSERT_EQ(entered.get_future().wait_for(10s), std::future_status::ready);
  auto term = query_test_store(path_, "SELECT term FROM leadership").at(0).at(0);
  write_test_store(path_, "UPDATE leadership SET expires_at = now() - interval '1 second'");
  // The stream sees the latest value: false then true at once may read as true alone,
  // but something is said.
  auto said = leadership.next_for(5s);
  if (said == std::optional<bool>(false)) said = leadership.next_for(5s);
  EXPECT_EQ(said, std::optional<bool>(true));
  EXPECT_TRUE(eventually([&] { return saw_cancel.load(); }, 5s)) << "the pass ran on";
  EXPECT_EQ(query_test_store(path_, "SELECT term FROM leadership").at(0).at(0),
            std::to_string(std::stoll(term) + 1));
  EXPECT_TRUE(a.is_leader());
  stop_a({});
}

// The lease's expiry is written on the server's clock. Here the leader's last renewal
// reads as if the server's clock had stood an hour ahead when it ran (and was stepped
// back since), and then the leader goes silent: a standby that has seen the lease row
// unrenewed for a whole lease on its own clock takes over, within the lease + 2 s, not
// an hour later.
TEST_F(HaTest, AStandbyTakesOverInTimeWhenTheServersClockSteppedBackUnderTheLease) {
  namespace faults = store::pg::faults;
  Beehive a(open_candidate());
  auto stop_a = a.start({});
  ASSERT_TRUE(a.is_leader());
  auto b = node(schema());
  ASSERT_EQ(b->read_line(), "standby");
  auto holder = silence_leader();
  write_test_store(path_, "UPDATE leadership SET expires_at = expires_at + interval '1 hour'");
  auto silent = std::chrono::steady_clock::now();
  auto b_leads = std::async(std::launch::async, [&] { return read_until(*b, "leader"); });
  EXPECT_EQ(b_leads.wait_for(lease + 2s), std::future_status::ready) << "no takeover in time";
  b_leads.wait();  // read_until gives up by itself, at most 10 s a line
  faults::stall_campaign_of = 0;
  EXPECT_TRUE(b_leads.get());
  EXPECT_LE(std::chrono::steady_clock::now() - silent, lease + 2s);
  EXPECT_FALSE(a.is_leader());
  EXPECT_NE(lease_holder(), holder);
  b->write_line("quit");
  EXPECT_EQ(b->wait(), 0);
  stop_a({});
}

// A leader steps down and leads again (its renewals went unanswered for a while). What
// it knew of failures as the earlier leader may be stale: here a spec fixed while it was
// a standby, whose wake its controller, leading nothing, let go. Taking over starts
// afresh, as a restart does: the terminal mark is gone and the object is reconciled.
TEST_F(HaTest, ALeaderTakingOverAgainForgetsTheTerminalMarksOfItsEarlierTerm) {
  namespace faults = store::pg::faults;
  Beehive a(open_candidate());
  std::atomic<int> passes{0};
  register_controller<NodeSpec, NodeStatus>(
      a, widget_kind,
      [&](const Context& ctx, ControllerClient<NodeStatus>& cc,
          const Object<NodeSpec, NodeStatus>& obj) -> Result {
        ++passes;
        if (obj.spec.n == 1) throw TerminalError("n = 1 can never work");
        cc.update_status(ctx, obj.id, obj.generation, NodeStatus{obj.spec.n, 0});
        return {};
      });
  auto [stop_a, leadership] = start_leading(a);
  auto x = client_->create({}, {1, 0});
  auto failed = client_->watch_events({}, x.id).next_for(10s);  // the TerminalError's
  ASSERT_TRUE(failed.has_value());
  ASSERT_EQ(failed->reason, "TerminalError");

  auto holder = lease_holder();
  ASSERT_NE(holder, 0);
  faults::stall_campaign_of = holder;
  auto down = leadership.next_for(5s);
  faults::stall_campaign_of = 0;
  ASSERT_EQ(down, std::optional<bool>(false));
  client_->update({}, x.id, {2, 0});  // fixed while a leads nothing
  ASSERT_EQ(leadership.next_for(5s), std::optional<bool>(true));
  EXPECT_TRUE(all_reconciled(*client_, {{x.id, 2}}, 10s))
      << "the object fixed meanwhile was left alone; passes: " << passes.load();
  stop_a({});
}

// An operator's pg_terminate_backend, an idle-session timeout or a pooler recycling
// connections ends the leader's sessions: it connects again and renews in the same term.
// It never steps down, a standby never takes over, and its controllers carry on.
TEST_F(HaTest, ALeaderWhoseSessionsTheServerEndsKeepsLeadingInTheSameTerm) {
  Beehive a(open_candidate());
  register_controller<NodeSpec, NodeStatus>(
      a, widget_kind,
      [](const Context& ctx, ControllerClient<NodeStatus>& cc,
         const Object<NodeSpec, NodeStatus>& obj) -> Result {
        cc.update_status(ctx, obj.id, obj.generation, NodeStatus{obj.spec.n, 0});
        return {};
      });
  auto changes = a.watch_leadership({});
  ASSERT_EQ(changes.next_for(5s), std::optional<bool>(false));
  auto stop_a = a.start({});
  ASSERT_TRUE(a.is_leader());
  ASSERT_EQ(changes.next_for(5s), std::optional<bool>(true));
  auto b = node(schema());
  ASSERT_EQ(b->read_line(), "standby");

  auto lease_row = [&] {
    auto rows = query_test_store(path_, "SELECT term, expires_at FROM leadership");
    return std::pair{rows.at(0).at(0), rows.at(0).at(1)};
  };
  const auto term = lease_row().first;
  const auto end_sessions =
      "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
      "WHERE application_name = 'beehive " +
      schema() + "'";
  std::vector<std::pair<ObjectID, int>> ids;
  for (int round = 0; round < 6; ++round) {
    // Every session on the schema: the leader's campaign, writer, readers and listener,
    // the standby's, and this process's client's, each waited for until it has ended.
    query_test_store(path_, end_sessions);
    auto before = lease_row();
    EXPECT_NO_THROW(ids.emplace_back(client_->create({}, {round, 0}).id, round))
        << "round " << round;
    // Renewed after its sessions ended (an expiry later than before), in the same term.
    // The wait is generous for slow machines: a leader that went without renewing for
    // two thirds of a lease steps down, which the stream and the term show.
    auto until = std::chrono::steady_clock::now() + 5 * lease;
    auto now = lease_row();
    while (now.second == before.second && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(10ms);
      now = lease_row();
    }
    EXPECT_NE(now.second, before.second) << "round " << round << ": not renewed";
    EXPECT_EQ(now.first, term) << "round " << round << ": a new term";
    EXPECT_TRUE(a.is_leader()) << "round " << round;
  }
  EXPECT_TRUE(all_reconciled(*client_, ids, 30s)) << "the leader's controllers stopped";
  expect_leader_stayed(a, changes, *b, stop_a);
}

// A pass that began in one term and writes after its process was deposed and has become
// the leader again (a later term) is refused: what it read may predate the other
// leader's writes. The later term's own pass reconciles the object afresh.
TEST_F(HaTest, APassFromAnEarlierTermWritesNothingAfterItsProcessLeadsAgain) {
  auto gate = std::make_shared<Gate>();
  auto first = std::make_shared<std::atomic<bool>>(true);
  auto refused = std::make_shared<std::atomic<int>>(0);
  auto wrote = std::make_shared<std::atomic<int>>(0);
  Beehive a(open_candidate());
  register_controller<NodeSpec, NodeStatus>(
      a, widget_kind,
      [gate, first, refused, wrote](const Context& ctx, ControllerClient<NodeStatus>& cc,
                                    const Object<NodeSpec, NodeStatus>& obj) -> Result {
        bool held = first->exchange(false);
        if (held) gate->pass();
        try {
          cc.update_status(ctx, obj.id, obj.generation, NodeStatus{obj.spec.n, held ? 1 : 2});
          if (held) ++*wrote;
        } catch (const Error&) {
          if (held) ++*refused;
          throw;
        }
        return {};
      });
  auto [stop_a, changes] = start_leading(a);
  auto x = client_->create({}, {7, 0});
  gate->wait_entered();  // a's pass of x, in a's first term, holds here
  auto b = node(schema(), true);
  ASSERT_EQ(b->read_line(), "standby");
  silence_leader();  // a's renewals go unanswered: b takes over and writes x
  ASSERT_TRUE(read_until(*b, "leader"));
  ASSERT_TRUE(read_until(*b, "wrote " + std::to_string(x.id)));
  ASSERT_EQ(changes.next_for(10s), std::optional<bool>(false));
  store::pg::faults::stall_campaign_of = 0;
  b->write_line("quit");  // hands the lease over: a leads again, in a later term
  ASSERT_EQ(changes.next_for(10s), std::optional<bool>(true));
  EXPECT_EQ(b->wait(), 0);
  gate->open();
  // The held pass's write is refused; the new term's pass writes pid 2.
  ASSERT_TRUE(eventually([&] {
    auto o = client_->get({}, x.id);
    return o.status && o.status->pid == 2;
  }));
  EXPECT_EQ(wrote->load(), 0) << "a pass of an earlier term wrote";
  EXPECT_EQ(refused->load(), 1);
  stop_a({});
}

// A pass handed to a worker just before its process was deposed, which begins once it
// no longer leads, has no term to write in: it ends before the reconcile runs, and writes
// nothing even should the process lead again while it would still be running.
TEST_F(HaTest, APassThatBeginsAfterItsProcessWasDeposedWritesNothing) {
  Gate at_start, in_body;
  std::atomic<bool> first{true};
  std::atomic<int> ended{0}, began_deposed{0}, wrote_deposed{0};
  detail::faults::reconcile_pass = [&](bool begins) {
    if (!begins)
      ++ended;
    else if (first.exchange(false))
      at_start.pass();  // before the pass reads its term
  };
  Beehive a(open_candidate());
  register_controller<NodeSpec, NodeStatus>(
      a, widget_kind,
      [&](const Context& ctx, ControllerClient<NodeStatus>& cc,
          const Object<NodeSpec, NodeStatus>& obj) -> Result {
        bool deposed = !a.is_leader();
        if (deposed) {
          ++began_deposed;
          in_body.pass();  // until a leads again
        }
        cc.update_status(ctx, obj.id, obj.generation, NodeStatus{obj.spec.n, 1});
        if (deposed) ++wrote_deposed;
        return {};
      });
  auto [stop_a, changes] = start_leading(a);
  auto x = client_->create({}, {7, 0});
  at_start.wait_entered();  // a's pass of x, handed out while a leads, waits to begin
  auto b = node(schema(), true);
  ASSERT_EQ(b->read_line(), "standby");
  silence_leader();
  ASSERT_TRUE(read_until(*b, "leader"));
  ASSERT_TRUE(read_until(*b, "wrote " + std::to_string(x.id)));
  ASSERT_EQ(changes.next_for(10s), std::optional<bool>(false));
  store::pg::faults::stall_campaign_of = 0;
  at_start.open();  // the pass begins, in no term of a's
  ASSERT_TRUE(eventually([&] { return ended > 0 || began_deposed > 0; }));
  b->write_line("quit");  // hands the lease over: a leads again
  ASSERT_EQ(changes.next_for(10s), std::optional<bool>(true));
  EXPECT_EQ(b->wait(), 0);
  in_body.open();
  // The new term's pass writes a's status; the pass that began deposed wrote nothing.
  ASSERT_TRUE(eventually([&] {
    auto o = client_->get({}, x.id);
    return o.status && o.status->pid == 1;
  }));
  stop_a({});
  EXPECT_EQ(began_deposed.load(), 0) << "a pass that began deposed ran its reconcile";
  EXPECT_EQ(wrote_deposed.load(), 0) << "a pass that began deposed wrote";
}

// A controller that starts over (taking over, or having missed other processes' changes)
// lists the kind, and a change it hears later at or below the listing's version is taken
// as listed. A pass it began meanwhile that fails terminally, having read an older spec
// than the listing did, must not leave its mark on the newer spec: the object is
// reconciled again with it.
TEST_F(HaTest, APassEndingTerminallyDuringARelistDoesNotMarkTheSpecTheListingRead) {
  Gate held;
  std::atomic<int> terminal{0};
  Beehive a(open_candidate());
  register_controller<NodeSpec, NodeStatus>(
      a, widget_kind,
      [&](const Context& ctx, ControllerClient<NodeStatus>& cc,
          const Object<NodeSpec, NodeStatus>& obj) -> Result {
        if (obj.spec.n == 1) {
          held.pass();
          ++terminal;
          throw TerminalError("spec 1 is never right");
        }
        cc.update_status(ctx, obj.id, obj.generation, NodeStatus{obj.spec.n, 1});
        return {};
      });
  auto [stop_a, changes] = start_leading(a);
  auto controller = a.core()->controller(widget_kind);
  ASSERT_TRUE(controller);
  std::optional<ObjectID> x;
  {
    HeldReader listing(*a.core(), 30s);  // the listing waits behind it
    caf::anon_send(controller, detail::leadership_atom::value, true);  // starts over
    x = client_->create({}, {1, 0}).id;
    held.wait_entered();  // a's pass reads spec 1
    // a hears no more of the others: neither their notes nor its look at the change log.
    store::pg::faults::hold_listener_notes = true;
    store::pg::faults::fail_change_log_reads = true;
    client_->update({}, *x, {2, 0});
  }  // the listing reads spec 2, while the pass of spec 1 runs
  {
    // The reader runs its jobs in order: once one sent now is answered, the listing's
    // answer is in the controller's mailbox, ahead of an inspection sent next.
    caf::scoped_actor self{actor_system_of(a)};
    self->request(a.core()->reader(), 10s,
                  detail::ReadJob([](store::Reader&) { return caf::make_message(true); }))
        .receive([](bool) {}, [](caf::error& e) { FAIL() << error_message(e); });
    self->request(controller, 10s, inspect_atom::value)
        .receive([](const controller_state&) {}, [](caf::error& e) { FAIL() << error_message(e); });
  }
  // a hears of spec 2 now, after the listing that read it.
  store::pg::faults::hold_listener_notes = false;
  store::pg::faults::fail_change_log_reads = false;
  held.open();  // the pass of spec 1 fails terminally
  ASSERT_TRUE(eventually([&] { return terminal.load() == 1; }));
  EXPECT_TRUE(all_reconciled(*client_, {{*x, 2}}, 10s)) << "spec 2 was left unreconciled";
  stop_a({});
}

// A leader whose write finds that another process took the lease says at once that it
// no longer leads, on its leadership stream as in is_leader(): not only at its next
// renewal (a third of its lease later).
TEST_F(HaTest, ALeaderDeposedByAFencedWriteSaysSoAtOnce) {
  Beehive a(open_candidate(60s));  // renews every 20 s
  register_controller<NodeSpec, NodeStatus>(
      a, widget_kind,
      [](const Context& ctx, ControllerClient<NodeStatus>& cc,
         const Object<NodeSpec, NodeStatus>& o) {
        cc.update_status(ctx, o.id, o.generation, NodeStatus{o.spec.n, 1});
        return Result{};
      });
  auto [stop_a, changes] = start_leading(a);
  // Another process takes the lease (written here as its takeover would).
  write_test_store(path_,
                   "UPDATE leadership SET holder = holder + 1000000, term = term + 1, "
                   "expires_at = now() + interval '1 hour'");
  client_->create({}, {7, 0});  // a's pass of it writes, and finds the lease taken
  EXPECT_EQ(changes.next_for(5s), std::optional<bool>(false));
  EXPECT_FALSE(a.is_leader());
  write_test_store(path_, "UPDATE leadership SET holder = 0, expires_at = '-infinity'");
  stop_a({});
}

// A leadership stream tells each change once: a standby's stream opened before its start
// says "not leading" and nothing more when start finds a leader already there.
TEST_F(HaTest, AStandbysLeadershipStreamSaysItDoesNotLeadOnce) {
  auto leader = node(schema());
  ASSERT_EQ(leader->read_line(), "leader");
  Beehive b(open_candidate());
  auto changes = b.watch_leadership({});
  ASSERT_EQ(changes.next_for(5s), std::optional<bool>(false));
  auto stop_b = b.start({});
  EXPECT_FALSE(b.is_leader());
  EXPECT_EQ(changes.next_for(0ms), std::nullopt) << "told again what it was told";
  stop_b({});
  leader->write_line("quit");
  EXPECT_EQ(leader->wait(), 0);
}

// Processes may be given different leases: a standby whose lease is shorter than a third
// of the leader's sees the lease row unchanged for longer than its own lease between two
// renewals, and must still not take a lease that its holder keeps renewing.
TEST_F(HaTest, AStandbyWithAShorterLeaseDoesNotDeposeAHealthyLeader) {
  constexpr auto long_lease = 6s;  // renewed every 2 s
  Beehive a(open_candidate(long_lease));
  auto [stop_a, changes] = start_leading(a);
  auto b = node(schema(), false, 500ms);  // looks every 250 ms
  ASSERT_EQ(b->read_line(), "standby");
  // Three of the leader's renewals: b saw the row unchanged for 2 s, four of its leases.
  auto renewals = [&] {
    return query_test_store(path_, "SELECT expires_at FROM leadership").at(0).at(0);
  };
  for (int i = 0; i < 3; ++i) {
    auto before = renewals();
    auto until = std::chrono::steady_clock::now() + 2 * long_lease;
    while (renewals() == before && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(20ms);
  }
  expect_leader_stayed(a, changes, *b, stop_a);
}

// A leader's own leader writes hold the lease row until they commit (fencing), and must
// not hold up its renewals meanwhile: a reconcile whose transaction spans several
// renewals (longer than a leader may go unrenewed) keeps its process leading, in its
// term.
TEST_F(HaTest, ALeadersLongTransactionDoesNotHoldUpItsOwnRenewals) {
  constexpr auto its_lease = 1500ms;
  Gate gate;
  Beehive a(open_candidate(its_lease));
  register_controller<NodeSpec, NodeStatus>(
      a, widget_kind,
      [&](const Context& ctx, ControllerClient<NodeStatus>& cc,
          const Object<NodeSpec, NodeStatus>& obj) -> Result {
        cc.within(ctx, [&](const Context& tx) {
          cc.update_status(tx, obj.id, obj.generation, NodeStatus{obj.spec.n, 0});  // fenced
          gate.pass();
        });
        return {};
      });
  auto [stop_a, changes] = start_leading(a);
  const auto term = query_test_store(path_, "SELECT term FROM leadership").at(0).at(0);
  auto id = client_->create({}, {1, 0}).id;
  gate.wait_entered();
  // Held longer than two thirds of the lease (unrenewed that long, a leader steps down)
  // and shorter than the lease (idle that long, the server ends the transaction).
  EXPECT_EQ(changes.next_for(its_lease * 5 / 6), std::nullopt)
      << "the leader stepped down while its own transaction was open";
  gate.open();
  EXPECT_TRUE(all_reconciled(*client_, {{id, 1}}, 30s));
  EXPECT_TRUE(a.is_leader());
  EXPECT_EQ(query_test_store(path_, "SELECT term FROM leadership").at(0).at(0), term);
  stop_a({});
}

// A leader cut off from the server in the middle of one of its fenced transactions
// (whose lock on the lease row holds a takeover up) does not hold the takeover until the
// server ends that transaction for idleness, a lease after it began waiting: once the
// lease has expired, the standby taking over ends it.
TEST_F(HaTest, ATakeoverEndsTheFencedTransactionAnExpiredLeaderLeftOpen) {
  constexpr auto long_lease = 6s;  // renewed every 2 s; steps down 4 s after a renewal
  Gate before_write, held;
  std::atomic<bool> first{true}, block_failed{false};
  Beehive a(open_candidate(long_lease));
  register_controller<NodeSpec, NodeStatus>(
      a, widget_kind,
      [&](const Context& ctx, ControllerClient<NodeStatus>& cc,
          const Object<NodeSpec, NodeStatus>& obj) -> Result {
        if (!first.exchange(false)) return {};
        before_write.pass();
        try {
          cc.within(ctx, [&](const Context& tx) {
            cc.update_status(tx, obj.id, obj.generation, NodeStatus{obj.spec.n, 0});  // fenced
            held.pass();  // idle inside the transaction, as a leader cut off here would be
          });
        } catch (const Error& e) {
          // Rolled back: its commit failed the fence, or (a stepped down first) the
          // block's context, cancelled, undid it.
          if (e.code() == errc::store || e.code() == errc::cancelled) block_failed = true;
          throw;
        }
        return {};
      });
  auto [stop_a, changes] = start_leading(a);
  auto x = client_->create({}, {1, 0});
  before_write.wait_entered();
  silence_leader();  // a's last renewal stands: the lease expires 6 s after it
  auto b = node(schema(), true);
  ASSERT_EQ(b->read_line(), "standby");
  // Half way to the expiry, before a steps down (2 s before it), a's transaction begins.
  auto left = [&] {
    return std::stod(
        query_test_store(path_, "SELECT extract(epoch FROM expires_at - now()) FROM leadership")
            .at(0)
            .at(0));
  };
  auto until = std::chrono::steady_clock::now() + long_lease;
  while (left() > 3.5 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(a.is_leader());
  auto opened = std::chrono::steady_clock::now();
  before_write.open();
  // Without the standby ending it, the server would end a's transaction (and so let the
  // takeover through) only once idle for a's lease: 6 s from here at the earliest.
  ASSERT_TRUE(read_until(*b, "leader"));
  EXPECT_LT(std::chrono::steady_clock::now() - opened, long_lease - 500ms)
      << "the takeover waited for the server to end the expired leader's transaction";
  ASSERT_TRUE(read_until(*b, "wrote " + std::to_string(x.id)));
  held.open();
  ASSERT_TRUE(eventually([&] { return block_failed.load(); }));  // its commit failed
  EXPECT_NE(client_->get({}, x.id).status->pid, 0) << "the ended transaction committed";
  b->write_line("quit");
  EXPECT_EQ(b->wait(), 0);
  stop_a({});
}

// A campaign ends only a deposed leader's fenced transactions: a session idle inside a
// transaction that holds the lease table for another reason (here, as a newer build's
// migration would, between its statements) is waited for, not ended.
TEST_F(HaTest, ACampaignWaitingOnAMigrationsLockEndsNoSession) {
  Beehive a(open_candidate());
  auto [stop_a, changes] = start_leading(a);
  store::pg::Connection migration(std::getenv("BEEHIVE_TEST_PG"), schema(), 5s);
  migration.exec("BEGIN");
  migration.exec("LOCK TABLE leadership IN ACCESS EXCLUSIVE MODE");
  const auto waiting =
      "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
      "AND application_name = 'beehive " +
      schema() + "'";
  auto waiters = [&] { return query_test_store(path_, waiting).at(0).at(0); };
  // A renewal waits for it, then gives up (a third of the lease), having looked at its
  // blockers after 100 ms.
  auto until = std::chrono::steady_clock::now() + 10s;
  while (waiters() == "0" && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(5ms);
  ASSERT_NE(waiters(), "0") << "no renewal waited for the lock";
  while (waiters() != "0" && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(5ms);
  EXPECT_NO_THROW(migration.exec("COMMIT")) << "the campaign ended the migration's session";
  stop_a({});
}

// A process killed inside a write transaction holds nobody up: the server ends its
// session (and the transaction) as the connection closes, long before a lease, and
// nothing of the transaction is stored.
TEST_F(HaTest, AProcessKilledInsideAWriteTransactionHoldsNobodyUpAndLeavesNothing) {
  auto a = node(schema());
  ASSERT_EQ(a->read_line(), "leader");
  auto o = client_->create({}, {1, 0});
  a->write_line("hold");
  ASSERT_TRUE(read_until(*a, "holding"));
  // While it lives, a write waits for its transaction.
  EXPECT_ERRC(client_->update(Context{}.with_timeout(300ms), o.id, {2, 0}),
              errc::deadline_exceeded);
  a->kill(SIGKILL);
  auto killed = std::chrono::steady_clock::now();
  // This process's writes wait up to its lease (10 s, the default) for another's lock.
  EXPECT_NO_THROW(client_->update({}, o.id, {2, 0}));
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 3s) << "waited for a dead process's lock";
  EXPECT_ERRC(client_->get_by_slug({}, "held"), errc::not_found);
  EXPECT_EQ(client_->get({}, o.id).spec.n, 2);
}

// A leader that stops releases the lease: a standby takes over at its next look
// (~250 ms), not once the lease (10 s here) has run out.
TEST_F(HaTest, AStoppingLeaderHandsOverToAStandbyAtOnce) {
  constexpr auto long_lease = 10s;
  Beehive a(open_candidate(long_lease));
  auto stop_a = a.start({});
  ASSERT_TRUE(a.is_leader());
  auto b = node(schema(), false, long_lease);
  ASSERT_EQ(b->read_line(), "standby");
  stop_a({});
  auto stopped = std::chrono::steady_clock::now();
  ASSERT_EQ(b->read_line(), "leader");
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, 3s) << "waited for the lease instead";
  b->write_line("quit");
  EXPECT_EQ(b->wait(), 0);
}

// A standby whose stop waits (for an open within block) runs no controllers any more: it
// must not take the lease the leader hands over meanwhile, which would hold every other
// standby off until that stop ends. A standby started then takes over at once.
TEST_F(HaTest, AStandbyThatIsStoppingTakesNoLeadership) {
  constexpr auto long_lease = 10s;
  auto a = node(schema(), false, long_lease);
  ASSERT_EQ(a->read_line(), "leader");
  Beehive b(open_candidate(long_lease));
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      b, widget_kind, [](const Context&, auto&, const auto&) { return Result{}; });
  auto b_changes = b.watch_leadership({});
  ASSERT_EQ(b_changes.next_for(5s), std::optional<bool>(false));
  auto stop_b = b.start({});
  std::promise<void> entered, release;
  std::thread block([&] {
    cc.within({}, [&](const Context&) {
      entered.set_value();
      release.get_future().wait();
    });
  });
  entered.get_future().wait();
  std::thread stopping([&] {
    try {
      stop_b(Context{}.with_timeout(30s));  // waits for the block
    } catch (const Error&) {
    }
  });
  // Draining: its clients say stopped (the block goes on).
  ASSERT_TRUE(eventually([&] {
    try {
      Widgets(b, widget_kind).list({});
      return false;
    } catch (const Error& e) {
      return e.code() == errc::stopped;
    }
  }));
  a->write_line("quit");  // hands the lease over
  EXPECT_EQ(a->wait(), 0);
  // A standby looks at the lease every 250 ms: six looks, and none takes it.
  EXPECT_FALSE(eventually(
      [&] {
        return query_test_store(path_, "SELECT count(*) FROM leadership WHERE expires_at > now()")
                   .at(0)
                   .at(0) != "0";
      },
      1500ms))
      << "the stopping standby took the lease";
  auto c = node(schema(), false, long_lease);
  EXPECT_TRUE(read_until(*c, "leader"));  // 10 s at most: the lease is 10 s
  release.set_value();
  block.join();
  stopping.join();
  EXPECT_EQ(b_changes.next_for(0ms), std::nullopt) << "the stopping standby took the lead";
  c->write_line("quit");
  EXPECT_EQ(c->wait(), 0);
}

TEST_F(HaTest, AStandbyStoppedWhileItsTakeoverWaitsForALockTakesNothingAfterwards) {
  stop_a_standby_whose_take_waits({});
}

// The same after the server ended the standby's sessions while they sat idle (a server
// restart, a failover, an idle timeout): its campaign reconnects as it next looks, and
// the new session is given up with the process just the same.
TEST_F(HaTest, AStandbyWhoseSessionsTheServerEndedTakesNothingOnceStopped) {
  stop_a_standby_whose_take_waits([&] {
    const auto of_the_schema = "FROM pg_stat_activity WHERE application_name = 'beehive " +
                               schema() + "' AND state = 'idle'";
    // Its campaign finds its session gone as it next looks, and connects again.
    write_test_store(path_, "SELECT pg_terminate_backend(pid) " + std::string(of_the_schema));
  });
}

// An expired leader's fenced transaction whose session is stuck sending a result its
// process does not read (paused, or cut off, in the middle of a large read): a takeover
// ends it as it ends an idle one, rather than waiting for the server's TCP to give up.
TEST_F(HaTest, ATakeoverEndsAFencedTransactionStuckSendingAResult) {
  write_test_store(path_,
                   "UPDATE leadership SET holder = 987654321, "
                   "expires_at = now() - interval '1 second' WHERE id = 1");
  PGconn* stuck = PQconnectdb(std::getenv("BEEHIVE_TEST_PG"));
  ASSERT_EQ(PQstatus(stuck), CONNECTION_OK) << PQerrorMessage(stuck);
  auto begin = "SET application_name = 'stuck reader'; SET search_path TO \"" + schema() +
               "\"; BEGIN; SELECT 1 FROM leadership WHERE id = 1 FOR KEY SHARE";
  PQclear(PQexec(stuck, begin.c_str()));
  ASSERT_EQ(PQtransactionStatus(stuck), PQTRANS_INTRANS);
  // Far more than the socket holds, never read.
  ASSERT_EQ(PQsendQuery(stuck, "SELECT repeat('x', 1000000) FROM generate_series(1, 1000)"), 1);
  ASSERT_TRUE(
      eventually([&] { return sessions("stuck reader", "wait_event = 'ClientWrite'") == "1"; }));
  Beehive b(open_candidate());
  auto stop_b = b.start({});
  EXPECT_TRUE(eventually([&] { return b.is_leader(); }, 5s)) << "the takeover waited";
  stop_b({});
  PQfinish(stuck);
}

TEST_F(HaTest, ALeaderPausedPastItsLeaseWritesNothingAsLeaderWhenResumedAndStepsDown) {
  auto a = node(schema(), true);
  ASSERT_EQ(a->read_line(), "leader");
  auto b = node(schema(), true);
  ASSERT_EQ(b->read_line(), "standby");
  // A pass that sleeps before its status write: a is paused inside it.
  auto slow = client_->create({}, {7, 3000});
  ASSERT_TRUE(read_until(*a, "reconciling " + std::to_string(slow.id)));
  a->signal(SIGSTOP);
  auto paused = std::chrono::steady_clock::now();
  ASSERT_TRUE(read_until(*b, "leader"));
  EXPECT_LE(std::chrono::steady_clock::now() - paused, lease + 2s);
  // The new leader reconciles it (its own 3 s sleep, then its write).
  ASSERT_TRUE(read_until(*b, "wrote " + std::to_string(slow.id)));
  auto by_b = client_->get({}, slow.id);
  auto rv_after_b = by_b.resource_version;
  // a resumes inside its pass: its write is refused, and it steps down.
  a->signal(SIGCONT);
  std::vector<std::string> a_said;
  ASSERT_TRUE(read_until(*a, "standby", &a_said));
  bool refused = false, wrote = false;
  for (auto& l : a_said) {
    refused |= l == "refused " + std::to_string(slow.id);
    wrote |= l == "wrote " + std::to_string(slow.id);
  }
  EXPECT_FALSE(wrote) << "the deposed leader's write committed";
  // Its write may also come after the step-down; either way it must not land.
  if (!refused) {
    ASSERT_TRUE(read_until(*a, "refused " + std::to_string(slow.id)));
  }
  auto now = client_->get({}, slow.id);
  EXPECT_EQ(now.resource_version, rv_after_b) << "something wrote after the takeover";
  ASSERT_TRUE(now.status && by_b.status);
  EXPECT_EQ(now.status->pid, by_b.status->pid);
  a->write_line("quit");
  b->write_line("quit");
  // The refused pass is the new leader's to redo: a neither retries it nor says it will.
  read_until(*a, "<to the end>", &a_said);
  for (auto& l : a_said) EXPECT_EQ(l.find("log reconcile failed"), std::string::npos) << l;
  EXPECT_EQ(a->wait(), 0);
  EXPECT_EQ(b->wait(), 0);
}

// A process paused (SIGSTOP) while the change log was trimmed past what it had read,
// and which missed a commit whose note could not carry it (too large), can never
// deliver the changes it missed. Once resumed, its watches end with watch_too_old
// instead of going on without them, and its controller (it leads) reconciles what
// changed meanwhile, though it has no resync to fall back on.
TEST_F(HaTest, AProcessPausedWhileTheLogWasTrimmedPastEndsItsWatchesAndReconcilesAgain) {
  std::unique_ptr<ChildProcess> a;
  Node o;
  ASSERT_NO_FATAL_FAILURE(watching_leader(a, o));
  const auto seen_o = "seen " + std::to_string(o.id);

  ASSERT_NO_FATAL_FAILURE(pause_when_idle(*a));
  Labels many;  // more than a notification holds
  for (int i = 0; i < 150; ++i) many["label-" + std::to_string(i)] = std::string(60, 'v');
  client_->set_labels({}, o.id, many);
  client_->update({}, o.id, {2, 0});
  auto p = client_->create({}, {1, 0});
  // The leader's GC would trim by age or count; the test trims at once what a has not read.
  trim_change_log(p.resource_version - 1);
  a->signal(SIGCONT);

  std::vector<std::string> said;
  ASSERT_TRUE(
      read_until(*a, "watch ended " + make_error_code(errc::watch_too_old).message(), &said));
  for (const auto& line : said) EXPECT_NE(line, seen_o + " 2") << "a change it cannot have read";
  ASSERT_TRUE(all_reconciled(*client_, {{o.id, 2}, {p.id, 1}}, 30s));
  for (const auto& obj : client_->list({})) EXPECT_EQ(obj.status->pid, a->pid());
  a->write_line("quit");
  EXPECT_EQ(a->wait(), 0);
}

// Paused the same way, a process whose missed commits all came with their notes (each
// small enough to carry what it changed) has lost nothing: the server kept the notes
// for its listener, and it delivers every change in order, though the log no longer
// holds them.
TEST_F(HaTest, AProcessPausedWhileTheLogWasTrimmedPastDeliversWhatItsNotesCarried) {
  std::unique_ptr<ChildProcess> a;
  Node o;
  ASSERT_NO_FATAL_FAILURE(watching_leader(a, o));
  const auto seen_o = "seen " + std::to_string(o.id);

  ASSERT_NO_FATAL_FAILURE(pause_when_idle(*a));
  client_->update({}, o.id, {2, 0});
  auto p = client_->create({}, {1, 0});
  trim_change_log(p.resource_version);
  a->signal(SIGCONT);

  std::vector<std::string> said;
  ASSERT_TRUE(read_until(*a, "seen " + std::to_string(p.id) + " 1", &said));
  // In order (its own controller's status writes may add lines of o in between).
  EXPECT_EQ(said.front(), seen_o + " 2");
  for (const auto& line : said) EXPECT_FALSE(line.starts_with("watch ended")) << line;
  ASSERT_TRUE(all_reconciled(*client_, {{o.id, 2}, {p.id, 1}}, 30s));
  a->write_line("quit");
  EXPECT_EQ(a->wait(), 0);
}

TEST_F(HaTest, ARequeueOnAStandbyIsReconciledByTheLeader) {
  auto a = node(schema(), true);
  ASSERT_EQ(a->read_line(), "leader");
  auto o = client_->create({}, {1, 0});
  ASSERT_TRUE(read_until(*a, "wrote " + std::to_string(o.id)));
  // This process starts as a standby: its own controller never runs.
  std::atomic<int> here{0};
  register_controller<NodeSpec, NodeStatus>(*bh_, widget_kind, [&here](auto&, auto&, auto&) {
    ++here;
    return Result{};
  });
  auto stop = bh_->start({});
  ASSERT_FALSE(bh_->is_leader());
  client_->requeue({}, o.id);
  ASSERT_TRUE(read_until(*a, "reconciling " + std::to_string(o.id)));
  EXPECT_EQ(here.load(), 0);
  // Asked with the backoff reset, the logged request says so to the leader, whose
  // controller acts on it as on its own (ReconcileTest.ARequeueThroughTheChangeLog...).
  const auto latest_parts = [&] {
    auto rows = query_test_store(
        path_, "SELECT parts FROM change_log WHERE object_id = " + std::to_string(o.id) +
                   " ORDER BY resource_version DESC LIMIT 1");
    return rows.empty() ? -1 : std::stoll(rows[0][0]);
  };
  const long long reset_bit = 1 << 17, requeue_bit = 1 << 16;
  EXPECT_EQ(latest_parts() & (reset_bit | requeue_bit), requeue_bit);
  client_->requeue({}, o.id, with_reset_backoff());
  EXPECT_EQ(latest_parts() & (reset_bit | requeue_bit), reset_bit | requeue_bit);
  ASSERT_TRUE(read_until(*a, "reconciling " + std::to_string(o.id)));
  // An actor's requeue_request to the standby's controller does the same.
  auto controller = actor_handles(*bh_).controller(widget_kind);
  ASSERT_TRUE(controller);
  auto ask = [&](ObjectID id) -> std::optional<errc> {
    caf::scoped_actor self{actor_system_of(*bh_)};
    std::optional<errc> failed;
    self->request(*controller, 10s, requeue_request{id, true})
        .receive([](bool queued) { EXPECT_TRUE(queued); },
                 [&](caf::error& e) { failed = to_errc(e).value_or(errc::store); });
    return failed;
  };
  EXPECT_EQ(ask(o.id), std::nullopt);
  EXPECT_EQ(latest_parts() & (reset_bit | requeue_bit), reset_bit | requeue_bit);
  ASSERT_TRUE(read_until(*a, "reconciling " + std::to_string(o.id)));
  EXPECT_EQ(ask(o.id + 1000), std::optional<errc>(errc::not_found));
  EXPECT_EQ(here.load(), 0);
  stop({});
  a->write_line("quit");
  EXPECT_EQ(a->wait(), 0);
}

// On a standby the housekeeping cadence does nothing: a settle asked while it was due
// (before its wake reached the gc and the event log) returns all the same.
TEST_F(HaTest, SettleReturnsOnAStandbyWhoseHousekeepingFellDue) {
  auto a = node(schema());
  ASSERT_EQ(a->read_line(), "leader");
  auto clock = std::make_shared<ManualClock>();
  Beehive standby(open_candidate(), with_clock(clock), with_resync_interval(1min));
  register_controller<NodeSpec, NodeStatus>(standby, widget_kind,
                                            [](auto&, auto&, auto&) { return Result{}; });
  auto stop = standby.start({});
  ASSERT_FALSE(standby.is_leader());
  for (int round = 0; round < 100; ++round) {
    clock->advance(1min);
    EXPECT_NO_THROW(testing::settle(standby, Context{}.with_timeout(5s))) << "round " << round;
  }
  stop({});
  a->write_line("quit");
  EXPECT_EQ(a->wait(), 0);
}

TEST_F(HaTest, TheLeadersWorkIsRefusedToAProcessThatDoesNotLead) {
  // This process's beehive is not started: it leads nothing. Clients write as usual;
  // the collector's work is the leader's and is refused (fenced), writing nothing.
  auto o = client_->create({}, {1, 0});
  client_->remove({}, o.id);
  caf::scoped_actor self{actor_system_of(*bh_)};
  std::string refused;
  self->request(bh_->store_writer(), 10s, collect_request{})
      .receive([](int) {}, [&](caf::error& e) { refused = actor_system_of(*bh_).render(e); });
  EXPECT_NE(refused.find("not the leader"), std::string::npos) << refused;
  EXPECT_TRUE(client_->get({}, o.id).deletion_requested_at) << "still there, not collected";
}

}  // namespace

TEST(Leadership, AStartedSqliteBeehiveAlwaysLeads) {
  REQUIRE_SQLITE("the SQLite case of leadership");
  TempDir dir;
  Beehive bh(sqlite::open(dir.file("one.db")));
  EXPECT_FALSE(bh.is_leader());  // not started
  auto changes = bh.watch_leadership({});
  EXPECT_EQ(changes.next_for(5s), std::optional<bool>(false));
  auto stop = bh.start({});
  EXPECT_TRUE(bh.is_leader());
  EXPECT_EQ(changes.next_for(5s), std::optional<bool>(true));
  stop({});
  EXPECT_FALSE(bh.is_leader());
  EXPECT_EQ(changes.next_for(5s), std::nullopt);
  EXPECT_EQ(changes.error(), make_error_code(errc::stopped));
}

// A stream opened while start runs (here by the logger, which start calls to warn of the
// file's mode) starts from what start found, and follows it.
TEST(Leadership, AStreamOpenedWhileStartRunsStartsFromWhatItFound) {
  REQUIRE_SQLITE("a warning SQLite's start logs");
  TempDir dir;
  auto file = dir.file("one.db");
  { sqlite::open(file); }
  std::filesystem::permissions(file, std::filesystem::perms::others_read,
                               std::filesystem::perm_options::add);
  Beehive* self = nullptr;
  std::optional<Stream<bool>> late;
  Beehive bh(sqlite::open(file), with_logger([&](LogLevel, std::string_view, const LogFields&) {
               if (self && !late) late.emplace(self->watch_leadership({}));
             }));
  self = &bh;
  auto stop = bh.start({});
  ASSERT_TRUE(late.has_value()) << "start logged nothing";
  EXPECT_TRUE(bh.is_leader());
  EXPECT_EQ(late->next_for(5s), std::optional<bool>(true));  // nothing comes after a false
  stop({});
  EXPECT_EQ(late->next_for(5s), std::nullopt);
}

// A stream opened before a start that failed, or never came, ends with the beehive.
TEST(Leadership, AStreamOfABeehiveThatNeverRanEndsWhenItGoes) {
  REQUIRE_SQLITE("a second start on one file being refused");
  TempDir dir;
  auto path = dir.file("one.db");
  Beehive first(sqlite::open(path));
  auto stop = first.start({});
  std::optional<Stream<bool>> refused, never;
  {
    Beehive second(sqlite::open(path));
    refused.emplace(second.watch_leadership({}));
    EXPECT_EQ(refused->next_for(5s), std::optional<bool>(false));
    EXPECT_ERRC(second.start({}), errc::store_in_use);
    Beehive idle(sqlite::open(dir.file("other.db")));
    never.emplace(idle.watch_leadership({}));
    EXPECT_EQ(never->next_for(5s), std::optional<bool>(false));
  }
  for (auto* s : {&*refused, &*never}) {
    EXPECT_EQ(s->next_for(5s), std::nullopt);
    EXPECT_EQ(s->error(), make_error_code(errc::stopped));
  }
  stop({});
}

TEST(Leadership, ASinglePostgresBeehiveLeadsAndHandsOverOnStop) {
  REQUIRE_POSTGRES();
  TempDir dir;
  auto path = dir.file("one.db");
  {
    Beehive bh(open_test_store(path));
    auto stop = bh.start({});
    EXPECT_TRUE(bh.is_leader());
    stop({});
    EXPECT_FALSE(bh.is_leader());
  }
  // Released at stop: the next one leads at once, without waiting for the lease.
  Beehive again(open_test_store(path));
  auto stop = again.start({});
  EXPECT_TRUE(again.is_leader());
  stop({});
}

// A leader renews a third of a lease after its last renewal began, not after it ended:
// a server slow to renew (here 0.3 s of a 1.5 s lease, over a sixth of it) leaves every
// renewal its whole third, and the leader never steps down while its lease holds.
TEST(Leadership, APostgresLeaderWhoseRenewalsAreSlowButSucceedKeepsLeading) {
  REQUIRE_POSTGRES();
  TempDir dir;
  auto path = dir.file("slow.db");
  Beehive bh(open_with_lease(path, 1500ms));
  write_test_store(path, R"sql(
      CREATE FUNCTION slow_renewal() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END $$;
      CREATE TRIGGER slow_renewal BEFORE UPDATE ON leadership
        FOR EACH ROW EXECUTE FUNCTION slow_renewal())sql");
  auto stop = bh.start({});
  // The take is slow too: on a loaded machine it may outlast start's first attempt (a
  // third of the lease), and the campaign's next one takes the lease.
  ASSERT_TRUE(eventually([&] { return bh.is_leader(); }));
  auto leadership = bh.watch_leadership({});
  EXPECT_EQ(leadership.next_for(5s), std::optional<bool>(true));
  EXPECT_EQ(leadership.next_for(6s), std::nullopt) << "the leader stepped down";
  EXPECT_TRUE(bh.is_leader());
  stop({});
}

// A newer build that migrates the schema while an older one runs takes the store over:
// the older process's next write is refused (after the migration committed, it can no
// longer know what its rows mean), and it neither renews nor takes the lease again.
TEST(Leadership, APostgresProcessWhoseSchemaANewerBuildMigratedStopsWritingAndLeading) {
  REQUIRE_POSTGRES();
  TempDir dir;
  auto path = dir.file("older.db");
  Beehive bh(open_with_lease(path, 1000ms));
  auto stop = bh.start({});
  ASSERT_TRUE(bh.is_leader());
  auto leadership = bh.watch_leadership({});
  ASSERT_EQ(leadership.next_for(5s), std::optional<bool>(true));
  Widgets w(bh, widget_kind);
  auto o = w.create({}, {"before", 1});
  write_test_store(path, "UPDATE beehive_schema SET version = version + 1");
  EXPECT_ERRC_WITH(w.update({}, o.id, {"after", 2}), errc::store, "newer build");
  EXPECT_ERRC_WITH(w.create({}, {"after", 3}), errc::store, "newer build");
  EXPECT_EQ(w.get({}, o.id).spec.color, "before");
  EXPECT_EQ(w.list({}).size(), 1u);
  EXPECT_EQ(leadership.next_for(5s), std::optional<bool>(false));
  EXPECT_FALSE(bh.is_leader());
  stop({});
}

// A liveness condition is as current as the process that keeps it: the leader, whose
// controllers write it. Every process reads the leader's as written (here a second,
// unstarted beehive on the store, as a process serving reads would be); once nobody or
// another process leads, they read as Unknown until its controllers confirm them again.
TEST(Leadership, APostgresLeadersLivenessConditionsReadAsWrittenInEveryProcessWhileItLeads) {
  REQUIRE_POSTGRES();
  TempDir dir;
  auto path = dir.file("one.db");
  Beehive leader(open_test_store(path));
  auto noop = [](auto&, auto&, auto&) { return Result{}; };
  auto cc = register_controller<WidgetSpec, WidgetStatus>(leader, widget_kind, noop);
  auto stop_leader = leader.start({});
  ASSERT_TRUE(leader.is_leader());
  Beehive other(open_test_store(path));

  auto o = Widgets(leader, widget_kind).create({}, {"a", 1});
  cc.set_condition({}, o.id, {"Connected", ConditionStatus::True, "Dialed", "", true});
  cc.set_condition({}, o.id, {"Configured", ConditionStatus::True, "Applied", "", false});
  using Statuses = std::map<std::string, ConditionStatus>;
  auto read_on = [&](Beehive& bh) {
    Statuses out;
    for (auto& c : Widgets(bh, widget_kind).get({}, o.id).conditions) out[c.type] = c.status;
    return out;
  };
  const Statuses written{{"Configured", ConditionStatus::True},
                         {"Connected", ConditionStatus::True}};
  const Statuses verifying{{"Configured", ConditionStatus::True},
                           {"Connected", ConditionStatus::Unknown}};
  EXPECT_EQ(read_on(leader), written);
  EXPECT_EQ(read_on(other), written);

  // Another process takes the lease (written here as its takeover would): the deposed
  // leader reads its own liveness conditions as Unknown too, as every process does.
  write_test_store(path,
                   "UPDATE leadership SET holder = holder + 1000000, term = term + 1, "
                   "expires_at = now() + interval '1 hour'");
  EXPECT_EQ(read_on(leader), verifying);
  EXPECT_EQ(read_on(other), verifying);
  write_test_store(path, "UPDATE leadership SET holder = 0, expires_at = '-infinity'");

  stop_leader({});  // the lease is released: nobody leads
  EXPECT_EQ(read_on(other), verifying);
  auto stop_other = other.start({});  // another process leads
  ASSERT_TRUE(other.is_leader());
  EXPECT_EQ(read_on(other), verifying);
  stop_other({});
}
}  // namespace beehive::test
