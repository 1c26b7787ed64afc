// The store_writer actor (see store_writer.hpp): the CAF shell around the WriteEngine.
// Runs on its own (detached) thread, the only thread that runs the engine.

#include "actors/store_writer.hpp"

#include <sched.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>

#include <caf/attachable.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>
#include <caf/spawn_options.hpp>
#include <caf/system_messages.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/thread_name.hpp"
#include "store/request_checks.hpp"
#include "store/write_ops.hpp"

namespace beehive::detail {

StoreWriterState::~StoreWriterState() {
  if (closed || !cfg) return;
  // A crash. CAF 0.17 answers no promise an actor dies holding, so each is answered here,
  // as a request to the old handle is: stopped. Blocking writes are queued again instead.
  if (engine && engine->in_session()) cfg->crashed_sessions->add(engine->session());
  // Walked from a list of its own: what a job does cannot reach the one being walked.
  auto jobs = std::move(deferred);
  deferred.clear();
  for (auto& d : jobs) {
    try {
      if (d.shutdown) continue;  // not run from a dying actor: the root restarts it
      if (!d.write) {
        if (d.refuse) d.refuse();
      } else if (!d.write->reply->abandoned()) {
        cfg->queue->push(std::move(d.write));
      }
    } catch (...) {  // stopping meanwhile: the write fails as stopped
    }
  }
  for (auto& s : sweeps) s.rp.deliver(make_error(errc::stopped, "the store writer failed"));
}

namespace {

using Self = store_writer_impl::stateful_pointer<StoreWriterState>;

/// Sends a commit record on: to the subscribers that want it, and to the hub's inbox
/// while the hub has watches.
void publish(StoreWriterState& st, const commit_record& rec) {
  for (auto& s : st.subscribers)
    if (!s.wants || s.wants(rec)) {
      if (s.inbox)
        s.inbox->post(rec);
      else
        caf::anon_send(s.actor, rec);
    }
  if (st.hub) {
    // A read-modify-write: a full barrier between the commit and the read of the count
    // (a fence would do too, but ThreadSanitizer does not model fences). The inbox, not
    // the hub's mailbox: it holds one change per object however far the hub lags.
    if (st.cfg->hub_feed->watches.fetch_add(0) > 0) st.cfg->hub_feed->inbox.post(rec);
  }
}

/// Drops a subscriber (the application's from the list restarted writers start with).
/// Drops `a`'s subscriptions (only an application's with `app_only`). True when `a` was
/// an application subscriber: the writer monitored it.
bool forget_subscriber(StoreWriterState& st, const caf::actor_addr& a, bool app_only = false) {
  std::erase_if(st.subscribers, [&](const Subscriber& s) {
    return s.actor.address() == a && (s.app || !app_only);
  });
  std::lock_guard lk(st.cfg->app_subscribers->mu);
  return std::erase_if(st.cfg->app_subscribers->actors, [&](auto& s) { return s.address() == a; }) >
         0;
}

bool groupable(const StoreWriterState& st, const BlockingWrite& w);
void serve_batch(StoreWriterState& st, std::vector<BlockingWritePtr> batch);

/// Runs what waited for a session to end, until another session begins. Plain writes
/// that waited side by side are served as the queue serves them (group commits), not a
/// transaction each: a long block must not cost its waiters their grouping.
void run_deferred(StoreWriterState& st) {
  if (st.running_deferred) return;  // the loop below is already at it
  st.running_deferred = true;
  while (!st.engine->in_session() && !st.deferred.empty()) {
    std::vector<BlockingWritePtr> run;
    while (!st.closed && !st.deferred.empty() && st.deferred.front().write &&
           groupable(st, *st.deferred.front().write)) {
      run.push_back(std::move(st.deferred.front().write));
      st.deferred.pop_front();
    }
    if (!run.empty()) {
      serve_batch(st, std::move(run));
      continue;
    }
    auto job = std::move(st.deferred.front());
    st.deferred.pop_front();
    if (st.closed)
      job.refuse();
    else
      job.run();
  }
  st.running_deferred = false;
}

/// An exception's explanation without the code name that Error::what() appends.
std::string message_of(const std::exception& e) {
  if (auto* be = dynamic_cast<const Error*>(&e)) return be->message();
  return e.what();
}

// -- the blocking facade's writes -------------------------------------------------------

void serve_blocking(StoreWriterState& st, const BlockingWritePtr& w) {
  auto& eng = *st.engine;
  if (eng.in_session() && w->session != eng.session() && w->session == 0) {
    // Callers that keep giving up behind a long block must not pile up their requests.
    std::erase_if(st.deferred, [](const auto& d) { return d.abandoned && d.abandoned(); });
    st.deferred.push_back({[&st, w] { serve_blocking(st, w); },
                           [w] { w->reply->fail(errc::stopped, "beehive stopped"); },
                           [w] { return w->reply->abandoned(); }, w});
    return;
  }
  auto& reply = *w->reply;
  if (w->session != eng.session()) {
    if (w->session == eng.aborted_session())
      reply.fail(errc::stopped, "beehive stopped; the within block was rolled back");
    else if (st.cfg->crashed_sessions->contains(w->session))
      reply.fail(errc::store, "the store writer failed; the within block was rolled back");
    else
      reply.fail(errc::invalid_argument, "the within block this context belongs to has ended");
    return;
  }
  auto* cmd = std::get_if<SessionCmd>(&w->op);
  bool begins = cmd && cmd->kind == SessionCmd::begin;
  if ((!cmd || begins) && reply.abandoned()) {
    reply.fail(errc::cancelled, "the caller stopped waiting");
    return;
  }
  if (begins && st.stop_gave_up) {
    // Past stop's deadline no block begins: the writer's shutdown would wait behind it.
    reply.fail(errc::stopped, "beehive stopped");
    return;
  }
  try {
    if (auto* r = std::get_if<ReadOp>(&w->op)) {
      reply.deliver(eng.read(*r));
    } else if (begins) {
      // A caller that gave up while the session began (waiting for another process's
      // lock) will never end it: end it here, or the writer would serve nobody else.
      if (!reply.deliver(eng.session_step(cmd->kind, w.get()))) eng.abort_session(false);
    } else if (cmd) {
      reply.deliver(eng.session_step(cmd->kind));
    } else {
      auto result = eng.execute(w->op, w->check, w.get());
      st.cfg->queue->commit_took(eng.last_commit_took());
      reply.deliver(std::move(result));
    }
  } catch (const std::exception& e) {
    eng.note_session_failure(message_of(e));
    auto* be = dynamic_cast<const Error*>(&e);
    reply.fail(be ? be->value() : errc::store, message_of(e));
  }
  run_deferred(st);
}

/// A write that may join a group commit: a plain write outside any session.
bool groupable(const StoreWriterState& st, const BlockingWrite& w) {
  return !st.engine->in_session() && w.session == 0 && !std::holds_alternative<SessionCmd>(w.op) &&
         !std::holds_alternative<ReadOp>(w.op);
}

/// A bound on a group, should writes keep arriving faster than they are applied.
constexpr std::size_t max_group_size = 256;

/// Answers a committed group, callers that last ran on another CPU than this thread's
/// first. Waking an idle CPU takes longest (tens of microseconds in a VM): woken first,
/// those callers come back while this thread wakes the others, whose wake-up usually
/// runs them on this CPU at once, in its place.
template <class Reply>
void reply_group(const std::vector<BlockingWritePtr>& group, Reply reply) {
  const int here = sched_getcpu();
  for (std::size_t i = 0; i < group.size(); ++i)
    if (group[i]->cpu != here) reply(i);
  for (std::size_t i = 0; i < group.size(); ++i)
    if (group[i]->cpu == here) reply(i);
}

/// Commits `group` in one transaction (see WriteEngine::commit_group); writes that
/// arrive meanwhile join it while they are plain writes, anything else is left in
/// `rest`, in order. Replies only after the commit.
void commit_group(StoreWriterState& st, std::vector<BlockingWritePtr>& group,
                  std::vector<BlockingWritePtr>& rest) {
  auto& q = *st.cfg->queue;
  if (group.size() == 1 && q.last_group_size() < 2 && !q.maybe_nonempty()) {
    serve_blocking(st, group.front());  // a lone write: no savepoint, no waiting
    group.clear();
    return;
  }
  auto grouped_of = [](BlockingWrite& w) {
    return store::GroupedWrite{&w.op, w.check ? &w.check : nullptr, &w};
  };
  std::vector<store::GroupedWrite> writes;
  writes.reserve(group.size());
  for (auto& w : group) writes.push_back(grouped_of(*w));
  auto take_more = [&](std::vector<store::GroupedWrite>& out) {
    if (!rest.empty() || group.size() >= max_group_size) return;
    for (auto& more : q.take_latecomers(group.size(), st.engine->last_commit_took())) {
      if (rest.empty() && groupable(st, *more)) {
        out.push_back(grouped_of(*more));
        group.push_back(std::move(more));
      } else {
        rest.push_back(std::move(more));
      }
    }
  };
  // Callers writing at once are likely to write again as soon as they are answered:
  // the next transaction begins with this one's commit (serve_queue ends it, idle).
  if (group.size() >= 2) st.engine->writer().begin_ahead();
  st.engine->commit_group(writes, take_more);
  q.commit_took(st.engine->last_commit_took());
  q.group_committed(group.size());
  reply_group(group, [&](std::size_t i) {
    if (writes[i].reply)
      group[i]->reply->deliver(std::move(*writes[i].reply));
    else
      group[i]->reply->fail(writes[i].code, writes[i].what);
  });
  group.clear();
}

/// Serves one drain of the queue, in arrival order (what arrives while a group is
/// applied is served too).
void serve_batch(StoreWriterState& st, std::vector<BlockingWritePtr> batch) {
  std::vector<BlockingWritePtr> group;
  std::vector<BlockingWritePtr> rest;
  while (!batch.empty()) {
    for (auto& w : batch) {
      if (groupable(st, *w)) {
        group.push_back(std::move(w));
        continue;
      }
      if (!group.empty()) commit_group(st, group, rest);
      // What arrived during that group comes after this write.
      serve_blocking(st, w);
    }
    batch.clear();
    if (!group.empty()) commit_group(st, group, rest);
    batch.swap(rest);
  }
}

/// How long the writer serves the queue before it looks at its mailbox.
constexpr auto serve_slice = std::chrono::milliseconds(2);

/// Drains the queue until no write comes within the idle wait, then lets the writer
/// sleep (the next push wakes it). Every `serve_slice` it returns to its mailbox when a
/// message waits there (a stop's abort of a within block, a collection, another
/// process's commits): writes arriving back to back must not hold those up for ever.
void serve_queue(Self self) {
  auto& st = self->state;
  auto& q = *st.cfg->queue;
  // A transaction begun ahead (commit_group) holds the store's write lock: not kept
  // once no write is waiting.
  struct Idle {
    store::Writer& w;
    ~Idle() { w.idle(); }
  } idle{st.engine->writer()};
  auto slice_end = std::chrono::steady_clock::now() + serve_slice;
  for (;;) {
    if (auto now = std::chrono::steady_clock::now(); now >= slice_end) {
      slice_end = now + serve_slice;
      if (!self->mailbox().empty()) {
        // Still awake (the queue sends no wake meanwhile): this comes after what waits.
        self->send(self, serve_queue_atom::value);
        return;
      }
    }
    auto batch = q.take();
    if (!batch.empty()) {
      serve_batch(st, std::move(batch));
      continue;
    }
    if (q.wait_for_next_write(st.cfg->idle_wait)) continue;
    batch = q.take_or_idle();
    if (batch.empty()) return;
    serve_batch(st, std::move(batch));
  }
}

// -- the actor surface ----------------------------------------------------------------------

/// Answers an actor's request with `work`'s result or error: now, or after the open
/// session ends.
template <class Reply, class Work>
caf::typed_response_promise<Reply> answer(Self self, Work work) {
  auto& st = self->state;
  auto rp = self->template make_response_promise<Reply>();
  auto job = [work = std::move(work), rp]() mutable {
    try {
      rp.deliver(work());
    } catch (const Error& e) {
      rp.deliver(make_error(e.value(), e.message()));
    } catch (const std::exception& e) {
      rp.deliver(make_error(errc::store, e.what()));
    }
  };
  if (st.engine->in_session())
    st.deferred.push_back({std::move(job), [rp]() mutable {
                             rp.deliver(make_error(errc::stopped, "beehive stopped"));
                           }});
  else
    job();
  return rp;
}

void sweep_page(Self self);

/// A retention sweep (of event runs or of the change log): queued behind the sweeps
/// asked for before it.
caf::typed_response_promise<int> queue_sweep(Self self, StoreWriterState::SweepPolicy policy) {
  auto& st = self->state;
  auto rp = self->make_response_promise<int>();
  st.sweeps.push_back({std::move(policy), rp});
  if (st.sweeps.size() == 1) sweep_page(self);
  return rp;
}

template <class Request>
constexpr bool is_sweep = std::is_same_v<Request, trim_events_request> ||
                          std::is_same_v<Request, trim_change_log_request>;

/// What the application's requests get once stop began (see StoreWriterState::draining).
caf::error stopping() { return make_error(errc::stopped, "beehive stopped"); }

/// One handler per write request: checked and completed (canonical JSON, the kind's
/// schema versions) before it reaches the engine, outside any transaction.
template <class Request>
struct WriteHandler {
  Self self;
  caf::typed_response_promise<typename Request::reply_type> operator()(const Request& r) const {
    using Reply = typename Request::reply_type;
    auto& st = self->state;
    if constexpr (is_sweep<Request>) {
      try {
        return queue_sweep(self, store::prepare_request(r, st.cfg->schema_versions));
      } catch (const Error& e) {
        auto rp = self->make_response_promise<int>();
        rp.deliver(make_error(e.value(), e.message()));
        return rp;
      }
    } else {
      if (st.draining && !std::is_same_v<Request, collect_request>) {
        auto rp = self->template make_response_promise<Reply>();
        rp.deliver(stopping());
        return rp;
      }
      std::optional<Request> ready;
      std::optional<Error> refused;
      try {
        ready = store::prepare_request(r, st.cfg->schema_versions);
      } catch (const Error& e) {
        refused = e;
      } catch (const std::exception& e) {
        refused = Error(errc::store, e.what());
      }
      return answer<Reply>(self, [&st, ready = std::move(ready), refused]() -> Reply {
        if (refused) throw *refused;
        return store::take_reply<Reply>(st.engine->execute(WriteOp{*ready}, {}));
      });
    }
  }
};

/// Ends the sweeps asked for with `err` (the writer is going).
void refuse_sweeps(StoreWriterState& st, const caf::error& err) {
  for (auto& s : std::exchange(st.sweeps, {})) s.rp.deliver(err);
}

/// Runs the next page of the first sweep asked for (after the open session, if one is),
/// and asks for the page after it behind what came meanwhile.
void sweep_page(Self self) {
  auto& st = self->state;
  if (st.sweeps.empty()) return;
  if (st.engine->in_session()) {
    st.deferred.push_back(
        {[self] { sweep_page(self); },
         [&st] { refuse_sweeps(st, make_error(errc::stopped, "beehive stopped")); }});
    return;
  }
  auto& s = st.sweeps.front();
  try {
    bool more = std::visit(
        [&](const auto& policy) {
          int n = store::take_reply<int>(st.engine->execute(WriteOp{policy}, {}));
          s.removed += n;
          if constexpr (std::is_same_v<std::decay_t<decltype(policy)>, trim_events_request>)
            return st.engine->sweeping(policy);
          else  // a full page: there may be more
            return n >= store::change_log_trim_page.load(std::memory_order_relaxed);
        },
        s.policy);
    if (more) {
      self->send(self, sweep_page_atom::value);
      return;
    }
    s.rp.deliver(s.removed);
  } catch (const Error& e) {
    s.rp.deliver(make_error(e.value(), e.message()));
  } catch (const std::exception& e) {
    s.rp.deliver(make_error(errc::store, e.what()));
  }
  st.sweeps.pop_front();
  if (!st.sweeps.empty()) self->send(self, sweep_page_atom::value);
}

/// One handler per read request: handed to the store_reader. A read that arrives while a
/// within block is open waits for the block to end, so that it sees the block's outcome.
template <class Request>
struct ReadHandler {
  Self self;
  caf::result<typename Request::reply_type> operator()(const Request& r) const {
    auto& st = self->state;
    if (st.draining) return stopping();
    if (!st.engine->in_session()) return self->delegate(st.reader, r);
    auto rp = self->template make_response_promise<typename Request::reply_type>();
    // Handed on, so that the reader answers even if this actor ends first.
    st.deferred.push_back(
        {[self = self, rp, r]() mutable { rp.delegate(self->state.reader, r); },
         [rp]() mutable { rp.deliver(make_error(errc::stopped, "beehive stopped")); }});
    return rp;
  }
};

/// A transaction_request: every write checked first, then all in one transaction.
transaction_reply execute_transaction(StoreWriterState& st, const transaction_request& t) {
  std::vector<WriteOp> ops;
  ops.reserve(t.writes.size());
  for (std::size_t i = 0; i < t.writes.size(); ++i) {
    try {
      std::visit(
          [&](const auto& r) {
            ops.emplace_back(store::prepare_request(r, st.cfg->schema_versions));
          },
          t.writes[i]);
    } catch (const Error& e) {
      throw Error(e.value(), "write " + std::to_string(i) + ": " + e.message());
    }
  }
  auto replies = st.engine->execute_all(ops);
  transaction_reply out;
  out.replies.reserve(replies.size());
  for (std::size_t i = 0; i < replies.size(); ++i)
    std::visit(
        [&](const auto& r) {
          using Reply = typename std::decay_t<decltype(r)>::reply_type;
          out.replies.emplace_back(store::take_reply<Reply>(std::move(replies[i])));
        },
        t.writes[i]);
  return out;
}

template <class... Writes, class... Reads, class... Rest>
store_writer_impl::behavior_type behavior(Self self, type_list<Writes...>, type_list<Reads...>,
                                          Rest... rest) {
  return {WriteHandler<Writes>{self}..., ReadHandler<Reads>{self}..., std::move(rest)...};
}

}  // namespace

store_writer_impl::behavior_type store_writer(Self self, std::shared_ptr<StoreWriterConfig> cfg) {
  name_this_thread("bh.writer");
  auto& st = self->state;
  st.subscribers = std::move(cfg->subscribers);
  st.hub = std::move(cfg->hub);
  st.cfg = std::move(cfg);
  for (auto& s : st.subscribers) self->monitor(s.actor);
  {  // the application's subscribers, from a writer this one replaces
    std::lock_guard lk(st.cfg->app_subscribers->mu);
    for (auto& a : st.cfg->app_subscribers->actors) {
      st.subscribers.push_back({a, {}, true});
      self->monitor(a);
    }
  }
  // A subscriber that terminates is dropped (it would be sent every commit for ever),
  // beehive's own included: a crashed controller, gc or event log is not retired.
  self->set_down_handler([self](caf::down_msg& m) { forget_subscriber(self->state, m.source); });
  store::WriteEngineConfig ecfg;
  ecfg.writer = std::move(st.cfg->writer);
  ecfg.clock = st.cfg->clock;
  ecfg.metrics = st.cfg->metrics;
  ecfg.max_object_bytes = st.cfg->max_object_bytes;
  ecfg.watch_foreign_commits = st.cfg->foreign_poll.count() > 0;
  ecfg.publish = [&st](const commit_record& rec) { publish(st, rec); };
  ecfg.cursor = st.cfg->foreign_cursor;
  ecfg.schema_versions = st.cfg->schema_versions;
  st.engine = std::make_unique<store::WriteEngine>(std::move(ecfg));
  // Reads run on a reader thread of their own; it ends with the writer, however the
  // writer ends, and a reader that fails takes the writer with it (the supervisor then
  // restarts both).
  st.reader = self->spawn<caf::detached + caf::linked>(store_reader, st.cfg->backend);
  self->attach_functor([reader = st.reader](const caf::error&) {
    caf::anon_send_exit(reader, caf::exit_reason::user_shutdown);
  });
  if (st.cfg->foreign_poll.count() > 0) {
    self->delayed_send(self, st.cfg->foreign_poll, poll_foreign_atom::value);
    // A store that hears of other processes' commits (PostgreSQL's notifications) has
    // them published at once; the poll catches one heard while the writer was busy.
    st.cfg->backend->on_foreign_commit(
        [h = caf::actor_cast<caf::actor>(self)] { caf::anon_send(h, foreign_commit_atom::value); });
    self->attach_functor(
        [backend = st.cfg->backend](const caf::error&) { backend->on_foreign_commit({}); });
  }
  using maintenance_and_writes =
      typename beehive::detail::concat<write_request_types, maintenance_request_types>::type;
  return behavior(
      self, maintenance_and_writes{}, read_request_types{},
      [self](transaction_request& t) -> caf::result<transaction_reply> {
        if (self->state.draining) return stopping();
        // Moved, not copied: copying every write costs, and a copy recurses over each
        // JSON detail before anything checked its depth.
        return answer<transaction_reply>(
            self, [&st = self->state, t = std::move(t)] { return execute_transaction(st, t); });
      },
      [self](inspect_atom) {
        auto& s = self->state;
        return store_writer_state{s.engine->transactions(), s.engine->session(), s.deferred.size(),
                                  s.subscribers.size() + (s.hub ? 1 : 0)};
      },
      [self](subscribe_atom, const caf::actor& a) {
        auto& st = self->state;
        if (!a) return;
        {
          std::lock_guard lk(st.cfg->app_subscribers->mu);
          auto& all = st.cfg->app_subscribers->actors;
          if (std::find(all.begin(), all.end(), a) != all.end()) return;  // once is enough
          all.push_back(a);
        }
        st.subscribers.push_back({a, {}, true});
        self->monitor(a);
      },
      [self](subscribe_atom, const caf::actor& a, const RecordFilter& wants) {
        self->state.subscribers.push_back({a, wants});
        self->monitor(a);  // a crashed one's successor subscribes anew
      },
      [self](subscribe_atom, const caf::actor& a, const RecordFilter& wants,
             const RecordInboxPtr& inbox) {
        self->state.subscribers.push_back({a, wants, false, inbox});
        self->monitor(a);
      },
      // An application ends its own subscription only: a controller's handle sent here
      // by mistake must not stop that controller's wakes.
      [self](unsubscribe_atom, const caf::actor& a) {
        // Demonitored too: an actor subscribing again and again keeps one monitor.
        if (forget_subscriber(self->state, a.address(), true)) self->demonitor(a.address());
      },
      [&st](retire_atom, const caf::actor& a) { forget_subscriber(st, a.address()); },
      [&st](hub_atom, const caf::actor& hub) { st.hub = hub; },
      [&st](drain_atom) { st.draining = true; }, [self](serve_queue_atom) { serve_queue(self); },
      [self](sweep_page_atom) { sweep_page(self); },
      [self](foreign_commit_atom) {
        try {
          self->state.engine->publish_noted_commits();
        } catch (const std::exception&) {  // the next poll tries again
        }
      },
      [self](poll_foreign_atom) {
        auto& st = self->state;
        try {
          st.engine->publish_noted_commits();  // what a failed read left
          st.engine->publish_foreign_commits();
        } catch (const std::exception&) {  // a failed read: the next poll tries again
        }
        self->delayed_send(self, st.cfg->foreign_poll, poll_foreign_atom::value);
      },
      [self](settle_atom) {
        auto& st = self->state;
        // Other processes' commits (a tool, another beehive on the file) are looked for
        // now, not at the next poll: what they wake is work a settle waits for.
        if (st.cfg->foreign_poll.count() > 0) {
          try {
            st.engine->publish_noted_commits();
            st.engine->publish_foreign_commits();
          } catch (const std::exception&) {  // the next poll tries again
          }
        }
        return st.engine->transactions();
      },
      [self](abort_session_atom) -> caf::result<bool> {
        auto& st = self->state;
        st.stop_gave_up = true;
        if (!st.engine->in_session()) return false;  // none open, or it ended first
        st.engine->abort_session(true);
        // Answered before what waited for the block runs: the shutdown among it quits.
        auto rp = self->make_response_promise<bool>();
        rp.deliver(true);
        run_deferred(st);
        return rp;
      },
      [self](shutdown_atom) {
        // After the last commit: subscribers learn that nothing more will come.
        auto quit = [self] {
          auto& st = self->state;
          // Serve what callers queued before the shutdown; refuse the rest (and what
          // was deferred behind the session after this).
          st.closed = true;
          serve_batch(st, st.cfg->queue->close());
          st.engine->writer().idle();
          for (auto& s : st.subscribers) {
            if (s.app)
              caf::anon_send(s.actor, watch_ended{0});
            else
              caf::anon_send(s.actor, shutdown_atom::value);
          }
          if (st.hub) caf::anon_send(st.hub, shutdown_atom::value);
          refuse_sweeps(st, make_error(errc::stopped, "beehive stopped"));
          self->quit();
        };
        if (self->state.engine->in_session())
          self->state.deferred.push_back({quit, quit, {}, {}, true});
        else
          quit();
      });
}

}  // namespace beehive::detail
