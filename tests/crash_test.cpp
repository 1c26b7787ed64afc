// Crash safety (issue 10, item 1): a writer process (tests/crash/writer.cpp) makes writes
// of every kind and reports each on a pipe before and after it is made; the test kills it
// with SIGKILL at a random moment, reopens the database and checks that
//
//  - it opens cleanly: PRAGMA integrity_check is ok, PRAGMA foreign_key_check is empty;
//  - the stored state is exactly the acknowledged writes applied in order, or those plus
//    the one write that was in flight (the last one described but not acknowledged):
//    every acknowledged write is present, nothing else was written, and a `within`
//    block is all or nothing (also checked on its own). The only other difference
//    allowed is that the writer's GC may have collected an object whose deletion was
//    requested and whose finalizers are all gone;
//  - a fresh Beehive converges: a controller removes the finalizers of deletion-pending
//    objects and records status; every deletion-pending object gets collected, every
//    other one ends with observed_generation == generation, and nothing else changes.
//
// Cycles run on the same file, so each one also checks that earlier cycles' writes
// survived. Two tests:
//
//  - Crash.KillsAtRandomPointsLoseNoAcknowledgedWrite: writes of every kind, 50 kills by
//    default (every fifth writer uses synchronous = FULL, about one in ten is killed
//    during its start-up);
//  - Crash.LargeWithinBlocksSurviveKillsMidFlightAndWhileIdle: `within` blocks that
//    outgrow SQLite's page cache (an update, 900 creates of 1.5 KB specs, the update
//    again), 8 kills by default, every combination of synchronous = NORMAL / FULL and of
//    a kill while the writer sits idle after the block's acknowledgement / at a random
//    moment of a block. An acknowledged block must be there whole even though nothing was
//    written after it: no layer may hold back any of its bytes.
//
// Ten times as many kills with BEEHIVE_STRESS set:
//
//   BEEHIVE_STRESS=1 ./build/default/beehive_tests --gtest_filter='Crash*'
//
// (or configure with -DBEEHIVE_STRESS_TESTS=ON and run `ctest -L stress`).
// BEEHIVE_CRASH_KILLS=<n> overrides the number of kills; BEEHIVE_CRASH_SEED=<n> replays
// a run's random choices (kill delays, the writers' seeds; the seed is printed at the
// start), though not where exactly each kill lands.

#ifndef BEEHIVE_CRASH_WRITER
#error "CMakeLists.txt defines BEEHIVE_CRASH_WRITER, the path of the crash_writer program"
#endif

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include <beehive/testing.hpp>

#include "controller_fixture.hpp"
#include "crash/protocol.hpp"

extern char** environ;

