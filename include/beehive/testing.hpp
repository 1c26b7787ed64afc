#pragma once

/// The test kit for applications' controllers (CMake target `beehive::testing`, which
/// brings GoogleTest and GoogleMock).
///
///   TEST(Widgets, ConvergeAfterABackoff) {
///     beehive::testing::TestBeehive t;          // a fresh database, a ManualClock
///     auto widgets = register_widgets(t.beehive());
///     t.start();
///     auto w = widgets.create({}, WidgetSpec{3});
///     t.settle();                               // every pass it caused has run
///     t.advance(std::chrono::seconds(1));       // the retry falls due, and runs
///     EXPECT_THAT(widgets.get({}, w.id), beehive::testing::IsSettled());
///   }
///
/// `settle` is exact: it returns once nothing is left to do at the clock's current time
/// (no reconcile queued, running or due, no garbage collection or event-log work pending,
/// every committed change handed to every watch and actor subscriber), without sleeping
/// or polling. Time moves only when the test moves it, so a backoff, a `requeue_after`
/// or a resync happens exactly when `advance` passes its due time, at that time.
/// Inside a `within` block, work that needs the store's writer (a pass's writes,
/// collection, event-log sweeps) waits for the block to end, and so does a `settle`
/// called there, until its deadline: settle before opening the block, with nothing
/// running (a `start` and every write leave such work behind them). A settle whose
/// deadline passes says what it was waiting in. It knows this process's work only: on a
/// standby (PostgreSQL, another process leads) it returns once the standby's own work is
/// done, the reconciles being the leader's, elsewhere.
///
/// Including this header also makes GoogleTest print beehive's value types readably
/// (`Time` as RFC 3339 with milliseconds, durations with their unit, objects, conditions,
/// changes, events, schedules, group-kinds).
///
/// Thread-safety: `settle` may be called from any thread but one running a reconcile of
/// the same beehive; a TestBeehive is used from the test's thread.

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <beehive/beehive.hpp>

namespace beehive::testing {

/// Returns when nothing is left to do at the clock's current time (see above). Throws
/// Error(errc::deadline_exceeded) when `ctx` ends first, Error(errc::stopped) when the
/// beehive stopped (also when a stop overlapped the settle), and
/// Error(errc::invalid_argument) when called from one of the beehive's own reconciles,
/// which it would wait for (another beehive's reconcile may settle it).
void settle(Beehive& bh, const Context& ctx);

/// A Beehive on a fresh temporary database, with a ManualClock. The database and its
/// directory are removed when the TestBeehive goes; stop happens in stop() or the
/// destructor. The destructor's stop cancels the passes still running and waits 10 s
/// for them: past that (a pass that ignores its context), it fails the test and leaves
/// the beehive running rather than hang the test binary.
class TestBeehive {
 public:
  /// Options are the Beehive's (with_logger, with_metrics, with_resync_interval, ...);
  /// its clock is always the kit's ManualClock.
  template <class... Opts>
  requires(std::convertible_to<Opts, Option>&&...) explicit TestBeehive(Opts&&... opts)
      : TestBeehive(Fresh{}) {
    bh_ =
        std::make_unique<Beehive>(store_, Option(std::forward<Opts>(opts))..., with_clock(clock_));
  }
  ~TestBeehive();
  TestBeehive(const TestBeehive&) = delete;
  TestBeehive& operator=(const TestBeehive&) = delete;

  Beehive& beehive() { return *bh_; }
  ManualClock& clock() { return *clock_; }
  /// The database file.
  const std::filesystem::path& path() const { return path_; }

  void start();
  /// Stops; a second stop is a no-op. A stop that threw (called inside a within block)
  /// can be called again. A pass that ignores its cancelled context fails the test after
  /// 10 s instead of hanging it (as the destructor does), and the beehive is left to end
  /// when the pass returns.
  void stop();
  /// settle(beehive(), a context of 10 s).
  void settle();
  /// Moves the clock forward by `d` as time would pass: it settles, then steps the clock
  /// to each timer's due time in turn, settling at each, so timers fire in due order, at
  /// their own time (a pass sees that time as now), and what they arm within `d` fires
  /// too (`advance(10s)` runs a `requeue_after(1s)` object ten times). Then it sets the
  /// clock to the end and settles. Wakes the application's own actors asked of the
  /// scheduler (`wake_at_atom`) are stepped to as well, but what those actors do then is
  /// not waited for: settle knows beehive's own work only. Negative `d` only settles. Throws
  /// Error(errc::deadline_exceeded) when all that takes over 10 s (a timer re-arming
  /// many times within `d`); `clock().advance(d)` then `settle()` jumps instead, firing
  /// each due timer once, at the end. Beehive's own housekeeping (its gc and event log
  /// sweeps, every 30 s at most) is not stepped to: it runs at the times the other
  /// timers and the end land on. Resync is a timer (every 30 s by default): an advance
  /// of days with it takes about a second per simulated day.
  void advance(std::chrono::milliseconds d);

