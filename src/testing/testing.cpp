// The test kit (include/beehive/testing.hpp): TestBeehive, settle, the matchers and the
// printers. Built into the beehive_testing library only (it needs GoogleTest), never
// into libbeehive. Runs on the test's thread.

#include <beehive/testing.hpp>

#include <stdlib.h>

#include <ctime>
#include <iomanip>
#include <sstream>
#include <thread>

#include <beehive/detail/codec.hpp>
#include <beehive/detail/saturate.hpp>

#include "beehive_core.hpp"
#include "thread_guards.hpp"

namespace beehive::testing {

void settle(Beehive& bh, const Context& ctx) {
  try {
    bh.core()->settle(ctx);
  } catch (const Error& e) {
    if (e.code() != errc::deadline_exceeded || ctx.error() != errc::deadline_exceeded) throw;
    throw Error(errc::deadline_exceeded,
                std::string("settle: still busy at its deadline: ") +
                    (!detail::open_sessions.empty()
                         ? "this thread holds a within block open, and work that needs the "
                           "store's writer (a pass's write, collection) waits for it to end"
                         : "a reconcile that does not return, or work that never ends (a "
                           "reconcile that writes what wakes it again on every pass)"));
  }
}

namespace {
/// How long the destructor's stop waits for passes it cancelled.
constexpr std::chrono::seconds stuck_pass_grace{10};
/// How long one advance may take, stepping through timers and settling.
constexpr std::chrono::seconds advance_budget{10};
}  // namespace

TestBeehive::TestBeehive(Fresh) {
  auto pattern = (std::filesystem::temp_directory_path() / "beehive-test-XXXXXX").string();
  if (!mkdtemp(pattern.data()))
    throw Error(errc::store, "cannot create a temporary directory under " +
                                 std::filesystem::temp_directory_path().string());
  dir_ = pattern;
  path_ = dir_ / "beehive.db";
  store_ = sqlite::open(path_.string());
}

void TestBeehive::abandon(const Error& why) {
  // A pass that ignores its cancelled context would hold the Beehive's destruction (and
  // the test binary) for ever: fail the test instead, and leave the beehive and its
  // database behind.
  ADD_FAILURE() << "stop gave up after " << stuck_pass_grace.count() << " s: " << why.what()
                << " (does every reconcile return when its context ends?); the beehive ends "
                   "once it returns";
  stuck_ = true;
  stop_ = nullptr;
}

TestBeehive::~TestBeehive() {
  try {
    if (stop_) stop_(Context{}.with_timeout(stuck_pass_grace));
    stop_ = nullptr;
  } catch (const Error& e) {
    if (e.code() == errc::deadline_exceeded) abandon(e);
  } catch (...) {
  }
  if (stuck_) {
    // The Beehive's end waits for that pass: on a thread of its own, so that the test
    // binary goes on.
    std::thread([bh = std::move(bh_), store = std::move(store_), dir = dir_]() mutable {
      bh.reset();
      store.reset();
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }).detach();
    return;
  }
  bh_.reset();
  store_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void TestBeehive::start() { stop_ = bh_->start(Context{}); }

void TestBeehive::stop() {
  if (!stop_) return;
  try {
    stop_(Context{}.with_timeout(stuck_pass_grace));
  } catch (const Error& e) {
    // Kept when refused (inside a within block): it can be asked again.
    if (e.code() != errc::deadline_exceeded) throw;
    abandon(e);
    return;
  }
  stop_ = nullptr;
}

void TestBeehive::settle() {
  testing::settle(*bh_, Context{}.with_timeout(std::chrono::seconds(10)));
}

void TestBeehive::advance(std::chrono::milliseconds d) {
  const Time target = detail::saturating_add(clock_->now(), std::max(d, decltype(d)::zero()));
  // One budget for the whole advance, as settle() has: a timer that keeps re-arming
  // within `d` (a 1 ms requeue over a year) makes it end instead of running for ever.
  const auto ctx = Context{}.with_timeout(advance_budget);
  std::size_t steps = 0;
  try {
    testing::settle(*bh_, ctx);
    // Every timer falls due at its own time, in order, and what the work it fires arms
    // falls due within the same advance when it is due by the target: step to each.
    while (auto next = bh_->core()->next_timer()) {
      if (*next > target || *next <= clock_->now()) break;
      clock_->set(*next);
      ++steps;
      testing::settle(*bh_, ctx);
    }
    clock_->set(target);
    testing::settle(*bh_, ctx);
  } catch (const Error& e) {
    if (e.code() != errc::deadline_exceeded) throw;
    throw Error(errc::deadline_exceeded,
                "advance: not done after " + std::to_string(advance_budget.count()) +
                    " s, having stepped through " + std::to_string(steps) +
                    " timers' due times (a timer re-arming often within the advance, work that "
                    "never settles, or resync, every resync interval, 30 s by default: an "
                    "advance of days needs a longer with_resync_interval, or a jump with "
                    "clock().advance(d) then settle()); the clock is at " +
                    format_time(clock_->now()));
  }
}

namespace {

class IsSettledMatcher : public ::testing::MatcherInterface<const ObjectMeta&> {
 public:
  bool MatchAndExplain(const ObjectMeta& m, ::testing::MatchResultListener* l) const override {
    if (m.observed_generation == m.generation) return true;
    *l << "generation " << m.generation << ", observed generation ";
    if (m.observed_generation)
      *l << *m.observed_generation;
    else
      *l << "none";
    return false;
  }
  void DescribeTo(std::ostream* os) const override {
    *os << "is settled (observed generation == generation)";
  }
  void DescribeNegationTo(std::ostream* os) const override {
    *os << "is not settled (observed generation != generation)";
  }
};

class HasConditionMatcher : public ::testing::MatcherInterface<const ObjectMeta&> {
 public:
  HasConditionMatcher(std::string type, ConditionStatus s) : type_(std::move(type)), status_(s) {}
  bool MatchAndExplain(const ObjectMeta& m, ::testing::MatchResultListener* l) const override {
    for (auto& c : m.conditions) {
      if (c.type != type_) continue;
      if (c.status != status_) {
        *l << "its " << type_ << " condition is " << to_string(c.status);
        return false;
      }
      // A condition observed at an older generation describes a spec that is gone.
      if (c.observed_generation != 0 && c.observed_generation < m.generation) {
        *l << "its " << type_ << " condition was observed at generation " << c.observed_generation
           << ", the object is at " << m.generation;
        return false;
      }
      return true;
    }
    *l << "it has no " << type_ << " condition";
    return false;
  }
  void DescribeTo(std::ostream* os) const override {
    *os << "has condition " << type_ << "=" << to_string(status_);
  }
  void DescribeNegationTo(std::ostream* os) const override {
    *os << "does not have condition " << type_ << "=" << to_string(status_);
  }

 private:
  std::string type_;
  ConditionStatus status_;
};

}  // namespace

::testing::Matcher<const ObjectMeta&> IsSettled() {
  return ::testing::MakeMatcher(new IsSettledMatcher);
}

::testing::Matcher<const ObjectMeta&> HasCondition(std::string type, ConditionStatus s) {
  return ::testing::MakeMatcher(new HasConditionMatcher(std::move(type), s));
}

std::string format_time(Time t) {
  auto ms = to_millis(t);
  auto secs = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  auto frac = ms - static_cast<std::int64_t>(secs) * 1000;
  std::tm tm{};
  if (!gmtime_r(&secs, &tm)) return std::to_string(ms) + " ms since the epoch";
  std::ostringstream out;
  out << std::put_time(&tm, "%Y-%m-%dT%H:%M:%S") << '.' << std::setw(3) << std::setfill('0') << frac
      << 'Z';
  return out.str();
}

}  // namespace beehive::testing

namespace beehive {

namespace {
void print_time(Time t, std::ostream* os) { *os << testing::format_time(t); }
}  // namespace

void PrintTo(const GroupKind& gk, std::ostream* os) { *os << to_string(gk); }

void PrintTo(const Ref& r, std::ostream* os) {
  *os << to_string(GroupKind{r.group, r.kind}) << "/" << r.id;
}

void PrintTo(ConditionStatus s, std::ostream* os) { *os << to_string(s); }

void PrintTo(const Condition& c, std::ostream* os) {
  *os << c.type << "=" << to_string(c.status);
  if (!c.reason.empty()) *os << " reason=" << c.reason;
  if (!c.message.empty()) *os << " message=\"" << c.message << "\"";
  if (c.liveness) *os << " liveness";
  if (c.observed_generation) *os << " observed=" << c.observed_generation;
  if (c.last_transition_at != Time{}) {
    *os << " since ";
    print_time(c.last_transition_at, os);
  }
}

void PrintTo(ChangeType t, std::ostream* os) { *os << to_string(t); }

void PrintTo(EventType t, std::ostream* os) { *os << to_string(t); }

void PrintTo(const Event& e, std::ostream* os) {
  *os << "event " << e.id << " of " << e.object_id << " " << to_string(e.type);
  if (!e.category.empty()) *os << " category=" << e.category;
  *os << " reason=" << e.reason << " message=\"" << e.message << "\" count=" << e.count
      << " first_at=";
  print_time(e.first_at, os);
  *os << " last_at=";
  print_time(e.last_at, os);
}

void PrintTo(const Schedule& s, std::ostream* os) {
  if (s.next_requeue_at == Time{})
    *os << "nothing scheduled";
  else {
    *os << "next reconcile at ";
    print_time(s.next_requeue_at, os);
  }
}

void PrintTo(const ObjectMeta& m, std::ostream* os) {
  *os << to_string(m.group_kind()) << "/" << m.id;
  if (m.slug) *os << " (" << *m.slug << ")";
  *os << " generation=" << m.generation << " observed=";
  if (m.observed_generation)
    *os << *m.observed_generation;
  else
    *os << "none";
  *os << " rv=" << m.resource_version;
  if (m.deletion_requested_at) {
    *os << " deleting since ";
    print_time(*m.deletion_requested_at, os);
  }
  if (!m.labels.empty()) {
    *os << " labels={";
    bool first = true;
    for (auto& [key, value] : m.labels) {
      *os << (first ? "" : ",") << key << "=" << value;
      first = false;
    }
    *os << "}";
  }
  if (!m.finalizers.empty()) {
    *os << " finalizers=[";
    for (std::size_t i = 0; i < m.finalizers.size(); ++i) *os << (i ? "," : "") << m.finalizers[i];
    *os << "]";
  }
  if (!m.conditions.empty()) {
    *os << " conditions=[";
    for (std::size_t i = 0; i < m.conditions.size(); ++i) {
      if (i) *os << ", ";
      PrintTo(m.conditions[i], os);
    }
    *os << "]";
  }
}

void PrintTo(errc e, std::ostream* os) { *os << "errc::" << to_string(e); }

void PrintTo(const Result& r, std::ostream* os) {
  if (r.requeue)
    *os << "Result::requeue_now()";
  else if (r.requeue_after.count() > 0)
    *os << "Result{requeue_after=" << r.requeue_after.count() << "ms}";
  else
    *os << "Result{}";
}

void PrintTo(const EventSpec& e, std::ostream* os) {
  *os << to_string(e.type);
  if (!e.category.empty()) *os << " category=" << e.category;
  *os << " reason=" << e.reason << " message=\"" << e.message << "\"";
  // Printed as actors' messages carry it: a detail with no JSON text (a string that is
  // not UTF-8, nested too deep) prints as a marker rather than throw from the printer.
  if (!e.detail.is_null()) *os << " detail=" << detail::json_wire_text(e.detail);
}

void PrintTo(const EventFilter& f, std::ostream* os) {
  *os << "events";
  if (f.category) *os << " category=" << *f.category;
  if (f.type) *os << " type=" << to_string(*f.type);
  if (f.reason) *os << " reason=" << *f.reason;
  if (f.limit) *os << " limit=" << *f.limit;
  if (f.since) {
    *os << " since ";
    print_time(*f.since, os);
  }
  if (!f.category && !f.type && !f.reason && !f.limit && !f.since) *os << " (all)";
}

void PrintTo(LogLevel l, std::ostream* os) { *os << to_string(l); }

}  // namespace beehive
