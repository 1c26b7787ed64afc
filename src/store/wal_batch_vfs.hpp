#pragma once

// The write connection's VFS: a shim over SQLite's default VFS that gathers the WAL
// frames of a commit into one write.
//
// SQLite appends each frame of a commit to the -wal file as two writes (its 24-byte
// header, then the page) and then syncs. On a VM a system call costs microseconds, so a
// six-page commit spent more time entering the kernel than copying, and under
// synchronous=FULL this was a good part of each group commit. The shim keeps consecutive
// appends to a -wal file in memory and hands them to the wrapped VFS as one write (at
// most 120 KiB) before anything that must see them: a sync, a read, a size query, a
// truncation, a file control, a close.
//
// Only for synchronous=FULL, where SQLite syncs the -wal file at every commit before it
// publishes the commit to other connections: a commit's frames are therefore written (or
// their write has failed, failing the commit) before anyone can look for them, and they
// are durable exactly when they were before. Under NORMAL nothing would flush them before
// they are published, so that mode does not use the shim.
//
// Every other file and call passes straight through to the default VFS current when the
// file is opened (so a test's fault-injecting default still sees every operation, only
// fewer and larger writes to a -wal file).

namespace beehive::store {

/// The name of the shim, registered (not as the default) on first use. Thread-safe.
/// For connections with synchronous=FULL only.
const char* wal_batch_vfs();

}  // namespace beehive::store
