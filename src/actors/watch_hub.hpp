#pragma once

// The watch_hub actor: takes the store_writer's committed changes from its inbox
// (hub_inbox.hpp: one entry per object, however many commits) and fans each change out
// to the watches of its kind (and id). A new watch gets the current state first
// (`Added`), read in the hub's own handler together with the store's resource
// version; live changes at or below that version were in the snapshot and are
// dropped, so there is no gap and no duplicate at the seam.
//
// Blocking watches are conflating stream cores, so a slow reader holds one pending
// change per object, never one per write, and none for an object it never had that is
// gone again (merge_unread): what the hub and its watches hold is bounded by the objects
// that exist x watches, whatever the write rate. An event watch's stream likewise holds
// one entry per run, and no more runs per (object, category) than the retention of the
// object's kind keeps (with_event_retention; a run beyond it is dropped unread, as the
// store drops it): without a retention, as many as the store keeps. When a stop begins,
// the watches still waiting for their snapshots end with errc::stopped; when the writer
// has published its last commit (it forwards its shutdown), every other watch ends so
// after what is already queued.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <beehive/actors.hpp>
#include <beehive/detail/stream_core.hpp>

#include "actors/hub_inbox.hpp"
#include "actors/services.hpp"
#include "actors/settle.hpp"
#include "actors/store_writer.hpp"
#include "rendezvous.hpp"
#include "store/backend.hpp"

namespace beehive::detail {

using ChangeCore = StreamCore<object_change>;
using EventCore = StreamCore<event_run>;

/// A blocking watch's subscription, from the facade.
struct StreamWatch {
  GroupKind gk;
  std::optional<ObjectID> id;
  std::shared_ptr<const store::LabelSelector> selector;  ///< null: every object
  std::optional<std::int64_t> resume_from;               ///< no snapshot: the log above it
  std::shared_ptr<ChangeCore> core;
  std::uint64_t subscription = 0;
  bool served = false;
  /// Released once the snapshot is queued: the caller's later commits are all live.
  std::shared_ptr<Rendezvous<bool>> ready = std::make_shared<Rendezvous<bool>>();

  /// A watch the hub never served (it had quit) ends as stopped.
  ~StreamWatch() {
    if (!served) {
      core->finish(errc::stopped);
      ready->fail(errc::stopped, "beehive stopped");
    }
  }
};
using StreamWatchPtr = std::shared_ptr<StreamWatch>;

/// A blocking event watch's subscription, from the facade.
struct EventStreamWatch {
  event_watch_request filter;  // without a subscriber
  std::shared_ptr<EventCore> core;
  std::uint64_t subscription = 0;
  bool served = false;
  std::shared_ptr<Rendezvous<bool>> ready = std::make_shared<Rendezvous<bool>>();