namespace beehive::test {
namespace {

using namespace beehive::crash;
using SteadyClock = std::chrono::steady_clock;
using nlohmann::json;

// --- the model: an object as the test compares it -------------------------------------

struct CondState {
  std::string status, reason, message;
  friend bool operator==(const CondState&, const CondState&) = default;
};

struct RunState {
  std::string category, type, reason, message;
  json detail;
  std::int64_t count = 1;
  friend bool operator==(const RunState&, const RunState&) = default;
};

struct ObjState {
  json spec;
  std::int64_t generation = 1;
  std::optional<std::int64_t> observed_generation;
  json status;  // null: none recorded
  bool deleting = false;
  std::vector<std::string> finalizers;
  std::map<std::string, CondState> conditions;
  std::vector<RunState> events;  // in insertion order
  friend bool operator==(const ObjState&, const ObjState&) = default;
};

// By slug: the writer gives every object one.
using State = std::map<std::string, ObjState>;

/// A spec as messages show it: a bulk-created one's cut short.
std::string brief(const json& spec) {
  auto s = spec.dump();
  if (s.size() <= 80) return s;
  return s.substr(0, 60) + "...(" + std::to_string(s.size()) + " bytes)";
}

std::string describe(const ObjState& o) {
  std::ostringstream s;
  s << "{spec " << brief(o.spec) << ", generation " << o.generation << ", observed "
    << (o.observed_generation ? std::to_string(*o.observed_generation) : "-") << ", status "
    << o.status.dump() << (o.deleting ? ", deleting" : "") << ", finalizers [";
  for (auto& f : o.finalizers) s << f << " ";
  s << "], conditions {";
  for (auto& [t, c] : o.conditions)
    s << t << "=" << c.status << "/" << c.reason << "/" << c.message << " ";
  s << "}, events [";
  for (auto& e : o.events)
    s << e.category << ":" << e.type << ":" << e.reason << ":" << e.message << "x" << e.count
      << " ";
  s << "]}";
  return s.str();
}

/// An object the store may already have collected: deletion requested, no finalizer.
bool collectible(const ObjState& o) { return o.deleting && o.finalizers.empty(); }

/// Differences between what the model expects and what is stored (at most `limit`).
/// With `allow_collected`, an expected object that is collectible may be missing.
std::vector<std::string> diff(const State& expected, const State& actual, bool allow_collected,
                              std::size_t limit = 12) {
  std::vector<std::string> out;
  auto add = [&](std::string s) {
    if (out.size() < limit) out.push_back(std::move(s));
  };
  for (auto& [slug, e] : expected) {
    auto it = actual.find(slug);
    if (it == actual.end()) {
      if (!(allow_collected && collectible(e))) add(slug + ": missing, expected " + describe(e));
    } else if (!(it->second == e)) {
      add(slug + ": stored " + describe(it->second) + "\n      expected " + describe(e));
    }
  }
  for (auto& [slug, a] : actual)
    if (!expected.count(slug)) add(slug + ": stored but never written: " + describe(a));
  return out;
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream s(line);
  for (std::string t; s >> t;) out.push_back(t);
  return out;
}

std::int64_t to_int(const std::string& s) { return std::stoll(s); }

/// Applies one write to the model; returns an error for a write the model cannot apply
/// (which means the writer and the test disagree, not that the store is wrong).
std::optional<std::string> apply_op(State& st, const std::vector<std::string>& op) {
  auto bad = [&](const std::string& why) {
    std::string s = why + ":";
    for (auto& t : op) s += " " + t;
    return std::optional<std::string>(s);
  };
  if (op.size() < 2) return bad("short op");
  const auto& name = op[0];
  const auto& slug = op[1];
  if (name == "create") {
    if (op.size() != 5) return bad("malformed");
    if (st.count(slug)) return bad("slug already in the model");
    ObjState o;
    o.spec = json{{"color", op[2]}, {"size", to_int(op[3])}};
    if (op[4] == "1") o.finalizers = {crash_finalizer};
    st[slug] = std::move(o);
    return std::nullopt;
  }
  auto it = st.find(slug);
  if (it == st.end()) return bad("unknown slug");
  auto& o = it->second;
  if (name == "update") {
    if (op.size() != 4) return bad("malformed");
    json spec{{"color", op[2]}, {"size", to_int(op[3])}};
    if (spec != o.spec) {
      o.spec = spec;
      ++o.generation;
    }
  } else if (name == "status") {
    if (op.size() != 5) return bad("malformed");
    auto og = to_int(op[2]);
    json status{{"seq", to_int(op[3])}, {"note", op[4]}};
    // The stored status at an older generation than the recorded one writes nothing
    // (observed_generation never moves back for a stale report).
    bool stale = o.status == status && o.observed_generation && og < *o.observed_generation;
    if (!stale) {
      o.observed_generation = og;
      o.status = status;
    }
  } else if (name == "cond") {
    if (op.size() != 6) return bad("malformed");
    o.conditions[op[2]] = {op[3], op[4], op[5]};
  } else if (name == "event") {
    if (op.size() != 6) return bad("malformed");
    json detail{{"seq", to_int(op[5].substr(1))}};
    RunState* current = nullptr;
    for (auto& r : o.events)
      if (r.category == op[2]) current = &r;
    if (current && current->type == op[3] && current->reason == op[4]) {
      ++current->count;
      current->message = op[5];
      current->detail = detail;
    } else {
      o.events.push_back({op[2], op[3], op[4], op[5], detail, 1});
    }
  } else if (name == "remove") {
    o.deleting = true;
  } else if (name == "unfin") {
    std::erase(o.finalizers, crash_finalizer);
  } else {
    return bad("unknown op");
  }
  return std::nullopt;
}

// --- reading the stored state directly ------------------------------------------------

State read_state(SQLite::Database& db, std::vector<std::string>& problems) {
  State st;
  if (!db.tableExists("objects")) return st;  // killed before the schema was created
  std::map<std::int64_t, std::string> slug_of;
  SQLite::Statement q(db, R"(SELECT id, slug, spec, status, generation, observed_generation,
      deletion_requested_at IS NOT NULL, finalizers FROM objects WHERE "group" = ? AND kind = ?)");
  q.bind(1, crash_kind.group);
  q.bind(2, crash_kind.kind);
  while (q.executeStep()) {
    auto id = q.getColumn(0).getInt64();
    if (q.getColumn(1).isNull()) {
      problems.push_back("object " + std::to_string(id) + " has no slug");
      continue;
    }
    std::string slug = q.getColumn(1).getString();
    ObjState o;
    o.spec = json::parse(q.getColumn(2).getString());
    if (!q.getColumn(3).isNull()) o.status = json::parse(q.getColumn(3).getString());
    o.generation = q.getColumn(4).getInt64();
    if (!q.getColumn(5).isNull()) o.observed_generation = q.getColumn(5).getInt64();
    o.deleting = q.getColumn(6).getInt() != 0;
    o.finalizers = json::parse(q.getColumn(7).getString()).get<std::vector<std::string>>();
    slug_of[id] = slug;
    st[slug] = std::move(o);
  }
  SQLite::Statement c(db, "SELECT object_id, type, status, reason, message FROM conditions");
  while (c.executeStep()) {
    auto it = slug_of.find(c.getColumn(0).getInt64());
    if (it == slug_of.end()) {
      problems.push_back("condition of unknown object " + c.getColumn(0).getString());
      continue;
    }
    st[it->second].conditions[c.getColumn(1).getString()] = {
        c.getColumn(2).getString(), c.getColumn(3).getString(), c.getColumn(4).getString()};
  }
  SQLite::Statement e(db, R"(SELECT object_id, category, type, reason, message, detail, count
      FROM events ORDER BY id)");
  while (e.executeStep()) {
    auto it = slug_of.find(e.getColumn(0).getInt64());
    if (it == slug_of.end()) {
      problems.push_back("event of unknown object " + e.getColumn(0).getString());
      continue;
    }
    RunState r{e.getColumn(1).getString(),
               e.getColumn(2).getString(),
               e.getColumn(3).getString(),
               e.getColumn(4).getString(),
               e.getColumn(5).isNull() ? json() : json::parse(e.getColumn(5).getString()),
               e.getColumn(6).getInt64()};
    st[it->second].events.push_back(std::move(r));
  }
  // The change log is written in each change's transaction: every object's current
  // version is an entry of it (the run writes far fewer changes than the retention
  // keeps), and the store's version is at or above every object's.
  if (db.tableExists("change_log")) {
    SQLite::Statement l(db, R"(SELECT id, resource_version FROM objects AS o WHERE NOT EXISTS
        (SELECT 1 FROM change_log WHERE resource_version = o.resource_version
         AND object_id = o.id))");
    while (l.executeStep())
      problems.push_back("object " + l.getColumn(0).getString() + " at version " +
                         l.getColumn(1).getString() + " has no change-log entry");
    SQLite::Statement h(db, R"(SELECT (SELECT max(value, coalesce((SELECT max(resource_version)
        FROM change_log), 0)) FROM beehive_meta WHERE key = 'resource_version') >=
        coalesce((SELECT max(resource_version) FROM objects), 0))");
    if (h.executeStep() && h.getColumn(0).getInt() == 0)
      problems.push_back("an object's version is above the store's");
  }
  return st;
}

