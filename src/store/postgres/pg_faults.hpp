#pragma once

// Fault injection for the PostgreSQL store's tests: the connection lost just before a
// COMMIT is sent, or just after it was answered, which are the two sides of a commit
// whose outcome the writer must resolve by its write token; new connections refused;
// a leadership renewal that never gets an answer; a listener that stops hearing its
// connection, or keeps what it heard; cancel requests sent late; and change-log reads
// that fail. Off unless a test
// arms it; never armed by the library.
//
// Atomics: a test arms them from its thread, the writer takes them on its own.

#include <atomic>
#include <cstdint>

namespace beehive::store::pg::faults {

/// The next commit loses its connection before COMMIT is sent (it did not commit).
inline std::atomic<int> drop_before_commit{0};
/// The next commit loses its connection after COMMIT succeeded (it committed).
inline std::atomic<int> drop_after_commit{0};

/// The next commit that begins the next transaction with it (PgWriter::begin_ahead)
/// loses its connection once the COMMIT succeeded, what it began still unread.
inline std::atomic<int> drop_after_begin_ahead{0};
/// The next commit gives up on its connection this many milliseconds after sending it,
/// whatever the server is doing: with the server still working on the COMMIT (slowed
/// by a test's trigger, as by a synchronous replica), the outcome is still to come when
/// the writer reads its token back.
inline std::atomic<int> cut_commit_after_ms{0};

/// While set, every connection attempt fails as it would with the server out of reach
/// (connections already made stay).
inline std::atomic<bool> refuse_connections{false};

/// While set to a session (the `holder` it writes in the leadership table), that
/// session's leadership campaign meets a server that does not answer, every attempt.
inline std::atomic<std::int64_t> stall_campaign_of{0};

/// The first listener to see it set (and clear it) stops hearing its connection, as a
/// half-open socket across a partition: nothing arrives, nothing fails.
inline std::atomic<bool> deafen_listener{false};

/// While set, listeners keep the notes they hear to themselves, uncounted, until they
/// answer a writer's round trip (NoteQueue::await_sent): as a listener whose process
/// was paused before it read them. listener_notes_held counts the notes kept.
inline std::atomic<bool> hold_listener_notes{false};
inline std::atomic<int> listener_notes_held{0};

/// While above 0, a cancel request is sent this many milliseconds late, as over a slow
/// network. cancels_sent counts the cancels asked for, cancels_delivered the ones sent.
inline std::atomic<int> cancel_delay_ms{0};
inline std::atomic<int> cancels_sent{0};
inline std::atomic<int> cancels_delivered{0};

/// While set, every read of the change log (Reads::changes_since) fails as a lost
/// connection would; change_log_reads_failed counts them.
inline std::atomic<bool> fail_change_log_reads{false};
inline std::atomic<int> change_log_reads_failed{0};

/// When set, called by an open inside the transaction that creates or migrates the
/// schema, its lock held: a test holds it there, as a process paused mid-open.
inline std::atomic<void (*)()> inside_open_migration{nullptr};

/// Consumes one armed fault.
inline bool take(std::atomic<int>& fault) {
  int n = fault.load();
  while (n > 0)
    if (fault.compare_exchange_weak(n, n - 1)) return true;
  return false;
}

}  // namespace beehive::store::pg::faults
