#include "support/fault_vfs.hpp"

#include "support/vfs_shim.hpp"

#include <sqlite3.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include <beehive/errors.hpp>

namespace beehive::test::fault {

namespace {

/// A rule with its own count of matching calls.
struct Armed {
  Rule rule;
  std::thread::id thread;  // for Threads::this_one / others
  int seen = 0;            // matching calls so far
};

/// The shim's state. Static: files opened through the shim point at it for as long as
/// their connections live, past the scope that installed it.
struct State {
  std::mutex mu;
  std::vector<Armed> rules;
  std::optional<std::int64_t> free_space;
  std::atomic<int> injected{0};
  std::array<std::atomic<int>, 5> calls{};
  bool active = false;  // a FaultVfs scope is alive
};

State& state() {
  static State s;
  return s;
}

sqlite3_vfs* base_vfs = nullptr;  // the default VFS the shim wraps
sqlite3_vfs shim_vfs{};

/// A file as the shim opens it: its own header, then the real file of the wrapped VFS
/// (allocated right after this struct).
struct File : shim::FileHead {
  unsigned kind;  // one of files::*
  bool poisoned;
};

unsigned kind_of(int flags) {
  if (flags & SQLITE_OPEN_MAIN_DB) return files::main_db;
  if (flags & SQLITE_OPEN_WAL) return files::wal;
  if (flags & SQLITE_OPEN_MAIN_JOURNAL) return files::journal;
  return files::other;
}

int default_code(Op op) {
  switch (op) {
    case Op::open:
      return SQLITE_CANTOPEN;
    case Op::read:
      return SQLITE_IOERR_READ;
    case Op::write:
      return SQLITE_IOERR_WRITE;
    case Op::sync:
      return SQLITE_IOERR_FSYNC;
    case Op::truncate:
      return SQLITE_IOERR_TRUNCATE;
  }
  return SQLITE_IOERR;
}

/// The error to return for this call, or SQLITE_OK to pass it through.
int decide(Op op, File* f, unsigned kind) {
  auto& s = state();
  s.calls[static_cast<int>(op)].fetch_add(1, std::memory_order_relaxed);
  if (f && f->poisoned && op != Op::open && op != Op::truncate) {
    s.injected.fetch_add(1, std::memory_order_relaxed);
    return default_code(op);
  }
  std::lock_guard lk(s.mu);
  auto me = std::this_thread::get_id();
  for (auto& a : s.rules) {
    auto& r = a.rule;
    if (r.op != op || !(r.files & kind)) continue;
    if (r.threads == Threads::this_one && me != a.thread) continue;
    if (r.threads == Threads::others && me == a.thread) continue;
    int n = a.seen++;
    if (n < r.skip || (r.count >= 0 && n >= r.skip + r.count)) continue;
    if (r.poison && f) f->poisoned = true;
    s.injected.fetch_add(1, std::memory_order_relaxed);
    return r.code ? r.code : default_code(op);
  }
  return SQLITE_OK;
}

File* as_file(sqlite3_file* p) { return reinterpret_cast<File*>(p); }

int x_close(sqlite3_file* p) {
  auto* f = as_file(p);
  int rc = f->real->pMethods ? f->real->pMethods->xClose(f->real) : SQLITE_OK;
  f->base.pMethods = nullptr;
  return rc;
}

int x_read(sqlite3_file* p, void* buf, int amt, sqlite3_int64 off) {
  auto* f = as_file(p);
  if (int rc = decide(Op::read, f, f->kind)) return rc;
  return f->real->pMethods->xRead(f->real, buf, amt, off);
}

int x_write(sqlite3_file* p, const void* buf, int amt, sqlite3_int64 off) {
  auto* f = as_file(p);
  if (int rc = decide(Op::write, f, f->kind)) return rc;
  auto& s = state();
  {
    // A full disk refuses growth, not overwrites: the budget shrinks by what a write
    // adds past the end of the file.
    std::lock_guard lk(s.mu);
    if (s.free_space) {
      sqlite3_int64 size = 0;
      if (f->real->pMethods->xFileSize(f->real, &size) != SQLITE_OK) size = 0;
      auto grow = std::max<std::int64_t>(0, off + amt - size);
      if (grow > *s.free_space) {
        s.injected.fetch_add(1, std::memory_order_relaxed);
        return SQLITE_FULL;
      }
      *s.free_space -= grow;
    }
  }
  return f->real->pMethods->xWrite(f->real, buf, amt, off);
}

int x_truncate(sqlite3_file* p, sqlite3_int64 size) {
  auto* f = as_file(p);
  if (int rc = decide(Op::truncate, f, f->kind)) return rc;
  auto& s = state();
  std::lock_guard lk(s.mu);
  if (s.free_space) {
    sqlite3_int64 now = 0;
    if (f->real->pMethods->xFileSize(f->real, &now) == SQLITE_OK && now > size)
      *s.free_space += now - size;
  }
  return f->real->pMethods->xTruncate(f->real, size);
}

int x_sync(sqlite3_file* p, int flags) {
  auto* f = as_file(p);
  if (int rc = decide(Op::sync, f, f->kind)) return rc;
  return f->real->pMethods->xSync(f->real, flags);
}

int x_fetch(sqlite3_file* p, sqlite3_int64 off, int amt, void** out) {
  // No memory-mapped reads: every page goes through xRead, where faults are injected.
  (void)p;
  (void)off;
  (void)amt;
  *out = nullptr;
  return SQLITE_OK;
}
int x_unfetch(sqlite3_file* p, sqlite3_int64 off, void* ptr) {
  (void)p;
  (void)off;
  (void)ptr;
  return SQLITE_OK;
}

const sqlite3_io_methods io_methods = {
    3,
    x_close,
    x_read,
    x_write,
    x_truncate,
    x_sync,
    shim::file_size,
    shim::lock,
    shim::unlock,
    shim::check_reserved_lock,
    shim::file_control,
    shim::sector_size,
    shim::device_characteristics,
    shim::shm_map,
    shim::shm_lock,
    shim::shm_barrier,
    shim::shm_unmap,
    x_fetch,
    x_unfetch,
};

int x_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* p, int flags, int* out_flags) {
  auto* f = as_file(p);
  f->base.pMethods = nullptr;
  f->real = reinterpret_cast<sqlite3_file*>(f + 1);
  f->kind = kind_of(flags);
  f->poisoned = false;
  if (int rc = decide(Op::open, nullptr, f->kind)) return rc;
  int rc = base_vfs->xOpen(base_vfs, name, f->real, flags, out_flags);
  // SQLite calls xClose whenever pMethods is set, even after a failed open.
  if (f->real->pMethods) f->base.pMethods = &io_methods;
  return rc;
}

/// Builds the shim over the current default VFS, once.
void build_shim() {
  if (base_vfs) return;
  base_vfs = sqlite3_vfs_find(nullptr);
  if (!base_vfs) throw Error(errc::store, "no default SQLite VFS");
  shim_vfs = shim::forwarding_vfs("beehive-fault", [] { return base_vfs; });
  shim_vfs.szOsFile = static_cast<int>(sizeof(File)) + base_vfs->szOsFile;
  shim_vfs.xOpen = x_open;
}

}  // namespace