// --- one run of the writer --------------------------------------------------------------

struct WriterRun {
  std::vector<std::string> lines;  // complete lines only
  bool ready = false;
  std::optional<std::int64_t> block_us;  // bulk-idle: how long its block took ("I <µs>")
  bool killed = false;                   // ended by our SIGKILL (and not by itself)
  int status = 0;                        // waitpid status
  std::string stderr_text;
};

struct Write {
  std::int64_t seq = 0;
  std::vector<std::vector<std::string>> ops;  // one op, or a within block's writes
  std::optional<std::string> within;          // the block's name, "c<cycle>-w<n>"
  bool acked = false;
  std::optional<std::int64_t> ack_generation;
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// How one cycle runs the writer and when it kills it.
struct Launch {
  bool full = false;           // synchronous = FULL
  std::string mode = "mixed";  // the writer's mode (tests/crash/protocol.hpp)
  /// The kill comes `delay` after the writer's first line that starts with `trigger`
  /// ("R": ready; "S ": a within block begins; "I": idle after a bulk block), or after
  /// it was spawned, with `from_spawn`.
  std::string trigger = "R";
  std::chrono::milliseconds delay{0};
  bool from_spawn = false;
};

/// Starts the writer, kills it as `how` says, and collects everything it printed.
WriterRun run_writer(const std::filesystem::path& db, const std::filesystem::path& err,
                     const Launch& how, std::uint64_t seed, int cycle) {
  const bool full = how.full, from_spawn = how.from_spawn;
  const auto delay = how.delay;
  WriterRun out;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::string exe = BEEHIVE_CRASH_WRITER, file = db.string(), sync = full ? "full" : "normal",
              seed_s = std::to_string(seed), cycle_s = std::to_string(cycle);
  std::string mode = how.mode;
  std::vector<char*> argv{exe.data(),     file.data(), sync.data(), seed_s.data(),
                          cycle_s.data(), mode.data(), nullptr};
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw std::runtime_error("cannot spawn " + exe + ": " + std::strerror(rc));
  }
  // With room for everything the writer prints before the kill, the test need not read
  // while it waits: reading would wake it at each line and, on a busy machine, bunch the
  // kills just after the writer's own write(2) calls.
  bool big_pipe = ::fcntl(fds[0], F_SETPIPE_SZ, 1 << 20) >= (1 << 20);
  auto spawned = SteadyClock::now();
  std::optional<SteadyClock::time_point> kill_at;
  if (from_spawn) kill_at = spawned + delay;
  auto give_up = spawned + std::chrono::seconds(60);  // a writer that never gets there