  ~EventStreamWatch() {
    if (!served) {
      core->finish(errc::stopped);
      ready->fail(errc::stopped, "beehive stopped");
    }
  }
};
using EventStreamWatchPtr = std::shared_ptr<EventStreamWatch>;

using watch_hub_impl =
    watch_hub_actor::extend<caf::reacts_to<hub_wake_atom>, caf::reacts_to<shutdown_atom>,
                            caf::reacts_to<drain_atom>, caf::reacts_to<StreamWatchPtr>,
                            caf::reacts_to<EventStreamWatchPtr>,
                            caf::replies_to<settle_atom>::with<bool>>;

struct WatchHubState {
  struct Sub {
    GroupKind gk;
    std::optional<ObjectID> id;
    std::shared_ptr<ChangeCore> core;  // a blocking stream or a pulled subscription
    caf::actor actor;                  // an actor subscriber (pushed, or pulled: `core`)
    std::int64_t floor = 0;            // changes at or below were in the snapshot
    /// A pull waiting for the next change.
    std::optional<caf::typed_response_promise<std::vector<object_change>>> waiting{};
    /// With a selector: only matching objects, and the ones the subscriber holds (it
    /// hears `Deleted` when one stops matching, `Added` when one starts).
    std::shared_ptr<const store::LabelSelector> selector{};
    std::unordered_set<ObjectID> visible{};
    /// `visible` is all the subscriber holds (after a snapshot, not after a resume,
    /// which does not say which unchanged objects matched).
    bool visible_exact = true;
    /// Without `visible_exact`: the objects (that exist) the subscriber is known not to
    /// hold, because it was told they left, or they did not match when created or when
    /// first heard of (bounded by the objects that exist: a removal forgets its id).
    std::unordered_set<ObjectID> gone{};
    std::optional<std::int64_t> resume_from{};
  };
  struct EventSub {
    event_watch_request filter;
    std::shared_ptr<EventCore> core;  // a blocking stream, or filter.subscriber
    std::int64_t floor = 0;
    /// A blocking stream's bound on unread runs: the retention of the object's kind
    /// (count per category, age), once the kind is known (the object may not exist yet);
    /// none without a retention.
    std::optional<std::pair<int, std::chrono::milliseconds>> retention{};
    bool kind_known = false;
    /// With a retention: per category, the runs handed to the stream that the store may
    /// still keep: their last times by id (the order they started), and with an age
    /// bound, the same runs by last time, so that each put costs O(log n).
    struct CategoryRuns {
      std::map<EventID, Time> by_id;
      std::set<std::pair<Time, EventID>> by_time;
    };
    std::unordered_map<std::string, CategoryRuns> runs{};
  };
  /// Called once a new watch's snapshot has been delivered (or the watch ended first):
  /// releases the facade's caller, or answers the actor's request with the id.
  using Ready = std::function<void(std::uint64_t id)>;
  /// A watch whose snapshot the reader is reading: the changes fanned out meanwhile are
  /// held, and replayed (above the snapshot's version) once it is delivered. Held folded
  /// per object (per run), as the inbox folds them: however many commits land while the
  /// snapshot is read, at most one entry per object.
  struct OpeningSub {
    Sub sub;
    std::vector<QueuedChange> held;
    std::unordered_map<ObjectID, std::size_t> held_at;  // index in `held`
    Ready ready;
    std::int64_t lost_through = 0;  // of the records held (commit_record::lost_through)
    /// Set when the watch goes before its snapshot was read: the read is skipped.
    std::shared_ptr<std::atomic<bool>> abandoned = std::make_shared<std::atomic<bool>>(false);
    void hold(const QueuedChange& q) {
      auto [at, fresh] = held_at.try_emplace(q.change.row.meta.id, held.size());
      if (fresh)
        held.push_back(q);
      else  // the first change's version stays: it tells whether the snapshot had it
        merge_changes(held[at->second].change, object_change(q.change));
    }
  };
  struct OpeningEventSub {
    EventSub sub;
    std::vector<event_run> held;
    std::unordered_map<EventID, std::size_t> held_at;  // index in `held`
    Ready ready;
    /// As OpeningSub's.
    std::shared_ptr<std::atomic<bool>> abandoned = std::make_shared<std::atomic<bool>>(false);
    /// What changes of the object taught while the snapshot was read: its kind (one
    /// created meanwhile, which the snapshot may not have found) and its removal.
    std::optional<GroupKind> kind{};
    bool removed = false;
    void hold(const event_run& r) {
      auto [at, fresh] = held_at.try_emplace(r.event.id, held.size());
      if (fresh)
        held.push_back(r);
      else
        held[at->second] = r;
    }
  };
  /// A hub that dies without the writer's shutdown (a crash) ends its watches as a
  /// store failure, so readers learn that they must reopen them.
  ~WatchHubState();

  Services services;
  std::shared_ptr<WatchHubFeed> feed;
  std::unordered_map<std::uint64_t, Sub> subs;
  std::unordered_map<std::uint64_t, EventSub> event_subs;
  std::unordered_map<std::uint64_t, OpeningSub> opening;
  std::unordered_map<std::uint64_t, OpeningEventSub> opening_events;
  /// The actor subscribers the hub monitors, each once, with how many of `subs` and
  /// `event_subs` are theirs: an actor that keeps subscribing and unsubscribing must not
  /// collect monitors until it exits.
  std::unordered_map<caf::actor_addr, std::size_t> monitored;
  /// The hub itself (for demonitor, from functions given the state only).
  caf::local_actor* self = nullptr;
  caf::actor_addr address;  // self's, which the feed's inbox is attached to
  /// The writer's shutdown arrived while snapshots were being read: the hub ends its
  /// watches once they are delivered.
  bool shutdown_pending = false;
  SettleWaiters settling;
  bool stopped = false;
  /// A stop began: new watches are refused (errc::stopped), those opening ended so.
  bool draining = false;
  static inline const char* name = "beehive.watch_hub";
};

watch_hub_impl::behavior_type watch_hub(watch_hub_impl::stateful_pointer<WatchHubState> self,
                                        Services services, std::shared_ptr<WatchHubFeed> feed);

}  // namespace beehive::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::detail::StreamWatchPtr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::detail::EventStreamWatchPtr)