 private:
  struct Fresh {};
  explicit TestBeehive(Fresh);

  std::filesystem::path dir_;
  std::filesystem::path path_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<Store> store_;
  std::unique_ptr<Beehive> bh_;
  Stop stop_;
  /// A stop gave up on a pass still running: the Beehive is destroyed on a thread of its
  /// own, once the pass returns.
  bool stuck_ = false;
  /// Fails the test for a stop that gave up (`why`: its error) and hands the beehive to
  /// a detached thread.
  void abandon(const Error& why);
};

/// Matches an object whose observed generation is its generation (its controller has
/// reconciled its current spec).
::testing::Matcher<const ObjectMeta&> IsSettled();
/// Matches an object with a condition of `type` at `status`, observed at the object's
/// generation (or with no observed generation given): a condition left from an older
/// spec does not match.
::testing::Matcher<const ObjectMeta&> HasCondition(std::string type, ConditionStatus s);

/// `t` as RFC 3339 in UTC with milliseconds ("2026-12-01T18:04:05.123Z").
std::string format_time(Time t);

}  // namespace beehive::testing

namespace beehive {

// GoogleTest finds these by argument-dependent lookup.
void PrintTo(const GroupKind& gk, std::ostream* os);
void PrintTo(const Ref& r, std::ostream* os);
void PrintTo(ConditionStatus s, std::ostream* os);
void PrintTo(const Condition& c, std::ostream* os);
void PrintTo(ChangeType t, std::ostream* os);
void PrintTo(EventType t, std::ostream* os);
void PrintTo(const Event& e, std::ostream* os);
void PrintTo(const Schedule& s, std::ostream* os);
void PrintTo(const ObjectMeta& m, std::ostream* os);
void PrintTo(errc e, std::ostream* os);
void PrintTo(const Result& r, std::ostream* os);
void PrintTo(const EventSpec& e, std::ostream* os);
void PrintTo(const EventFilter& f, std::ostream* os);
void PrintTo(LogLevel l, std::ostream* os);

namespace detail {
/// The JSON text of `v` when it has a JSON form, else a placeholder.
template <class T>
std::string json_or_placeholder(const T& v) {
  if constexpr (requires(nlohmann::json & j) { j = v; }) {
    try {
      nlohmann::json j = v;
      return j.dump();
    } catch (const std::exception&) {
    }
  }
  return "<value>";
}
}  // namespace detail

template <class Spec, class Status>
void PrintTo(const Object<Spec, Status>& o, std::ostream* os) {
  PrintTo(static_cast<const ObjectMeta&>(o), os);
  *os << " spec=" << detail::json_or_placeholder(o.spec)
      << " status=" << (o.status ? detail::json_or_placeholder(*o.status) : std::string("none"));
}

template <class Spec, class Status>
void PrintTo(const Change<Spec, Status>& c, std::ostream* os) {
  *os << to_string(c.type) << " ";
  PrintTo(c.object, os);
}

template <class Spec, class Status>
void PrintTo(const Page<Spec, Status>& p, std::ostream* os) {
  *os << "page of " << p.items.size() << " [";
  for (std::size_t i = 0; i < p.items.size(); ++i) {
    if (i) *os << ", ";
    PrintTo(p.items[i], os);
  }
  *os << "]";
  if (p.continue_token.empty())
    *os << " (last)";
  else
    *os << " continue=" << p.continue_token;
}

}  // namespace beehive

// Time and durations are std types, beyond the reach of argument-dependent lookup:
// GoogleTest's printer is specialised for them instead.
namespace testing::internal {

template <>
class UniversalPrinter<beehive::Time> {
 public:
  static void Print(const beehive::Time& t, ::std::ostream* os) {
    *os << beehive::testing::format_time(t);
  }
};

template <class Rep, class Period>
class UniversalPrinter<std::chrono::duration<Rep, Period>> {
 public:
  static void Print(const std::chrono::duration<Rep, Period>& d, ::std::ostream* os) {
    *os << std::chrono::duration_cast<std::chrono::duration<double, std::milli>>(d).count()
        << " ms";
  }
};

}  // namespace testing::internal