  std::string buf;
  bool eof = false, sent = false;
  auto take_lines = [&] {
    std::size_t start = 0;
    for (std::size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
      const auto& line = out.lines.emplace_back(buf.substr(start, nl - start));
      if (line == "R") out.ready = true;
      if (line.starts_with("I ")) out.block_us = std::stoll(line.substr(2));
      if (!kill_at && line.starts_with(how.trigger)) kill_at = SteadyClock::now() + delay;
    }
    buf.erase(0, start);
  };
  char chunk[65536];
  while (!eof) {
    auto now = SteadyClock::now();
    if (!sent && ((kill_at && now >= *kill_at) || now >= give_up)) {
      ::kill(pid, SIGKILL);
      sent = true;
    }
    if (!sent && kill_at && big_pipe) {
      std::this_thread::sleep_until(*kill_at);  // at most 200 ms
      continue;
    }
    int timeout = -1;
    if (!sent) {
      auto until = kill_at ? std::min(*kill_at, give_up) : give_up;
      timeout = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(until - now).count());
      if (timeout < 0) timeout = 0;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = ::poll(&p, 1, timeout);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    ssize_t got = ::read(fds[0], chunk, sizeof chunk);
    if (got < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (got == 0) {
      eof = true;
    } else {
      buf.append(chunk, static_cast<std::size_t>(got));
      take_lines();
    }
  }
  ::close(fds[0]);
  if (!sent) ::kill(pid, SIGKILL);  // ended on its own; make sure it is gone
  while (::waitpid(pid, &out.status, 0) < 0 && errno == EINTR) {
  }
  out.killed = sent && WIFSIGNALED(out.status) && WTERMSIG(out.status) == SIGKILL;
  out.stderr_text = read_file(err);
  return out;
}

/// Groups the writer's lines into writes; protocol violations go to `problems`.
std::vector<Write> parse(const std::vector<std::string>& lines,
                         std::vector<std::string>& problems) {
  std::vector<Write> writes;
  for (auto& line : lines) {
    auto t = split(line);
    if (t.empty()) continue;
    if (t[0] == "R" || t[0] == "I") continue;
    if (t[0] == "F") {
      problems.push_back("the writer failed: " + line);
      continue;
    }
    if (t.size() < 2) {
      problems.push_back("malformed line: " + line);
      continue;
    }
    auto seq = to_int(t[1]);
    std::vector<std::string> op(t.begin() + 2, t.end());
    if (t[0] == "B") {
      if (!writes.empty() && !writes.back().acked)
        problems.push_back("write " + line + " began before the previous one was acknowledged");
      Write w;
      w.seq = seq;
      if (!op.empty() && op[0] == "within")
        w.within = op.size() > 1 ? op[1] : "";
      else
        w.ops.push_back(op);
      writes.push_back(std::move(w));
    } else if (t[0] == "S") {
      if (writes.empty() || writes.back().seq != seq || !writes.back().within) {
        problems.push_back("stray line " + line);
      } else if (op.size() == 4 && op[0] == "bulk") {
        for (std::int64_t i = 0, n = to_int(op[2]); i < n; ++i) {
          auto slug = op[1] + "-" + std::to_string(i);
          auto color = bulk_color(slug, static_cast<std::size_t>(to_int(op[3])));
          writes.back().ops.push_back({"create", slug, color, std::to_string(i), "0"});
        }
      } else {
        writes.back().ops.push_back(op);
      }
    } else if (t[0] == "A") {
      if (writes.empty() || writes.back().seq != seq || writes.back().acked) {
        problems.push_back("stray acknowledgement " + line);
      } else {
        writes.back().acked = true;
        if (op.size() == 1) writes.back().ack_generation = to_int(op[0]);
      }
    } else {
      problems.push_back("unknown line " + line);
    }
  }
  return writes;
}

std::string join(const std::vector<std::string>& v, const char* sep = "\n  ") {
  std::string s;
  for (auto& x : v) s += sep + x;
  return s;
}

/// What the writer does in a run's cycles (tests/crash/protocol.hpp).
enum class Workload {
  mixed,  ///< writes of every kind, killed at random moments
  bulk,   ///< within blocks that outgrow the page cache, killed mid-flight or while idle
};

/// Runs `n` kill / reopen / converge cycles on one file.
class CrashRig {
 public:
  CrashRig(std::uint64_t seed, int kills, Workload workload)
      : rng_(seed), kills_(kills), workload_(workload) {}

