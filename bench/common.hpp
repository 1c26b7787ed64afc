#pragma once

// Helpers shared by the bench/*.cpp suites (not a benchmark itself: only bench/*.cpp
// become binaries).
//
// Database files: one temp dir per process under $BENCH_DB_DIR (default: the system temp
// dir, /tmp), removed at exit; one fresh file per benchmark run (or per iteration where
// an iteration needs a fresh beehive).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include <unistd.h>

#include <SQLiteCpp/SQLiteCpp.h>
#include <benchmark/benchmark.h>

#include <beehive/beehive.hpp>

#include "store/sqlite/sqlite_schema.hpp"

namespace bench {

namespace fs = std::filesystem;

// --- sample types ------------------------------------------------------------------------

struct Spec {
  std::string name;
  int n = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Spec, name, n)

struct Status {
  std::string phase;
  std::int64_t seen = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Status, phase, seen)

using Objects = beehive::Client<Spec, Status>;
using Obj = beehive::Object<Spec, Status>;
using ObjChange = beehive::Change<Spec, Status>;

// --- database files ----------------------------------------------------------------------

class TempDir {
 public:
  TempDir() {
    const char* env = std::getenv("BENCH_DB_DIR");
    fs::path base = (env && *env) ? fs::path(env) : fs::temp_directory_path();
    path_ = base / ("beehive-bench-" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path fresh(const std::string& tag) {
    return path_ / (tag + "-" + std::to_string(++counter_) + ".db");
  }

 private:
  fs::path path_;
  std::atomic<int> counter_{0};
};

inline TempDir& temp_dir() {
  static TempDir d;
  return d;
}

// Removes the database file and its WAL/SHM companions when it goes out of scope.
struct DbFile {
  explicit DbFile(const std::string& tag) : path(temp_dir().fresh(tag)) {}
  ~DbFile() {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
      fs::remove(fs::path(path.string() + suffix), ec);
  }
  DbFile(const DbFile&) = delete;
  DbFile& operator=(const DbFile&) = delete;
  fs::path path;
};

constexpr int kBusyTimeoutMs = 5000;  // beehive's default

// Folds the WAL back into the main file so that a timed part starts from a short WAL,
// whatever the setup wrote.
inline void checkpoint(const fs::path& file) {
  SQLite::Database db(file.string(), SQLite::OPEN_READWRITE, kBusyTimeoutMs);
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

// A store and a beehive over a fresh file. Members go in reverse order: the beehive
// (which stops it) before the store, the file last.
struct Hive {
  explicit Hive(const std::string& tag,
                beehive::sqlite::Synchronous sync = beehive::sqlite::Synchronous::normal)
      : file(tag) {
    beehive::sqlite::Options opts;
    opts.synchronous = sync;
    store = beehive::sqlite::open(file.path, opts);
    bh = std::make_unique<beehive::Beehive>(store);
  }
  ~Hive() { close(); }
  Hive(const Hive&) = delete;
  Hive& operator=(const Hive&) = delete;

  void start() { stop = bh->start(ctx); }
  void close() {
    if (stop) {
      stop(ctx);
      stop = nullptr;
    }
    bh.reset();
    store.reset();
  }

  DbFile file;
  std::shared_ptr<beehive::Store> store;
  std::unique_ptr<beehive::Beehive> bh;
  beehive::Stop stop;
  beehive::Context ctx;
};

// Gives a raw-SQLite baseline's file beehive's own schema (src/store/sqlite/sqlite_schema.cpp),
// so that its writes pay for the same tables and indexes beehive's do. The raw side then
// uses only the `objects` table.
inline void create_raw_schema(SQLite::Database& db) {
  beehive::store::sqlite_schema::migrate_and_open_session(db);
}

// --- measurement helpers -----------------------------------------------------------------

using Clock = std::chrono::steady_clock;

inline std::int64_t now_millis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The statement beehive's writer runs for a spec change.
constexpr const char* kRawUpdate =
    "UPDATE objects SET spec = ?2, spec_version = 0, generation = ?3, resource_version = ?4, "
    "updated_at = ?5 WHERE id = ?1";

// The raw write baseline: that UPDATE of one row in a transaction of its own. `rv` starts
// at the rows' count (their versions are 1..n).
struct RawSpecUpdate {
  RawSpecUpdate(SQLite::Database& db, std::int64_t rows) : db(db), upd(db, kRawUpdate), rv(rows) {}
  void operator()(std::int64_t id, const std::string& spec) {
    db.exec("BEGIN IMMEDIATE");
    upd.bind(1, id);
    upd.bindNoCopy(2, spec);
    upd.bind(3, ++generation);
    upd.bind(4, ++rv);
    upd.bind(5, now_millis());
    upd.exec();
    upd.reset();
    db.exec("COMMIT");
  }
  SQLite::Database& db;
  SQLite::Statement upd;
  std::int64_t rv;
  std::int64_t generation = 1;
};

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The iteration rate, as bench/store.cpp reports it.
inline void set_rate(benchmark::State& state) {
  state.counters["items/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// Resident set size of this process in KiB (/proc/self/statm), 0 when unavailable.
inline long rss_kib() {
  std::ifstream f("/proc/self/statm");
  long size = 0, resident = 0;
  if (!(f >> size >> resident)) return 0;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

// What a raw reader fills from one row of the 16 object columns (kRawColumns' order),
// the way hand-written SQLiteCpp code would.
struct RawRow {
  std::int64_t id = 0;
  std::string group, kind;
  std::optional<std::string> slug;
  std::string spec;
  int spec_version = 0;
  std::optional<std::string> status;
  int status_version = 0;
  std::int64_t generation = 0;
  std::optional<std::int64_t> observed_generation, observed_at;
  std::int64_t resource_version = 0;
  std::optional<std::int64_t> deletion_requested_at;
  std::string finalizers;
  std::int64_t created_at = 0, updated_at = 0;
};

inline std::optional<std::string> opt_text(const SQLite::Column& c) {
  if (c.isNull()) return std::nullopt;
  return c.getString();
}
inline std::optional<std::int64_t> opt_int(const SQLite::Column& c) {
  if (c.isNull()) return std::nullopt;
  return c.getInt64();
}

inline RawRow read_raw(SQLite::Statement& s) {
  RawRow r;
  r.id = s.getColumn(0).getInt64();
  r.group = s.getColumn(1).getString();
  r.kind = s.getColumn(2).getString();
  r.slug = opt_text(s.getColumn(3));
  r.spec = s.getColumn(4).getString();
  r.spec_version = s.getColumn(5).getInt();
  r.status = opt_text(s.getColumn(6));
  r.status_version = s.getColumn(7).getInt();
  r.generation = s.getColumn(8).getInt64();
  r.observed_generation = opt_int(s.getColumn(9));
  r.observed_at = opt_int(s.getColumn(10));
  r.resource_version = s.getColumn(11).getInt64();
  r.deletion_requested_at = opt_int(s.getColumn(12));
  r.finalizers = s.getColumn(13).getString();
  r.created_at = s.getColumn(14).getInt64();
  r.updated_at = s.getColumn(15).getInt64();
  return r;
}

}  // namespace bench
