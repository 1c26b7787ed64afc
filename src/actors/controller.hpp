#pragma once

// The controller actor of one kind: its work queue, its workers, its per-object timers
// (backoff ladder, requeue_after) and the kind's resync.
//
// Queue semantics: an id queued twice runs once; an id is never handed to two workers
// at once; an id re-added while it is being reconciled runs once more afterwards.
// Workers are detached actors (reconcile may block), spawned by the root with their
// controller and linked to it: each answers a reconcile request with the pass's Outcome.
// Stop asks the controller to drain: it stops dispatching and answers once no pass is in
// flight. Its reads of the store (the listing at start and at each resync, a requeue's
// existence check) run on the reader actor, never on the controller's thread.

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <beehive/actors.hpp>
#include <beehive/detail/controller_core.hpp>
#include <beehive/detail/stream_core.hpp>
#include <beehive/schedule.hpp>

#include "actors/timer_set.hpp"

#include "actors/atoms.hpp"
#include "actors/pass_registry.hpp"
#include "actors/schedule_table.hpp"
#include "actors/scheduler.hpp"
#include "actors/services.hpp"
#include "actors/settle.hpp"
#include "actors/store_writer.hpp"
#include "metrics/kind_metrics.hpp"
#include "metrics/object_tally.hpp"
#include "rendezvous.hpp"

namespace beehive::detail {

struct OptionSet;

/// A kind's controller settings, resolved from the Beehive's and the kind's options.
struct KindSettings {
  int concurrency = 1;
  std::chrono::milliseconds resync{30000};  // <= 0: no resync
  std::chrono::milliseconds max_retry{30000};
  std::chrono::milliseconds base_retry{1000};
  double jitter = 0;            // largest fraction of a backoff step added or taken at random
  double rate = 0;              // passes per second; <= 0: no rate limit
  int burst = 1;                // the token bucket's size
  std::vector<GroupKind> owns;  // a change of an object of these kinds wakes its owner
  /// A change of an object of the kind wakes the ids the function returns.
  std::vector<std::pair<GroupKind, std::function<std::vector<ObjectID>(const ObjectMeta&)>>>
      watches;

  /// Reads the backoff and rate limit of `s` over these (with_backoff, then
  /// with_max_retry_interval; see options.hpp), and at `kind_level` (register_controller's
  /// options) its owned and watched kinds.
  void apply(const OptionSet& s, bool kind_level);
};

/// Everything registration records about a kind.
struct KindEntry {
  GroupKind gk;
  KindSettings settings;
  ReconcileFn reconcile;
  std::shared_ptr<ScheduleTable> schedules = std::make_shared<ScheduleTable>();
  std::optional<std::pair<int, std::chrono::milliseconds>> event_retention;
  std::shared_ptr<Migrator> migrator;
  std::shared_ptr<const KindMetrics> metrics;  // null: no sink, nothing reported
  std::uint64_t restarts = 0;                  // written by the root, read by inspect
  /// The passes running now, across the controller's restarts.
  std::shared_ptr<PassRegistry> passes = std::make_shared<PassRegistry>();
};

/// A blocking `Client::requeue`, from the facade: answered through `reply` once the
/// object is queued (or found missing). A caller that gave up waiting first (its
/// context ended) has its requeue dropped, unapplied.
struct BlockingRequeue {
  requeue_request request;
  std::shared_ptr<Rendezvous<bool>> reply = std::make_shared<Rendezvous<bool>>();

  BlockingRequeue() = default;
  BlockingRequeue(const BlockingRequeue&) = delete;
  BlockingRequeue& operator=(const BlockingRequeue&) = delete;
  /// A request the controller never answered (it had quit, or quit while checking the
  /// id) ends as stopped.
  ~BlockingRequeue() { reply->fail(errc::stopped, "the controller ended"); }
};
using BlockingRequeuePtr = std::shared_ptr<BlockingRequeue>;

/// The controller's full interface: the public one plus the root's, the scheduler's,
/// the writer's and the facade's messages.
using controller_impl = controller_actor::extend<
    caf::reacts_to<start_atom>, caf::reacts_to<leadership_atom, bool>,
    caf::reacts_to<commit_record>, caf::reacts_to<records_atom>, caf::reacts_to<wake_atom>,
    caf::replies_to<drain_atom>::with<bool>, caf::reacts_to<shutdown_atom>,
    caf::replies_to<settle_atom>::with<bool>, caf::reacts_to<BlockingRequeuePtr>,
    caf::reacts_to<released_atom, ObjectID>>;

struct ControllerState {
  ControllerState() = default;
  ControllerState(const ControllerState&) = delete;
  ControllerState& operator=(const ControllerState&) = delete;
  /// Lets the sink know that the passes still in flight will never be heard to end.
  ~ControllerState();

  std::shared_ptr<KindEntry> kind;
  Services services;
  scheduler_impl scheduler;
  /// The commit records it wants, folded by the writer (records_atom says when).
  RecordInboxPtr inbox;

