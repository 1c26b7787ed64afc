#include "actors/gc.hpp"

#include <algorithm>

#include <iostream>

namespace beehive::detail {

namespace {

using Self = gc_impl::stateful_pointer<GcState>;

void pass(Self self) {
  auto& st = self->state;
  if (st.running) {
    st.again = true;
    return;
  }
  st.running = true;
  self->request(st.writer, caf::infinite, collect_request{})
      .then(
          [self](int) {
            auto& st = self->state;
            st.running = false;
            ++st.passes;
            if (std::exchange(st.again, false)) pass(self);
          },
          [self](caf::error& err) {
            // The next trigger or the cadence retries.
            self->state.running = false;
            if (self->state.logger)
              self->state.logger(LogLevel::error, "garbage collection failed",
                                 {{"reason", error_message(err)}});
          });
}

void arm(Self self) {
  auto& st = self->state;
  if (st.cadence.count() <= 0) return;
  self->send(st.scheduler, wake_at_atom::value, caf::actor_cast<caf::actor>(self),
             st.clock->now() + st.cadence);
}

}  // namespace

bool gc_wants(const commit_record& rec) {
  constexpr unsigned unblocking =
      object_change::deletion | object_change::finalizers | object_change::removed;
  return rec.edges_removed ||
         std::any_of(rec.changes.begin(), rec.changes.end(),
                     [](const object_change& c) { return (c.parts & unblocking) != 0; });
}

gc_impl::behavior_type gc(Self self, store_writer_actor writer, scheduler_actor scheduler,
                          std::shared_ptr<Clock> clock, std::chrono::milliseconds cadence,
                          Logger logger) {
  auto& st = self->state;
  st.writer = std::move(writer);
  st.scheduler = std::move(scheduler);
  st.clock = std::move(clock);
  st.cadence = cadence;
  st.logger = std::move(logger);
  return {
      // The next pass is timed from before this one begins: a clock that moves while the
      // pass runs (a test advancing a manual clock once it sees the pass's effect) must
      // find it due.
      [self](start_atom) {
        arm(self);
        pass(self);
      },
      [self](wake_atom) {
        arm(self);
        pass(self);
      },
      [self](const commit_record& rec) {
        if (gc_wants(rec)) pass(self);
      },
      [](shutdown_atom) {},
      [self](collect_atom) { return self->delegate(self->state.writer, collect_request{}); },
      [self](inspect_atom) {
        return gc_state{self->state.passes, self->state.running};
      },
  };
}

}  // namespace beehive::detail