  void run() {
    for (int cycle = 0; cycle < kills_; ++cycle) {
      cycle_ = cycle;
      one_cycle();
      if (::testing::Test::HasFatalFailure() || ::testing::Test::HasNonfatalFailure()) {
        ADD_FAILURE() << "stopped at cycle " << cycle << "; the writer's stderr:\n" << last_stderr_;
        return;
      }
    }
  }

  int cycles = 0, early_kills = 0, idle_kills = 0, full_cycles = 0;
  std::int64_t acked = 0, within_blocks = 0, landed = 0, not_landed = 0, collected = 0;
  std::int64_t max_objects = 0;

 private:
  std::uint64_t next() { return rng_(); }

  Launch plan() {
    using std::chrono::milliseconds;
    Launch how;
    if (workload_ == Workload::mixed) {
      how.full = cycle_ % 5 == 4;
      how.from_spawn = next() % 10 == 0;
      how.delay = milliseconds(how.from_spawn ? next() % 40 : 10 + next() % 191);
      return how;
    }
    // Bulk: NORMAL idle, NORMAL mid-flight, FULL idle, FULL mid-flight, and again.
    how.full = cycle_ / 2 % 2 == 1;
    if (cycle_ % 2 == 0) {
      how.mode = "bulk-idle";
      how.trigger = "I";
      how.delay = milliseconds(next() % 50);
    } else {
      // Anywhere in the first block (as long as the last idle cycle's took) or just after.
      how.mode = "bulk";
      how.trigger = "S ";
      how.delay = milliseconds(next() % (block_ms_ * 3 / 2 + 1));
    }
    return how;
  }

