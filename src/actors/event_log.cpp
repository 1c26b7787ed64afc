#include "actors/event_log.hpp"

namespace beehive::detail {

EventLogState::~EventLogState() {
  for (auto* callers : {&waiting, &swept_for})
    for (auto& rp : *callers) rp.deliver(make_error(errc::stopped, "the event log ended"));
}

namespace {

using Self = event_log_impl::stateful_pointer<EventLogState>;

bool idle(const EventLogState& st) {
  return !st.counts.sweeping && !st.again && !st.periodic.due(st.next_wake);
}

/// Runs one sweep, or folds the ask into one more after the sweep in flight. Callers
/// waiting on `sweep_atom` are answered by the sweep that starts after they asked.
void sweep(Self self) {
  auto& st = self->state;
  if (st.counts.sweeping) {
    st.again = true;
    return;
  }
  if (!st.periodic.writer) {  // restarting: the event log spawned with its successor sweeps
    for (auto& rp : st.waiting)
      rp.deliver(make_error(errc::store, "the store writer is restarting; ask again"));
    st.waiting.clear();
    st.settling.check(idle(st));
    return;
  }
  st.counts.sweeping = true;
  st.swept_for = std::move(st.waiting);
  st.waiting.clear();
  auto callers = [self] {
    auto out = std::move(self->state.swept_for);
    self->state.swept_for.clear();
    return out;
  };
  self->request(st.periodic.writer, caf::infinite, st.policy)
      .then(
          [self, callers](int removed) {
            auto& st = self->state;
            st.counts.sweeping = false;
            ++st.counts.sweeps;
            st.counts.trimmed += static_cast<std::uint64_t>(removed);
            for (auto& rp : callers()) rp.deliver(removed);
            if (std::exchange(st.again, false)) sweep(self);
            st.settling.check(idle(st));
          },
          [self, callers](caf::error& err) {
            // The next ask or the cadence retries.
            auto& st = self->state;
            st.counts.sweeping = false;
            st.periodic.log_failure("event retention sweep failed", err);
            for (auto& rp : callers()) rp.deliver(err);
            if (std::exchange(st.again, false)) sweep(self);
            st.settling.check(idle(st));
          });
}

/// The cadence: the leader's sweep. A standby's does nothing, but a settle that came
/// while it was due waits for it.
void on_wake(Self self) {
  auto& st = self->state;
  st.next_wake = st.periodic.arm(self);
  if (st.periodic.leads()) sweep(self);
  st.settling.check(idle(st));
}

}  // namespace

bool has_event_runs(const commit_record& rec) { return !rec.events.empty(); }

event_log_impl::behavior_type event_log(Self self, Periodic periodic, trim_events_request policy) {
  self->state.periodic = std::move(periodic);
  self->state.policy = std::move(policy);
  return {
      [self](start_atom) { on_wake(self); },
      [self](wake_atom) { on_wake(self); },
      [self](leadership_atom, bool leads) {
        if (leads) sweep(self);
        self->state.settling.check(idle(self->state));
      },
      [self](const commit_record& rec) {
        auto& c = self->state.counts;
        for (auto& run : rec.events) ++(run.event.count == 1 ? c.runs_started : c.runs_extended);
      },
      [self](record_event_request& r) {
        // Moved on, not copied: copying a JSON detail recurses, and the writer checks its
        // depth first.
        return self->state.periodic.delegate<Event>(self, std::move(r));
      },
      [self](const list_events_request& r) {
        return self->state.periodic.delegate<std::vector<Event>>(self, r);
      },
      [self](sweep_atom) {
        auto rp = self->make_response_promise<int>();
        self->state.waiting.push_back(rp);
        sweep(self);
        return rp;
      },
      [self](inspect_atom) { return self->state.counts; },
      [self](settle_atom) { return self->state.settling.ask(self, idle(self->state)); },
  };
}

}  // namespace beehive::detail
