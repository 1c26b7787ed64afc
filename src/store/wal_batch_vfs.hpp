#pragma once

// The write connection's VFS: a shim over SQLite's default VFS that gathers the WAL
// frames of a commit into one write.
//
// SQLite appends each frame of a commit to the -wal file as two writes (its 24-byte
// header, then the page). On a VM a system call costs microseconds, so a few-page commit
// spent more time entering the kernel than copying: a quarter of a small update's time,
// and a good part of each group commit's under synchronous=FULL. The shim keeps a
// commit's frames in memory and hands them to the wrapped VFS as one write (at most
// 120 KiB; a bigger transaction goes out in pieces) when it appends the commit's last
// frame, which SQLite marks in the frame's header. That is before SQLite syncs (FULL) and
// before it publishes the commit to other connections (either mode), so readers never
// look for a frame that is not in the file, a failed write fails the commit as it did,
// and the same bytes are durable exactly when they were. Anything else that must see the
// file (a sync, a read, a size query, a truncation, a file control, a close) writes
// what is held first; a write that does not fit SQLite's frame pattern goes straight
// through.
//
// Every other file and call passes straight through to the default VFS current when the
// file is opened (so a test's fault-injecting default still sees every operation, only
// fewer and larger writes to a -wal file).

namespace beehive::store {

/// The name of the shim, registered (not as the default) on first use. Thread-safe.
const char* wal_batch_vfs();

}  // namespace beehive::store
