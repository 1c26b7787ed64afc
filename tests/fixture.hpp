#pragma once

// Shared test helpers: a fresh store per test (SQLite or PostgreSQL: see
// support/test_store.hpp), and sample Spec/Status types.

#include <atomic>
#include <barrier>
#include <concepts>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <beehive/beehive.hpp>
#include <beehive/testing.hpp>

#include "support/test_store.hpp"

namespace beehive::test {

/// A temporary directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("beehive-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    drop_test_schemas_under(path_);  // the PostgreSQL schemas that stood for its files
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path file(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

struct WidgetSpec {
  std::string color;
  int size = 0;
  friend bool operator==(const WidgetSpec&, const WidgetSpec&) = default;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WidgetSpec, color, size)

struct WidgetStatus {
  bool ready = false;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WidgetStatus, ready)

// Encodes any value, but refuses to decode a negative one: a spec that marshals but
// does not round-trip, so a write of it must fail and leave nothing.
struct PickySpec {
  int v = 0;
};
inline void to_json(nlohmann::json& j, const PickySpec& p) { j = {{"v", p.v}}; }
inline void from_json(const nlohmann::json& j, PickySpec& p) {
  p.v = j.at("v").get<int>();
  if (p.v < 0) throw std::runtime_error("negative values are not readable");
}

/// `levels` arrays, each inside the one before, built without recursion (destroying a
/// json value does not recurse either; copying one does).
inline nlohmann::json nested_json(int levels) {
  nlohmann::json out = nlohmann::json::array();
  nlohmann::json* inner = &out;
  for (int i = 1; i < levels; ++i) inner = &inner->emplace_back(nlohmann::json::array());
  return out;
}

/// Runs fn(0) .. fn(threads - 1), each on a thread of its own, released together once
/// every thread has started; returns when all have returned.
template <class Fn>
void run_together(int threads, Fn fn) {
  std::barrier start(threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      start.arrive_and_wait();
      fn(t);
    });
  for (auto& t : ts) t.join();
}

inline const GroupKind widget_kind{"acme.com", "Widget"};
inline const GroupKind gadget_kind{"acme.com", "Gadget"};

using Widgets = Client<WidgetSpec, WidgetStatus>;

/// A store in a temp dir and a beehive over it.
class BeehiveTest : public ::testing::Test {
 protected:
  std::filesystem::path db_path() const { return dir_.file("beehive.db"); }
  void open() {
    bh_.reset();
    store_.reset();
    store_ = open_test_store(db_path());
    bh_ = std::make_unique<Beehive>(store_);
  }
  void SetUp() override { open(); }
  void TearDown() override {
    bh_.reset();
    store_.reset();
  }
  Beehive& bh() { return *bh_; }

  TempDir dir_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<Beehive> bh_;
  Context ctx_;
};

/// Skips the rest of a test that checks something only SQLite has (its file, its VFS,
/// its locking), saying so, when the tests run on PostgreSQL.
#define REQUIRE_SQLITE(why)                                                                \
  do {                                                                                     \
    if (::beehive::test::test_backend_is_postgres())                                       \
      FAIL() << "SQLite-specific (" << (why) << "): CMakeLists.txt leaves it out of pg.*"; \
  } while (0)

/// The same for a test of the PostgreSQL store: CTest runs it only as pg.*.
#define REQUIRE_POSTGRES()                                                                 \
  do {                                                                                     \
    if (!::beehive::test::test_backend_is_postgres())                                      \
      FAIL() << "runs on PostgreSQL only (BEEHIVE_TEST_BACKEND=postgres, the pg.* tests)"; \
  } while (0)

/// The test kit's TestBeehive (<beehive/testing.hpp>), but on the test store: the kit's
/// always opens SQLite, and these tests are meant to run on either backend.
class KitBeehive {
 public:
  template <class... Opts>
  requires(std::convertible_to<Opts, Option>&&...) explicit KitBeehive(Opts&&... opts)
      : store_(open_test_store(path())),
        bh_(std::make_unique<Beehive>(store_, Option(std::forward<Opts>(opts))...,
                                      with_clock(clock_))) {}
  ~KitBeehive() {
    try {
      stop();
    } catch (...) {
    }
    bh_.reset();
    store_.reset();
  }
  KitBeehive(const KitBeehive&) = delete;
  KitBeehive& operator=(const KitBeehive&) = delete;

  Beehive& beehive() { return *bh_; }
  ManualClock& clock() { return *clock_; }
  /// The database file (under PostgreSQL: the path that names the schema).
  std::filesystem::path path() const { return dir_.file("beehive.db"); }

  void start() { stop_ = bh_->start(Context{}); }
  void stop() {
    if (auto s = std::exchange(stop_, nullptr)) s(Context{});
  }
  void settle() {
    beehive::testing::settle(*bh_, Context{}.with_timeout(std::chrono::seconds(10)));
  }
  void advance(std::chrono::milliseconds d) {
    clock_->advance(d);
    settle();
  }

 private:
  TempDir dir_;  // first: it outlives the store
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<Store> store_;
  std::unique_ptr<Beehive> bh_;
  Stop stop_;
};

/// Asserts that `expr` throws beehive::Error with `code` and a message containing `text`.
#define EXPECT_ERRC_WITH(expr, expected_errc, text)                                 \
  do {                                                                              \
    try {                                                                           \
      (void)(expr);                                                                 \
      ADD_FAILURE() << #expr " did not throw";                                      \
    } catch (const ::beehive::Error& e_) {                                          \
      EXPECT_EQ(e_.code(), ::beehive::make_error_code(expected_errc)) << e_.what(); \
      EXPECT_NE(std::string(e_.what()).find(text), std::string::npos) << e_.what(); \
    }                                                                               \
  } while (0)

/// Asserts that `expr` throws beehive::Error with code `code`.
#define EXPECT_ERRC(expr, expected_errc) EXPECT_ERRC_WITH(expr, expected_errc, "")

}  // namespace beehive::test