  /// The ids waiting for a worker, in order: those in `queued`. An id forgotten while
  /// queued stays here until dispatch reaches it and skips it (or a compaction drops
  /// it), so that removing many queued objects costs each one O(1).
  std::deque<ObjectID> queue;
  std::unordered_set<ObjectID> queued;
  std::unordered_set<ObjectID> in_flight;
  std::unordered_set<ObjectID> dirty;  // re-added while in flight
  std::vector<caf::actor> idle;        // workers waiting for an id
  std::vector<caf::actor> workers;
  std::unordered_map<ObjectID, std::chrono::milliseconds> backoff;  // last retry delay
  /// Ids whose last pass ended in a TerminalError: woken only by a spec change, a
  /// deletion request or a requeue (which lift the mark).
  std::unordered_set<ObjectID> terminal;
  /// In-flight ids whose mark was lifted meanwhile: their pass's TerminalError does
  /// not mark them again.
  std::unordered_set<ObjectID> lifted;
  /// In-flight ids whose object was removed (collected) meanwhile: their pass's outcome
  /// schedules nothing.
  std::unordered_set<ObjectID> collected;
  /// Ids whose pass found them held by a pass of the controller this one replaced
  /// (Outcome::busy): queued again once that pass ends (released_atom).
  std::unordered_set<ObjectID> awaiting_release;
  /// The rate limit's token bucket (KindSettings::rate), on the timers' time line.
  double tokens = 0;
  std::optional<Time> tokens_at;  // none: the bucket is unused yet
  Time rate_wake{Time::max()};    // when the next token is due, while ids wait for one
  std::minstd_rand random{std::random_device{}()};  // backoff jitter
  TimerSet timers;                                  // pending backoff / requeue_after
  /// Per `with_watches` entry (in its order, sized at spawn: records may come before
  /// start): the ids each watched object mapped to when last seen, so that a change
  /// moving it to others wakes those it left too (only objects that mapped to some).
  /// Learnt from a listing at start, then from changes.
  struct WatchedTargets {
    std::unordered_map<ObjectID, std::vector<ObjectID>> known;
    /// Ids a commit record taught while a listing was out: its older reply leaves them.
    std::unordered_set<ObjectID> seen;
    int listings = 0;
  };
  std::vector<WatchedTargets> watched;
  std::int64_t listed_rv = 0;  // highest resource version the start listing saw
  int listings = 0;            // start and resync listings out (on the reader)
  std::unordered_set<ObjectID> removed_while_listing;  // while listings > 0
  bool start_listing = false;                          // a start listing is out
  bool lost_while_listing = false;  // others' changes were lost meanwhile: list again after it
  Time next_resync{Time::max()};
  bool resync_listing = false;  // a resync's listing is in flight
  bool resync_again = false;    // a resync tick came meanwhile: list once more after it
  // Passes begun while a resync's listing is out: they reconcile their objects as the
  // listing would, which does not queue them again (a timer falling due with the resync
  // would otherwise run its object twice at once).
  std::unordered_set<ObjectID> passed_while_resyncing;
  std::uint64_t resync_listings = 0;  // begun (inspect)
  Time relist_at{Time::max()};        // a start listing that failed is tried again then
  Time recount_at{Time::max()};       // a count listing that failed is tried again then
  // Each listing that fails again waits a step longer (the kind's backoff ladder): a
  // store down for an hour is not listed every base_retry; 0 once one succeeds.
  std::chrono::milliseconds relist_step{0}, recount_step{0};
  Time requested_wake{Time::max()};
  // Metrics only (empty without a sink): when each queued id was queued, the kind's
  // object counts, and the gauge values last reported, so that an unchanged gauge is not
  // reported again.
  std::unordered_map<ObjectID, Time> enqueued_at;
  ObjectTally tally;
  std::size_t reported_depth = SIZE_MAX;
  std::pair<std::size_t, std::size_t> reported_objects{SIZE_MAX, SIZE_MAX};
  /// Told that this process no longer leads (leadership_atom), until told it leads
  /// again: it queues, times and schedules nothing meanwhile, whatever the store says.
  bool deposed = false;
  // Off until start has listed the kind (commits arriving earlier only queue, so that
  // start reconciles each object once) and again once draining.
  bool dispatching = false;
  bool draining = false;
  /// Stop's drain request, answered once nothing is in flight.
  std::optional<caf::typed_response_promise<bool>> drained;
  /// Reads on the reader actor not answered yet (a listing, a requeue's check).
  int pending_reads = 0;
  SettleWaiters settling;
  /// Actors' requeue requests waiting for their id's check, by a number of their own:
  /// answered stopped should the controller end first (CAF 0.17 answers no promise an
  /// actor dies holding).
  std::unordered_map<std::uint64_t, caf::typed_response_promise<bool>> requeues;
  std::uint64_t requeues_made = 0;

  static inline const char* name = "beehive.controller";
};

/// A change that makes the kind's controller reconcile its object: a create, a spec
/// change or a deletion request of that kind (a status write does not).
bool wakes_controller(const GroupKind& gk, const object_change& c);
/// A change of an object that `gk` owns, of a kind it owns (`with_owns`).
bool wakes_owner(const GroupKind& gk, const KindSettings& s, const object_change& c);
/// A change of an object of a kind `s` watches (`with_watches`).
bool watched(const KindSettings& s, const object_change& c);
/// Whether a commit concerns the kind's controller at all (its writer subscription
/// filter): the kind's own wakes and removals, and changes of owned and watched objects.
/// `counts_objects` (with metrics): also every change that moves the kind's object
/// counts (a status write).
bool controller_wants(const GroupKind& gk, const KindSettings& s, const commit_record& rec,
                      bool counts_objects = false);

/// `workers` are the kind's workers (see worker); the controller links itself to them.
/// `inbox` is where the writer folds the commit records it wants (it attaches to it).
controller_impl::behavior_type controller(controller_impl::stateful_pointer<ControllerState> self,
                                          std::shared_ptr<KindEntry> kind, Services services,
                                          scheduler_impl scheduler, std::vector<caf::actor> workers,
                                          RecordInboxPtr inbox);

/// A worker of `kind`'s controller: answers `reconcile_atom, id` with the pass's Outcome.
caf::behavior worker(caf::event_based_actor* self, std::shared_ptr<KindEntry> kind,
                     Services services);

}  // namespace beehive::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::detail::Outcome)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::detail::BlockingRequeuePtr)