  void one_cycle() {
    const Launch how = plan();
    auto run = run_writer(db_, dir_.file("writer.err"), how, next(), cycle_);
    last_stderr_ = run.stderr_text;
    ++cycles;
    early_kills += how.from_spawn;
    full_cycles += how.full;
    auto last_lines = std::vector<std::string>(
        run.lines.end() - std::min<std::ptrdiff_t>(5, std::ssize(run.lines)), run.lines.end());
    ASSERT_TRUE(run.killed) << "the writer ended on its own (wait status " << run.status
                            << ") at cycle " << cycle_ << "; its last lines:" << join(last_lines);
    ASSERT_TRUE(run.ready || how.from_spawn)
        << "the writer never got ready (cycle " << cycle_ << ")";
    if (how.mode == "bulk-idle") {
      ASSERT_TRUE(run.block_us) << "the writer never reported idle (cycle " << cycle_
                                << "); its last lines:" << join(last_lines);
      block_ms_ = std::max<std::int64_t>(1, *run.block_us / 1000);
      ++idle_kills;
    }

    std::vector<std::string> problems;
    auto writes = parse(run.lines, problems);
    ASSERT_TRUE(problems.empty()) << "cycle " << cycle_ << ":" << join(problems);

    // The model: the last converged state plus the acknowledged writes, and that plus
    // the write in flight.
    State without = state_;
    std::optional<State> with;
    for (auto& w : writes) {
      State& target = w.acked ? without : with.emplace(without);
      for (auto& op : w.ops) {
        auto err = apply_op(target, op);
        ASSERT_FALSE(err) << "cycle " << cycle_ << ": " << *err;
      }
      if (w.acked) {
        ++acked;
        if (w.ack_generation) {
          auto& slug = w.ops.back()[1];
          ASSERT_EQ(target[slug].generation, *w.ack_generation)
              << "cycle " << cycle_ << ": the model's generation for " << slug
              << " differs from what the write returned";
        }
      }
    }

    // Reopen. Half the cycles let the library open first (and recover the WAL), half
    // open the file with plain SQLite first.
    std::shared_ptr<Store> store;
    if (cycle_ % 2 == 1) {
      ASSERT_NO_THROW(store = sqlite::open(db_)) << "cycle " << cycle_;
    }
    State stored;
    if (std::filesystem::exists(db_)) {
      SQLite::Database db(db_.string(), SQLite::OPEN_READWRITE);
      auto integrity = db.execAndGet("PRAGMA integrity_check").getString();
      ASSERT_EQ(integrity, "ok") << "cycle " << cycle_;
      SQLite::Statement fk(db, "PRAGMA foreign_key_check");
      ASSERT_FALSE(fk.executeStep()) << "cycle " << cycle_ << ": foreign key violation in table "
                                     << fk.getColumn(0).getString();
      stored = read_state(db, problems);
      ASSERT_TRUE(problems.empty()) << "cycle " << cycle_ << ":" << join(problems);
    } else {
      ASSERT_TRUE(writes.empty()) << "cycle " << cycle_ << ": writes reported, but no file";
    }

    // Within blocks, on their own: every object the block creates, with the conditions
    // the block sets on it, or none of them (in flight and not landed). They are never
    // removed during their own cycle.
    for (auto& w : writes) {
      if (!w.within) continue;
      ++within_blocks;
      std::map<std::string, std::vector<std::string>> made;  // slug: condition types set
      for (auto& op : w.ops) {
        if (op[0] == "create") made[op[1]];
        if (op[0] == "cond" && made.count(op[1])) made[op[1]].push_back(op[2]);
      }
      std::size_t present = 0;
      for (auto& [slug, types] : made) {
        auto it = stored.find(slug);
        if (it == stored.end()) continue;
        bool whole = true;
        for (auto& t : types) whole = whole && it->second.conditions.count(t) > 0;
        present += whole;
      }
      if (w.acked)
        EXPECT_EQ(present, made.size())
            << "cycle " << cycle_ << ": acknowledged block " << *w.within;
      else
        EXPECT_TRUE(present == 0 || present == made.size())
            << "cycle " << cycle_ << ": block " << *w.within << " is partially applied (" << present
            << " of " << made.size() << " objects)";
    }

    // Exactly the acknowledged writes, or those and the one in flight.
    auto miss = diff(without, stored, true);
    if (!miss.empty()) {
      std::vector<std::string> miss_with;
      if (with) miss_with = diff(*with, stored, true);
      ASSERT_TRUE(with && miss_with.empty())
          << "cycle " << cycle_ << " (seed of this run in the log above): the stored state is "
          << "neither the acknowledged writes nor those plus the write in flight"
          << (with ? " (write " + std::to_string(writes.back().seq) + ")" : std::string(" (none)"))
          << ".\nAgainst the acknowledged writes:" << join(miss)
          << (with ? "\nAgainst those plus the one in flight:" + join(miss_with) : std::string());
      ++landed;
      without = *with;
    } else if (with) {
      ++not_landed;  // or it landed as a write the model cannot tell apart (a no-op)
    }

    for (auto& [slug, o] : without)
      if (!stored.count(slug)) ++collected;

    converge(store, stored);
  }

