// The test binaries' main: GoogleTest's, plus a report on a test that hangs.
//
// CTest kills a test at its timeout and shows what it printed: for a hang, only the
// test's name. Shortly before that timeout, this prints every thread's stack (through
// gdb, when the machine has it) so that a hang seen once, on a CI machine, can be fixed.
// The test goes on: a slow test that then finishes still passes.

#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "systems_left_running.hpp"

extern char** environ;

namespace {

/// Seconds before the report: the shortest CTest timeout less a margin for gdb (no test
/// comes near it: the longest takes ~25 s), or BEEHIVE_TEST_HANG_REPORT_S.
int report_after_s() {
  if (const char* s = std::getenv("BEEHIVE_TEST_HANG_REPORT_S")) return std::atoi(s);
  return BEEHIVE_TEST_TIMEOUT_S - BEEHIVE_TEST_TIMEOUT_S / 8;
}

/// Prints every thread's stack of this process to stderr, through gdb.
void print_stacks() {
  auto pid = std::to_string(::getpid());
  const char* argv[] = {"gdb",  "-batch", "-nx", "-p", pid.c_str(), "-ex", "thread apply all bt",
                        nullptr};
  pid_t child = 0;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
  int rc = ::posix_spawnp(&child, "gdb", &fa, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    std::fprintf(stderr, "(no stacks: gdb is not installed)\n");
    return;
  }
  int st = 0;
  ::waitpid(child, &st, 0);
}

/// Watches the running test; reports it once when it runs past report_after_s().
class HangReport : public ::testing::EmptyTestEventListener {
 public:
  explicit HangReport(std::chrono::seconds after) : after_(after) {
    thread_ = std::thread([this] { watch(); });
  }
  ~HangReport() override {
    {
      std::lock_guard lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard lk(mu_);
    name_ = std::string(info.test_suite_name()) + "." + info.name();
    started_ = std::chrono::steady_clock::now();
    running_ = true;
    ++test_;
    cv_.notify_all();
  }
  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard lk(mu_);
    running_ = false;
    cv_.notify_all();
  }

 private:
  void watch() {
    std::unique_lock lk(mu_);
    while (!done_) {
      if (!running_) {
        cv_.wait(lk);
        continue;
      }
      auto test = test_;
      if (cv_.wait_until(lk, started_ + after_,
                         [&] { return done_ || test_ != test || !running_; }))
        continue;
      std::fprintf(stderr, "\n%s has run for %lld s: every thread's stack follows.\n",
                   name_.c_str(), static_cast<long long>(after_.count()));
      std::fflush(stderr);
      lk.unlock();
      print_stacks();
      lk.lock();
      cv_.wait(lk, [&] { return done_ || test_ != test; });  // once per test
    }
  }

  std::chrono::seconds after_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string name_;
  std::chrono::steady_clock::time_point started_;
  bool running_ = false;
  bool done_ = false;
  unsigned long test_ = 0;
  std::thread thread_;
};

/// Fails the run when a test destroyed a Beehive whose actor system could not end (a
/// handle to one of its actors outlived it): the destructor then returns after a grace
/// period with a warning, which a passing test would otherwise hide.
class LeftSystems : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (int n = beehive::detail::systems_left_running.exchange(0); n > 0) {
      std::fprintf(stderr,
                   "\n%s.%s left %d actor system(s) running: a handle to a beehive's "
                   "actor outlived its Beehive\n",
                   info.test_suite_name(), info.name(), n);
      failed = true;
    }
  }
  bool failed = false;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // gdb attaches from a child of this process: allowed under Yama's ptrace_scope 1 only
  // when this process says so.
  ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  auto* report = new HangReport(std::chrono::seconds(report_after_s()));
  listeners.Append(report);  // owned by GoogleTest from here
  auto* left = new LeftSystems;
  listeners.Append(left);
  int rc = RUN_ALL_TESTS();
  return rc != 0 ? rc : left->failed ? 1 : 0;
}
