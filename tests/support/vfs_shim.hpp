#pragma once

// Test support (the beehive_test_support library, never the shipped one): the plumbing
// of a SQLite VFS shim, used by the fault VFS (fault_vfs.hpp). A file that wraps a file
// of another VFS, the file methods that pass a call through unchanged, and a VFS whose
// methods other than xOpen forward to the wrapped VFS. A shim supplies xOpen and the file
// methods it changes.

#include <sqlite3.h>

namespace beehive::test::shim {

/// How a shim's file begins: SQLite's header, then the wrapped VFS's file.
struct FileHead {
  sqlite3_file base;
  sqlite3_file* real;
};

inline sqlite3_file* real(sqlite3_file* p) { return reinterpret_cast<FileHead*>(p)->real; }

/// File methods that pass the call to the wrapped file.
int file_size(sqlite3_file* p, sqlite3_int64* size);
int lock(sqlite3_file* p, int lock);
int unlock(sqlite3_file* p, int lock);
int check_reserved_lock(sqlite3_file* p, int* out);
int file_control(sqlite3_file* p, int op, void* arg);
int sector_size(sqlite3_file* p);
int device_characteristics(sqlite3_file* p);
int shm_map(sqlite3_file* p, int pg, int pgsz, int extend, void volatile** out);
int shm_lock(sqlite3_file* p, int offset, int n, int flags);
void shm_barrier(sqlite3_file* p);
int shm_unmap(sqlite3_file* p, int del);
int unfetch(sqlite3_file* p, sqlite3_int64 off, void* ptr);

/// A VFS named `name` (version 2: no system-call overrides) whose methods other than
/// xOpen call the VFS `base()` returns at that moment; szOsFile and xOpen are left to
/// the caller. `base()` must return a VFS whenever the shim is used.
sqlite3_vfs forwarding_vfs(const char* name, sqlite3_vfs* (*base)());

}  // namespace beehive::test::shim