  /// A fresh beehive with a controller that removes finalizers of deletion-pending
  /// objects and records status; waits until everything is collected or settled, then
  /// checks that nothing else changed. The result becomes the next cycle's baseline.
  void converge(std::shared_ptr<Store> store, const State& before) {
    if (!store) {
      ASSERT_NO_THROW(store = sqlite::open(db_)) << "cycle " << cycle_;
    }
    {
      Beehive bh(store);
      store.reset();
      register_controller<ItemSpec, ItemStatus>(
          bh, crash_kind,
          [](const Context& ctx, ControllerClient<ItemStatus>& cc,
             const Object<ItemSpec, ItemStatus>& o) -> Result {
            if (o.deletion_requested_at) {
              for (auto& f : o.finalizers) cc.remove_finalizer(ctx, o.id, f);
            } else if (o.observed_generation != o.generation) {
              cc.update_status(ctx, o.id, o.generation, ItemStatus{0, "converged"});
            }
            return {};
          });
      Client<ItemSpec, ItemStatus> items(bh, crash_kind);
      Stop stop;
      ASSERT_NO_THROW(stop = bh.start(Context{}.with_timeout(30s))) << "cycle " << cycle_;
      // Every pass runs once and succeeds, so there is no backoff for a settle at the
      // real clock's present to miss.
      ASSERT_NO_THROW(beehive::testing::settle(bh, Context{}.with_timeout(90s)))
          << "cycle " << cycle_;
      auto all = items.list(Context{});
      std::size_t left = 0;
      for (auto& o : all)
        if (o.deletion_requested_at || o.observed_generation != o.generation) ++left;
      stop(Context{}.with_timeout(10s));
      ASSERT_EQ(left, 0u) << "cycle " << cycle_ << ": objects still unsettled or deletion-pending";
      listed_ = all.size();
    }

    State expected;
    for (auto& [slug, o] : before) {
      if (o.deleting) continue;
      auto& e = expected[slug] = o;
      if (o.observed_generation != o.generation) {
        e.observed_generation = o.generation;
        e.status = json{{"seq", 0}, {"note", "converged"}};
      }
    }
    State after;
    std::vector<std::string> problems;
    {
      SQLite::Database db(db_.string(), SQLite::OPEN_READWRITE);
      ASSERT_EQ(db.execAndGet("PRAGMA integrity_check").getString(), "ok") << "cycle " << cycle_;
      after = read_state(db, problems);
    }
    ASSERT_TRUE(problems.empty()) << "cycle " << cycle_ << ":" << join(problems);
    EXPECT_EQ(listed_, after.size()) << "cycle " << cycle_ << ": Client::list skipped rows";
    auto d = diff(expected, after, false);
    ASSERT_TRUE(d.empty()) << "cycle " << cycle_
                           << ": convergence changed more than it should:" << join(d);
    max_objects = std::max<std::int64_t>(max_objects, static_cast<std::int64_t>(after.size()));
    state_ = std::move(after);
  }

