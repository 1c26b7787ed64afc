#include "store/wal_batch_vfs.hpp"

#include "store/vfs_shim.hpp"

#include <sqlite3.h>

#include <cstring>
#include <vector>

#include <beehive/errors.hpp>

namespace beehive::store {

namespace {

// The most one write hands the wrapped VFS: SQLite's unix VFS writes at most 128 KiB - 1
// bytes per call (it masks larger sizes), and a big transaction need not be held whole.
constexpr std::size_t kMaxWrite = 120 * 1024;

/// A file opened through the shim: its header, the wrapped VFS's file (allocated to the
/// size that VFS asks for), and for a -wal file the appends not yet written.
struct File : shim::FileHead {
  bool wal;
  // A -wal file: appends held back, starting at offset `start`.
  std::vector<char> held;
  sqlite3_int64 start;
  // The last write was a frame header: the next one is its page. `commit`: the header
  // marks the last frame of a commit, whose page must reach the file at once.
  bool page_next;
  bool commit;
};

File* as_file(sqlite3_file* p) { return reinterpret_cast<File*>(p); }

int flush(File* f) {
  if (f->held.empty()) return SQLITE_OK;
  int rc = f->real->pMethods->xWrite(f->real, f->held.data(), static_cast<int>(f->held.size()),
                                     f->start);
  f->held.clear();
  return rc;
}

int x_close(sqlite3_file* p) {
  auto* f = as_file(p);
  int rc = flush(f);
  int rc2 = f->real->pMethods->xClose(f->real);
  sqlite3_free(f->real);
  f->held.~vector();
  return rc != SQLITE_OK ? rc : rc2;
}

int x_read(sqlite3_file* p, void* buf, int n, sqlite3_int64 off) {
  auto* f = as_file(p);
  if (int rc = flush(f)) return rc;
  return f->real->pMethods->xRead(f->real, buf, n, off);
}

// What is held: a frame's header, the page written after it, the WAL header at offset 0.
// A header whose bytes 4-7 (the database size) are not zero is a commit's last frame.
constexpr int kFrameHeader = 24, kWalHeader = 32;

bool commit_frame(const unsigned char* h) { return (h[4] | h[5] | h[6] | h[7]) != 0; }

int x_write(sqlite3_file* p, const void* buf, int n, sqlite3_int64 off) {
  auto* f = as_file(p);
  if (!f->wal) return f->real->pMethods->xWrite(f->real, buf, n, off);
  const auto* bytes = static_cast<const char*>(buf);
  const bool page = f->page_next, last = page && f->commit;
  f->page_next = n == kFrameHeader;
  f->commit = f->page_next && commit_frame(reinterpret_cast<const unsigned char*>(bytes));
  const bool holdable = f->page_next || page || (n == kWalHeader && off == 0);
  const auto end = f->start + static_cast<sqlite3_int64>(f->held.size());
  if (!f->held.empty() &&
      (!holdable || off != end || f->held.size() + static_cast<std::size_t>(n) > kMaxWrite))
    if (int rc = flush(f)) return rc;
  if (!holdable) return f->real->pMethods->xWrite(f->real, buf, n, off);
  if (f->held.empty()) f->start = off;
  f->held.insert(f->held.end(), bytes, bytes + n);
  return last ? flush(f) : SQLITE_OK;
}

int x_truncate(sqlite3_file* p, sqlite3_int64 size) {
  auto* f = as_file(p);
  if (int rc = flush(f)) return rc;
  return f->real->pMethods->xTruncate(f->real, size);
}

int x_sync(sqlite3_file* p, int flags) {
  auto* f = as_file(p);
  if (int rc = flush(f)) return rc;
  return f->real->pMethods->xSync(f->real, flags);
}

int x_file_size(sqlite3_file* p, sqlite3_int64* size) {
  auto* f = as_file(p);
  if (int rc = flush(f)) return rc;
  return f->real->pMethods->xFileSize(f->real, size);
}

int x_file_control(sqlite3_file* p, int op, void* arg) {
  auto* f = as_file(p);
  if (int rc = flush(f)) return rc;
  return f->real->pMethods->xFileControl(f->real, op, arg);
}
int x_fetch(sqlite3_file* p, sqlite3_int64 off, int amt, void** out) {
  auto* f = as_file(p);
  if (int rc = flush(f)) return rc;
  return f->real->pMethods->xFetch(f->real, off, amt, out);
}

sqlite3_io_methods methods_for(int version) {
  return {version,
          x_close,
          x_read,
          x_write,
          x_truncate,
          x_sync,
          x_file_size,
          shim::lock,
          shim::unlock,
          shim::check_reserved_lock,
          x_file_control,
          shim::sector_size,
          shim::device_characteristics,
          version >= 2 ? shim::shm_map : nullptr,
          version >= 2 ? shim::shm_lock : nullptr,
          version >= 2 ? shim::shm_barrier : nullptr,
          version >= 2 ? shim::shm_unmap : nullptr,
          version >= 3 ? x_fetch : nullptr,
          version >= 3 ? shim::unfetch : nullptr};
}

// The wrapped file's methods decide which of ours SQLite may call.
const sqlite3_io_methods* io_methods(int version) {
  static const sqlite3_io_methods v1 = methods_for(1), v2 = methods_for(2), v3 = methods_for(3);
  return version >= 3 ? &v3 : version == 2 ? &v2 : &v1;
}

sqlite3_vfs* base() { return sqlite3_vfs_find(nullptr); }

int x_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* p, int flags, int* out_flags) {
  auto* f = as_file(p);
  f->base.pMethods = nullptr;
  sqlite3_vfs* b = base();
  f->real = static_cast<sqlite3_file*>(sqlite3_malloc(b->szOsFile));
  if (!f->real) return SQLITE_NOMEM;
  std::memset(f->real, 0, static_cast<std::size_t>(b->szOsFile));
  int rc = b->xOpen(b, name, f->real, flags, out_flags);
  if (!f->real->pMethods) {
    sqlite3_free(f->real);
    return rc;
  }
  // SQLite calls xClose whenever pMethods is set, even after a failed open.
  new (&f->held) std::vector<char>();
  f->start = 0;
  f->page_next = f->commit = false;
  f->wal = (flags & SQLITE_OPEN_WAL) != 0;
  f->base.pMethods = io_methods(f->real->pMethods->iVersion);
  return rc;
}

sqlite3_vfs make_vfs() {
  sqlite3_initialize();
  if (!base()) throw Error(errc::store, "no default SQLite VFS");
  sqlite3_vfs v = shim::forwarding_vfs("beehive-wal-batch", base);
  v.szOsFile = static_cast<int>(sizeof(File));
  v.xOpen = x_open;
  return v;
}

}  // namespace

const char* wal_batch_vfs() {
  static sqlite3_vfs vfs = make_vfs();
  static const bool registered = [] {
    if (sqlite3_vfs_register(&vfs, 0) != SQLITE_OK)
      throw Error(errc::store, "cannot register the WAL batching VFS");
    return true;
  }();
  (void)registered;
  return vfs.zName;
}

}  // namespace beehive::store
