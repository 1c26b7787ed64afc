// Two processes on one database file: only one may run a beehive (start) on it at a
// time; clients that do not start stay allowed. The claim dies with its process. Commits
// made by other writers of the file wake the running beehive's controllers and reach its
// watches within about 100 ms.

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include <beehive/actors.hpp>

#include "child_process.hpp"
#include "controller_fixture.hpp"
#include "store/sqlite/run_lock.hpp"
#include "tools/process.hpp"

namespace beehive::test {
namespace {

using namespace std::chrono_literals;

class ProcessClaimTest : public BeehiveTest {
 protected:
  void register_noop(Beehive& bh) {
    register_controller<WidgetSpec, WidgetStatus>(bh, widget_kind,
                                                  [](auto&, auto&, auto&) { return Result{}; });
  }
  /// Another process starting on `db` is refused with store_in_use.
  void expect_another_process_refused(const std::filesystem::path& db) {
    ChildProcess peer(BEEHIVE_PEER, {db.string()});
    auto said = peer.read_line();
    if (said == "started") peer.write_line("");  // should it start after all: let it stop
    EXPECT_EQ(said, "store_in_use") << db;
    EXPECT_EQ(peer.wait(), 3);
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

// The claim is the file's, not its name's: another process that opens it through a
// symlink, or by a relative path, is refused as well.
TEST_F(ProcessClaimTest, AnotherProcessOpeningTheFileThroughASymlinkCannotStart) {
  register_noop(bh());
  auto stop = bh().start(ctx_);
  auto alias = dir_.file("alias.db");
  std::filesystem::create_symlink(db_path(), alias);
  expect_another_process_refused(alias);
  stop(ctx_);
}

// A symlink whose target does not exist yet: opening through it creates the target
// (private, and its missing directories), and the claim is the target's, whichever
// name another process opens it by.
TEST_F(ProcessClaimTest, AStoreOpenedThroughADanglingSymlinkClaimsItsTarget) {
  auto target = dir_.file("real") / "app.db";
  auto alias = dir_.file("alias.db");
  std::filesystem::create_symlink(target, alias);
  Beehive bh(sqlite::open(alias, {.read_connections = 1}));
  register_noop(bh);
  auto stop = bh.start(ctx_);
  ASSERT_TRUE(std::filesystem::is_regular_file(target));
  using P = std::filesystem::perms;
  EXPECT_EQ(std::filesystem::status(target).permissions() & (P::group_all | P::others_all),
            P::none);
  expect_another_process_refused(target);
  stop(ctx_);
}

// A database its user may read but not write is refused before SQLite touches it:
// SQLite would open it read-only, and its first read would leave -wal and -shm files
// with the database's mode behind, so that opens kept failing once the mode was put
// right. (Run as root, the other process runs as another user, whom the mode binds.)
TEST_F(ProcessClaimTest, ADatabaseItsUserCannotWriteIsRefusedAndLeftAsItWas) {
  namespace fs = std::filesystem;
  auto dir = dir_.file("ro");
  fs::create_directory(dir);
  auto file = dir / "app.db";
  { auto store = sqlite::open(file); }
  std::vector<std::string> cmd;
  if (::geteuid() == 0) {
    ASSERT_TRUE(fs::exists("/usr/bin/setpriv"))
        << "run as root, the test needs setpriv to run the peer as another user";
    cmd = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
    for (auto& p : {dir, file}) ASSERT_EQ(::chown(p.c_str(), 65534, 65534), 0) << p;
  }
  cmd.push_back(BEEHIVE_PEER);
  cmd.push_back(file.string());
  fs::permissions(file, fs::perms::owner_read);
  auto refused = run(cmd);
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("cannot open for writing"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(dir / "app.db-wal"));
  EXPECT_FALSE(fs::exists(dir / "app.db-shm"));
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  Process peer(cmd, /*pipe_stdin=*/true);
  EXPECT_EQ(peer.read_line(), "started");
  auto r = peer.wait();  // stdin ends: it stops
  EXPECT_EQ(r.status, 0) << r.err;
}

// A store opened by a relative path keeps naming the same file after the process
// changes its working directory (a daemon does, at start).
TEST_F(ProcessClaimTest, AStoreOpenedByARelativePathOutlivesAChangeOfDirectory) {
  auto before = std::filesystem::current_path();
  std::filesystem::current_path(dir_.path());
  struct Back {
    std::filesystem::path to;
    ~Back() { std::filesystem::current_path(to); }
  } back{before};
  auto store = sqlite::open("relative.db", {.read_connections = 1});
  Beehive bh(store);
  Widgets w(bh, widget_kind);
  auto o = w.create(ctx_, {"a", 1});
  std::filesystem::current_path("/");
  EXPECT_EQ(w.get(ctx_, o.id).spec.color, "a");
  register_noop(bh);
  auto stop = bh.start(ctx_);
  EXPECT_EQ(w.update(ctx_, o.id, {"b", 2}).spec.color, "b");
  stop(ctx_);
  EXPECT_FALSE(std::filesystem::exists("/relative.db"));
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

// A beehive run as root (sudo, once) leaves the lock file it makes to the database's
// owner, as SQLite leaves its -wal and -shm files: the owner's own later runs can still
// claim it. Run by anyone else, it stays the maker's. (The decision is checked for both
// kinds of user whoever runs the test; the file itself, as the test's user.)
TEST_F(ProcessClaimTest, ALockFileMadeByRootBelongsToTheDatabasesOwner) {
  auto file = std::filesystem::canonical(db_path());
  struct stat db {};
  ASSERT_EQ(::stat(file.c_str(), &db), 0);
  EXPECT_EQ(store::RunLock::owner_for(0, file), std::pair(db.st_uid, db.st_gid));
  EXPECT_EQ(store::RunLock::owner_for(4242, file), std::nullopt);
  EXPECT_EQ(store::RunLock::owner_for(0, file.parent_path() / "missing.db"), std::nullopt);
  // As root, the database first goes to another user: the lock file must follow it.
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::chown(file.c_str(), 4242, 4343), 0);
  }
  auto lock = file;
  lock += ".beehive-lock";
  std::filesystem::remove(lock);
  register_noop(bh());
  auto stop = bh().start(ctx_);
  struct stat st {};
  ASSERT_EQ(::stat(lock.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, root ? 4242u : ::geteuid());
  EXPECT_EQ(st.st_gid, root ? 4343u : ::getegid());
  stop(ctx_);
}

// The lock file is never opened through a symlink: a run as root would truncate (and
// hand to the database's owner) whatever the link points at.
TEST_F(ProcessClaimTest, ALockFileThatIsASymlinkIsRefusedAndItsTargetLeftAlone) {
  auto file = std::filesystem::canonical(db_path());
  auto lock = file;
  lock += ".beehive-lock";
  auto target = file.parent_path() / "precious";
  std::ofstream(target) << "keep me\n";
  std::filesystem::remove(lock);
  std::filesystem::create_symlink(target, lock);
  register_noop(bh());
  EXPECT_ERRC(bh().start(ctx_), errc::store);
  std::ifstream in(target);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "keep me");
}

// beehive-ctl learns which store session runs from the lock file, taking it shared for an
// instant: a start at that instant waits it out rather than failing as if another
// beehive ran.
TEST_F(ProcessClaimTest, AToolLookingAtTheClaimNeverMakesAStartFail) {
  auto file = std::filesystem::canonical(db_path());
  EXPECT_EQ(store::RunLock::running_session(file), 0);  // nothing runs
  std::atomic<bool> done{false};
  std::atomic<int> looks{0};
  std::thread looker([&] {
    while (!done) {
      store::RunLock::running_session(file);
      ++looks;
    }
  });
  std::int64_t last = 0;
  for (int i = 0; i < 30; ++i) {
    open();  // a new store session each time
    register_noop(bh());
    Stop stop;
    try {
      stop = bh().start(ctx_);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "start " << i << ": " << e.what();
      break;
    }
    auto running = store::RunLock::running_session(file);
    EXPECT_TRUE(running && *running > last) << "start " << i;
    last = running.value_or(last);
    stop(ctx_);
    EXPECT_EQ(store::RunLock::running_session(file), 0);
  }
  done = true;
  looker.join();
  EXPECT_GT(looks.load(), 30);
}

// A holder that wrote no session (a build before this one) is not taken for the one
// whose line it finds: a stopped holder empties the file, and a line whose process is
// gone (a crash) is not believed.
TEST_F(ProcessClaimTest, ALockHeldByAProcessThatWroteNoSessionTellsNoSession) {
  auto file = std::filesystem::canonical(db_path());
  auto lock = file;
  lock += ".beehive-lock";
  register_noop(bh());
  auto stop = bh().start(ctx_);
  auto session = store::RunLock::running_session(file);
  ASSERT_TRUE(session && *session > 0);
  stop(ctx_);
  EXPECT_EQ(std::filesystem::file_size(lock), 0u);
  auto hold_as_an_older_build = [&] {
    int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
    EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
    return fd;
  };
  int fd = hold_as_an_older_build();
  EXPECT_EQ(store::RunLock::running_session(file), std::nullopt);
  ::close(fd);
  // A crashed holder's line, under an older build's lock.
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  std::ofstream(lock) << *session << ' ' << dead << '\n';
  fd = hold_as_an_older_build();
  EXPECT_EQ(store::RunLock::running_session(file), std::nullopt);
  ::close(fd);
  // The same line from a live process is believed.
  std::ofstream(lock) << *session << ' ' << ::getpid() << '\n';
  fd = hold_as_an_older_build();
  EXPECT_EQ(store::RunLock::running_session(file), session);
  ::close(fd);
}

using ForeignCommitTest = ControllerTest;

/// Another writer of the file: a second Store on it in this process, which SQLite treats
/// like another process (its own connection). The running beehive's clock never moves,
/// so only the foreign-commit check can wake anything.
TEST_F(ForeignCommitTest, AnotherWritersCommitsWakeControllersAndReachWatches) {
  register_widgets();
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(eventually([&] { return recorder_->count(a.id) == 1; }));
  auto watch = w.watch_list(ctx_);
  ASSERT_TRUE(watch.next_for(5s).has_value());  // the snapshot

  auto writer_transactions = [&] {
    caf::scoped_actor self{bh_->store_writer()->home_system()};
    std::uint64_t n = 0;
    self->request(bh_->store_writer(), std::chrono::seconds(10), inspect_atom::value)
        .receive([&](const store_writer_state& st) { n = st.transactions; }, [](caf::error&) {});
    return n;
  };
  auto ours_before = writer_transactions();
  auto other_store = sqlite::open(dir_.file("beehive.db"));
  Beehive other(other_store);
  Widgets theirs(other, widget_kind);
  theirs.update(ctx_, a.id, {"changed", 2});
  ASSERT_TRUE(eventually([&] { return recorder_->count(a.id) == 2; }, 5s));
  EXPECT_EQ(recorder_->last(a.id).spec.color, "changed");
  // Publishing another writer's commit is no transaction of this beehive's writer (the
  // reconcile of it wrote nothing either).
  EXPECT_EQ(writer_transactions(), ours_before);
  auto c = watch.next_for(5s);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->type, ChangeType::Modified);
  EXPECT_EQ(c->object.spec.color, "changed");