  TempDir dir_;
  std::filesystem::path db_ = dir_.file("crash.db");
  std::mt19937_64 rng_;
  int kills_;
  Workload workload_;
  std::int64_t block_ms_ = 300;  // how long the last bulk-idle cycle's block took
  int cycle_ = 0;
  State state_;
  std::size_t listed_ = 0;
  std::string last_stderr_;
};

std::optional<std::uint64_t> env_number(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::strtoull(v, nullptr, 10);
}

/// Runs a rig with the seed and number of kills the environment asks for (the header
/// comment), `kills` by default (ten times as many with BEEHIVE_STRESS).
void run_rig(Workload workload, int kills) {
  auto seed = env_number("BEEHIVE_CRASH_SEED").value_or(std::random_device{}());
  kills = static_cast<int>(env_number("BEEHIVE_CRASH_KILLS")
                               .value_or(std::getenv("BEEHIVE_STRESS") ? 10 * kills : kills));
  std::cout << "[ crash    ] seed " << seed << " (replay with BEEHIVE_CRASH_SEED=" << seed << "), "
            << kills << " kills" << std::endl;
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  auto started = SteadyClock::now();
  CrashRig rig(seed, kills, workload);
  rig.run();
  auto secs = std::chrono::duration<double>(SteadyClock::now() - started).count();
  std::cout << "[ crash    ] " << rig.cycles << " kills (" << rig.early_kills
            << " during start-up, " << rig.idle_kills << " while idle after a bulk block, "
            << rig.full_cycles << " with synchronous=FULL) in " << secs << " s: " << rig.acked
            << " acknowledged writes, " << rig.within_blocks
            << " within blocks, in-flight write landed " << rig.landed << " / not "
            << rig.not_landed << ", " << rig.collected << " objects collected by the writer's GC"
            << ", at most " << rig.max_objects << " objects" << std::endl;
  ::testing::Test::RecordProperty("kills", rig.cycles);
  ::testing::Test::RecordProperty("acknowledged_writes", std::to_string(rig.acked));
}

TEST(Crash, KillsAtRandomPointsLoseNoAcknowledgedWrite) { run_rig(Workload::mixed, 50); }

TEST(Crash, LargeWithinBlocksSurviveKillsMidFlightAndWhileIdle) { run_rig(Workload::bulk, 8); }

}  // namespace
}  // namespace beehive::test
