#include "support/vfs_shim.hpp"

namespace beehive::test::shim {

int file_size(sqlite3_file* p, sqlite3_int64* size) {
  return real(p)->pMethods->xFileSize(real(p), size);
}
int lock(sqlite3_file* p, int lock) { return real(p)->pMethods->xLock(real(p), lock); }
int unlock(sqlite3_file* p, int lock) { return real(p)->pMethods->xUnlock(real(p), lock); }
int check_reserved_lock(sqlite3_file* p, int* out) {
  return real(p)->pMethods->xCheckReservedLock(real(p), out);
}
int file_control(sqlite3_file* p, int op, void* arg) {
  return real(p)->pMethods->xFileControl(real(p), op, arg);
}
int sector_size(sqlite3_file* p) { return real(p)->pMethods->xSectorSize(real(p)); }
int device_characteristics(sqlite3_file* p) {
  return real(p)->pMethods->xDeviceCharacteristics(real(p));
}
int shm_map(sqlite3_file* p, int pg, int pgsz, int extend, void volatile** out) {
  return real(p)->pMethods->xShmMap(real(p), pg, pgsz, extend, out);
}
int shm_lock(sqlite3_file* p, int offset, int n, int flags) {
  return real(p)->pMethods->xShmLock(real(p), offset, n, flags);
}
void shm_barrier(sqlite3_file* p) { real(p)->pMethods->xShmBarrier(real(p)); }
int shm_unmap(sqlite3_file* p, int del) { return real(p)->pMethods->xShmUnmap(real(p), del); }
int unfetch(sqlite3_file* p, sqlite3_int64 off, void* ptr) {
  return real(p)->pMethods->xUnfetch(real(p), off, ptr);
}

namespace {

// The wrapped VFS, through the getter kept in the shim's pAppData.
struct Base {
  sqlite3_vfs* (*get)();
};
sqlite3_vfs* base(sqlite3_vfs* shim) { return static_cast<Base*>(shim->pAppData)->get(); }

int x_delete(sqlite3_vfs* v, const char* name, int sync_dir) {
  return base(v)->xDelete(base(v), name, sync_dir);
}
int x_access(sqlite3_vfs* v, const char* name, int flags, int* out) {
  return base(v)->xAccess(base(v), name, flags, out);
}
int x_full_pathname(sqlite3_vfs* v, const char* name, int n, char* out) {
  return base(v)->xFullPathname(base(v), name, n, out);
}
void* x_dl_open(sqlite3_vfs* v, const char* name) { return base(v)->xDlOpen(base(v), name); }
void x_dl_error(sqlite3_vfs* v, int n, char* out) { base(v)->xDlError(base(v), n, out); }
void (*x_dl_sym(sqlite3_vfs* v, void* h, const char* sym))(void) {
  return base(v)->xDlSym(base(v), h, sym);
}
void x_dl_close(sqlite3_vfs* v, void* h) { base(v)->xDlClose(base(v), h); }
int x_randomness(sqlite3_vfs* v, int n, char* out) { return base(v)->xRandomness(base(v), n, out); }
int x_sleep(sqlite3_vfs* v, int us) { return base(v)->xSleep(base(v), us); }
int x_current_time(sqlite3_vfs* v, double* out) { return base(v)->xCurrentTime(base(v), out); }
int x_get_last_error(sqlite3_vfs* v, int n, char* out) {
  return base(v)->xGetLastError(base(v), n, out);
}
int x_current_time_int64(sqlite3_vfs* v, sqlite3_int64* out) {
  return base(v)->xCurrentTimeInt64(base(v), out);
}

}  // namespace

sqlite3_vfs forwarding_vfs(const char* name, sqlite3_vfs* (*get)()) {
  sqlite3_vfs v{};
  v.iVersion = 2;
  v.mxPathname = get()->mxPathname;
  v.zName = name;
  v.pAppData = new Base{get};  // lives as long as the VFS: for the process
  v.xDelete = x_delete;
  v.xAccess = x_access;
  v.xFullPathname = x_full_pathname;
  v.xDlOpen = x_dl_open;
  v.xDlError = x_dl_error;
  v.xDlSym = x_dl_sym;
  v.xDlClose = x_dl_close;
  v.xRandomness = x_randomness;
  v.xSleep = x_sleep;
  v.xCurrentTime = x_current_time;
  v.xGetLastError = x_get_last_error;
  v.xCurrentTimeInt64 = x_current_time_int64;
  return v;
}

}  // namespace beehive::test::shim
