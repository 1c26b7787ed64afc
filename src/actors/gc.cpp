#include "actors/gc.hpp"

#include <algorithm>

namespace beehive::detail {

namespace {

using Self = gc_impl::stateful_pointer<GcState>;

/// The first wait before a failed pass is tried again.
constexpr std::chrono::milliseconds first_retry{1000};

bool idle(const GcState& st) {
  return !st.running && !st.again && !st.trimming && !st.periodic.due(st.next_wake);
}

/// One change-log trim (a write only when something is old enough to go).
void trim(Self self) {
  auto& st = self->state;
  // No bound at all keeps every entry: nothing to ask the writer.
  const auto& keep = st.log_retention;
  if (st.trimming || (keep.entries <= 0 && keep.max_age.count() <= 0)) return;
  if (!st.periodic.writer) return;  // restarting: the gc spawned with its successor trims
  st.trimming = true;
  self->request(st.periodic.writer, caf::infinite, st.log_retention)
      .then(
          [self](int) {
            self->state.trimming = false;
            self->state.settling.check(idle(self->state));
          },
          [self](caf::error& err) {
            auto& st = self->state;
            st.trimming = false;
            st.periodic.log_failure("change log trim failed", err);
            st.settling.check(idle(st));
          });
}

void pass(Self self) {
  auto& st = self->state;
  if (st.running) {
    st.again = true;
    return;
  }
  // Restarting: the gc spawned with its successor runs the pass (the cascade stays owed).
  if (!st.periodic.writer) return;
  st.running = true;
  self->request(st.periodic.writer, caf::infinite,
                collect_request{std::exchange(st.cascade, false)})
      .then(
          [self](int) {
            auto& st = self->state;
            st.running = false;
            st.retry = {};
            ++st.passes;
            // Deposed meanwhile: the next pass would be fenced, logged as a failure.
            if (std::exchange(st.again, false) && st.periodic.leads()) pass(self);
            st.settling.check(idle(st));
          },
          [self](caf::error& err) {
            // A trigger that came during this pass retries now (it may have unblocked
            // what this pass could not reach); otherwise a wake in a while does, sooner
            // than the cadence: nothing else may come to trigger one.
            auto& st = self->state;
            st.running = false;
            st.cascade = true;  // what this pass was to cascade to is still owed
            st.periodic.log_failure("garbage collection failed", err);
            if (std::exchange(st.again, false) && st.periodic.leads()) {
              pass(self);
            } else if (st.periodic.leads()) {
              st.retry =
                  std::min(st.retry.count() > 0 ? st.retry * 2 : first_retry, st.periodic.cadence);
              // Only ever sooner: the scheduler keeps one wake per actor, and the
              // cadence's may be due before the retry.
              if (saturating_add(st.periodic.clock->now(), st.retry) < st.next_wake)
                st.next_wake = st.periodic.arm(self, st.retry);
            }
            st.settling.check(idle(st));
          });
}

/// The cadence: the leader's pass and trim. A standby's does nothing, but a settle
/// that came while it was due waits for it.
void on_wake(Self self) {
  auto& st = self->state;
  st.next_wake = st.periodic.arm(self);
  if (st.periodic.leads()) {
    st.cascade = true;
    pass(self);
    trim(self);
  }
  st.settling.check(idle(st));
}

}  // namespace

bool gc_cascades(const commit_record& rec) {
  return rec.lost_through > 0 ||
         std::any_of(rec.changes.begin(), rec.changes.end(), [](const object_change& c) {
           return (c.parts & object_change::deletion) != 0;
         });
}

bool gc_wants(const commit_record& rec) {
  constexpr unsigned unblocking =
      object_change::deletion | object_change::finalizers | object_change::removed;
  return rec.edges_removed || rec.lost_through > 0 ||
         std::any_of(rec.changes.begin(), rec.changes.end(),
                     [](const object_change& c) { return (c.parts & unblocking) != 0; });
}

gc_impl::behavior_type gc(Self self, Periodic periodic, trim_change_log_request log_retention) {
  self->state.periodic = std::move(periodic);
  self->state.log_retention = log_retention;
  return {
      [self](start_atom) { on_wake(self); },
      [self](wake_atom) { on_wake(self); },
      [self](leadership_atom, bool leads) {
        self->state.retry = {};  // a new term starts its retries afresh
        if (leads) {
          self->state.cascade = true;
          pass(self);
          trim(self);
        }
        self->state.settling.check(idle(self->state));
      },
      [self](const commit_record& rec) {
        if (gc_cascades(rec)) self->state.cascade = true;
        if (gc_wants(rec) && self->state.periodic.leads()) pass(self);
      },
      [](shutdown_atom) {},
      [self](collect_atom) { return self->state.periodic.delegate<int>(self, collect_request{}); },
      [self](inspect_atom) {
        return gc_state{self->state.passes, self->state.running};
      },
      [self](settle_atom) { return self->state.settling.ask(self, idle(self->state)); },
  };
}

}  // namespace beehive::detail