  auto b = theirs.create(ctx_, {"b", 1});
  ASSERT_TRUE(eventually([&] { return recorder_->count(b.id) == 1; }, 5s));
  c = watch.next_for(5s);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->type, ChangeType::Added);
  EXPECT_EQ(c->object.id, b.id);

  // The beehive's own writes are not published twice.
  w.update(ctx_, a.id, {"ours", 3});
  c = watch.next_for(5s);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->object.spec.color, "ours");
  theirs.update(ctx_, b.id, {"b2", 2});
  c = watch.next_for(5s);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->object.spec.color, "b2");  // not a second copy of "ours"
}

// Blocks run back to back (each thread's next one deferred behind the other's) leave
// the writer no moment without a session open: another writer's commit is published as
// a block ends, not held back for as long as blocks keep coming.
TEST_F(ForeignCommitTest, AnotherWritersCommitReachesWatchesWhileBlocksRunBackToBack) {
  auto cc = register_widgets();
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  start();
  auto watch = w.watch_list(ctx_);
  ASSERT_TRUE(watch.next_for(5s).has_value());  // the snapshot
  std::atomic<bool> done{false};
  std::vector<std::thread> blocks;
  struct Joined {  // however the test ends
    std::atomic<bool>& done;
    std::vector<std::thread>& threads;
    ~Joined() {
      done = true;
      for (auto& t : threads) t.join();
    }
  } joined{done, blocks};
  for (int i = 0; i < 2; ++i)
    blocks.emplace_back([&] {
      while (!done) cc.within(ctx_, [&](const Context& tx) { w.get(tx, a.id); });
    });
  auto other_store = sqlite::open(dir_.file("beehive.db"));
  Beehive other(other_store);
  auto b = Widgets(other, widget_kind).create(ctx_, {"b", 1});
  auto c = watch.next_for(5s);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->object.id, b.id);
}

}  // namespace
}  // namespace beehive::test
