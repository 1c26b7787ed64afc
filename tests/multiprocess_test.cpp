// Two processes on one database file: only one may run a beehive (start) on it at a
// time; clients that do not start stay allowed. The claim dies with its process.

#include "child_process.hpp"
#include "fixture.hpp"

namespace beehive::test {
namespace {

using namespace std::chrono_literals;

class ProcessClaimTest : public BeehiveTest {
 protected:
  void register_noop(Beehive& bh) {
    register_controller<WidgetSpec, WidgetStatus>(bh, widget_kind,
                                                  [](auto&, auto&, auto&) { return Result{}; });
  }
};

TEST_F(ProcessClaimTest, AnotherProcessCannotStartWhileThisOneRuns) {
  register_noop(bh());
  auto stop = bh().start(ctx_);
  ChildProcess peer(BEEHIVE_PEER, {db_path().string()});
  EXPECT_EQ(peer.read_line(), "store_in_use");
  EXPECT_EQ(peer.wait(), 3);
  stop(ctx_);
  ChildProcess after(BEEHIVE_PEER, {db_path().string()});  // free once stopped
  EXPECT_EQ(after.read_line(), "started");
  after.write_line("");
  EXPECT_EQ(after.wait(), 0);
}

TEST_F(ProcessClaimTest, ThisProcessCannotStartWhileAnotherRunsButItsClientsWork) {
  ChildProcess peer(BEEHIVE_PEER, {db_path().string()});
  ASSERT_EQ(peer.read_line(), "started");
  register_noop(bh());
  EXPECT_ERRC(bh().start(ctx_), errc::store_in_use);
  Widgets w(bh(), widget_kind);  // a client that does not start is allowed
  auto o = w.create(ctx_, {"a", 1});
  EXPECT_EQ(w.get(ctx_, o.id).spec.color, "a");
  peer.kill(SIGKILL);  // the kernel drops a dead process's claim
  open();
  register_noop(bh());
  auto stop = bh().start(ctx_);
  stop(ctx_);
}

TEST_F(ProcessClaimTest, TheLockFileIsPrivate) {
  register_noop(bh());
  auto stop = bh().start(ctx_);
  auto lock = db_path();
  lock += ".beehive-lock";
  auto perms = std::filesystem::status(lock).permissions();
  using P = std::filesystem::perms;
  EXPECT_EQ(perms & (P::group_all | P::others_all), P::none);
  stop(ctx_);
}

}  // namespace
}  // namespace beehive::test