FaultVfs::FaultVfs() {
  auto& s = state();
  {
    std::lock_guard lk(s.mu);
    if (s.active) throw Error(errc::invalid_argument, "a FaultVfs is already active");
    s.active = true;
    s.rules.clear();
    s.free_space.reset();
  }
  s.injected = 0;
  for (auto& c : s.calls) c = 0;
  sqlite3_initialize();
  build_shim();
  if (sqlite3_vfs_register(&shim_vfs, 1) != SQLITE_OK)
    throw Error(errc::store, "cannot register the fault VFS");
}

FaultVfs::~FaultVfs() {
  clear();
  // Back to the wrapped default. The shim stays known to the files opened through it,
  // which keep working (all calls pass through once no rule is armed).
  sqlite3_vfs_register(base_vfs, 1);
  sqlite3_vfs_unregister(&shim_vfs);
  std::lock_guard lk(state().mu);
  state().active = false;
}

void FaultVfs::arm(const Rule& r) {
  auto& s = state();
  std::lock_guard lk(s.mu);
  s.rules.push_back({r, std::this_thread::get_id(), 0});
}

void FaultVfs::clear() {
  auto& s = state();
  std::lock_guard lk(s.mu);
  s.rules.clear();
  s.free_space.reset();
}

void FaultVfs::set_free_space(std::optional<std::int64_t> bytes) {
  auto& s = state();
  std::lock_guard lk(s.mu);
  s.free_space = bytes;
}

int FaultVfs::injected() const { return state().injected.load(); }

int FaultVfs::calls(Op op) const { return state().calls[static_cast<int>(op)].load(); }

}  // namespace beehive::test::fault
