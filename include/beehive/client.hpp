#pragma once

/// `Client<Spec, Status>`: the application's typed handle on one kind of object. It
/// creates, reads, updates and removes objects and never writes status (only the kind's
/// controller does). Ids are kind-scoped: another kind's id is `errc::not_found`; the
/// exceptions are the lazy relation lookups and the event reads (list_events,
/// get_latest_event, watch_events), which take any object's id and read a missing one
/// as empty.
///
/// Every write is atomic and decodes the written row back into `Spec` / `Status`
/// inside its transaction, so an error means nothing was committed. Re-applying the
/// stored spec writes nothing at all (no generation or resource_version bump).
///
/// Reads run on the calling thread against a read-only connection and never wait for
/// writers. Cheap to copy; thread-safe.
///
/// Spec and Status are any types nlohmann/json converts both ways; an empty struct is
/// stored as `{}` without a converter.

#include <concepts>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <beehive/change.hpp>
#include <beehive/context.hpp>
#include <beehive/detail/client_core.hpp>
#include <beehive/detail/codec.hpp>
#include <beehive/errors.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/object.hpp>
#include <beehive/options.hpp>
#include <beehive/page.hpp>
#include <beehive/stream.hpp>

namespace beehive {

class Beehive;

template <class Spec, class Status>
class Client {
  static_assert(detail::Storable<Spec>,
                "Spec must convert to and from nlohmann::json, or be an empty struct");
  static_assert(detail::Storable<Status>,
                "Status must convert to and from nlohmann::json, or be an empty struct");

 public:
  using ObjectType = Object<Spec, Status>;

  Client(const Beehive& bh, GroupKind gk) : core_(bh, std::move(gk)) {}

  const GroupKind& group_kind() const { return core_.group_kind(); }

  /// Creates an object. Options: with_slug (`already_exists` when the kind holds it,
  /// a deletion-pending row included), with_finalizers, with_owner (the owner must
  /// exist: `not_found` otherwise, nothing written; deleting the owner deletes this
  /// object too), with_labels, with_on_create.
  template <class... Opts>
  ObjectType create(const Context& ctx, const Spec& spec, Opts&&... opts) const {
    auto text = detail::encode(spec);
    // The new row holds these bytes at the current schema version: decoding them here,
    // before the write, refuses a spec that does not round-trip without writing
    // anything, and keeps the decoding off the writer's thread.
    ObjectType out;
    out.spec = detail::decode<Spec>(text);
    auto row = core_.create(ctx, std::move(text), {Option(std::forward<Opts>(opts))...});
    static_cast<ObjectMeta&>(out) = std::move(row.meta);
    return out;
  }

  /// Updates the object holding `slug`, or creates it; atomic under concurrency. The
  /// create options (with_finalizers, with_owner, with_labels, with_on_create) apply only when it
  /// creates; an update leaves finalizers and owner as they are. with_slug here is
  /// `conflicting_option`, as is with_resource_version (it writes over whatever is stored:
  /// for a precondition, get the object and `update` it). An object being deleted is
  /// updated, and still goes once its finalizers do: see its `deletion_requested_at`.
  template <class... Opts>
  ObjectType create_or_update(const Context& ctx, std::string_view slug, const Spec& spec,
                              Opts&&... opts) const {
    auto text = detail::encode(spec);
    // The stored spec will be these bytes (see create): decoded here, off the writer's
    // thread; only the stored status is decoded inside the transaction.
    auto typed = detail::decode<Spec>(text);
    StoredStatus status;
    auto row = core_.create_or_update(ctx, slug, std::move(text), status.check(core_.migrator()),
                                      {Option(std::forward<Opts>(opts))...});
    return status.object(std::move(row), std::move(typed), core_.migrator());
  }

  /// Returns the object holding `slug` untouched (second: false), or creates it with
  /// the options (second: true); atomic under concurrency. with_slug here is
  /// `conflicting_option`.
  template <class... Opts>
  std::pair<ObjectType, bool> get_or_create(const Context& ctx, std::string_view slug,
                                            const Spec& spec, Opts&&... opts) const {
    auto text = detail::encode(spec);
    // A new row holds these bytes (see create); an existing one is returned untouched,
    // nothing written, so its decoding needs no transaction: both happen on this thread.
    auto typed = detail::decode<Spec>(text);
    auto [row, created] =
        core_.get_or_create(ctx, slug, std::move(text), {Option(std::forward<Opts>(opts))...}, {});
    if (!created)
      return {detail::decode_object<Spec, Status>(std::move(row), core_.migrator()), false};
    ObjectType out;
    out.spec = std::move(typed);
    static_cast<ObjectMeta&>(out) = std::move(row.meta);
    return {std::move(out), true};
  }

  /// Replaces the spec; generation moves only when the spec really changes. With
  /// with_resource_version(rv), only if the object is still at `rv` (`conflict`
  /// otherwise, nothing written).
  template <class... Opts>
  ObjectType update(const Context& ctx, ObjectID id, const Spec& spec, Opts&&... opts) const {
    auto text = detail::encode(spec);
    auto typed = detail::decode<Spec>(text);  // as in create_or_update
    StoredStatus status;
    auto row = core_.update(ctx, id, std::move(text), status.check(core_.migrator()),
                            {Option(std::forward<Opts>(opts))...});
    return status.object(std::move(row), std::move(typed), core_.migrator());
  }

  /// Replaces the object's labels (with_labels' rules: `invalid_argument` otherwise).
  /// Moves the resource version, not the generation, and reaches watches; the same
  /// labels write nothing. Takes with_resource_version as update does.
  template <class... Opts>
  ObjectType set_labels(const Context& ctx, ObjectID id, Labels labels, Opts&&... opts) const {
    // The object is decoded inside the transaction: a row this build cannot read rolls
    // the write back (an error means nothing was written, as for every write).
    auto decoded = std::make_shared<std::optional<ObjectType>>();
    auto row = core_.set_labels(ctx, id, std::move(labels),
                                [decoded, m = core_.migrator()](const ObjectRow& r) {
                                  decoded->emplace(detail::decode_object<Spec, Status>(r, m));
                                },
                                {Option(std::forward<Opts>(opts))...});
    if (*decoded) return std::move(**decoded);
    return detail::decode_object<Spec, Status>(std::move(row), core_.migrator());
  }

  /// `loads`: LoadOptions only (a selector or a resume position does not apply to one
  /// object, and is refused at compile time rather than ignored); so for get_by_slug and
  /// list_owned_objects.
  template <class... Loads>
  requires(std::same_as<Loads, LoadOption>&&...) ObjectType
      get(const Context& ctx, ObjectID id, const Loads&... loads)
  const {
    return detail::decode_object<Spec, Status>(core_.get(ctx, id, detail::load_bits(loads...)),
                                               core_.migrator());
  }

  template <class... Loads>
  requires(std::same_as<Loads, LoadOption>&&...) ObjectType
      get_by_slug(const Context& ctx, std::string_view slug, const Loads&... loads)
  const {
    return detail::decode_object<Spec, Status>(
        core_.get_by_slug(ctx, slug, detail::load_bits(loads...)), core_.migrator());
  }

  /// Every object of the kind, by id; with with_selector, those whose labels match. A
  /// row that does not decode is skipped and logged. Options: LoadOptions and
  /// with_selector (with_resume_from is a watch's: `invalid_argument`).
  template <class... Opts>
  std::vector<ObjectType> list(const Context& ctx, const Opts&... opts) const {
    auto bits = detail::load_bits(opts...);
    auto read = detail::read_settings(opts...);
    detail::check_list_read(read);
    if (read.selector) return decode_all(core_.list_page(ctx, 0, {}, bits, read).rows);
    std::vector<ObjectType> out;
    auto* m = core_.migrator();
    if (core_.list_each(ctx, bits, [&](ObjectRow&& row) { decode_into(out, std::move(row), m); }))
      return out;
    return decode_all(core_.list(ctx, bits));
  }

  /// At most `limit` objects of the kind (0: no limit) with ids above the page that
  /// `continue_token` ends (empty: the first page), by id, filtered by with_selector.
  /// Objects created between pages appear on a later page if their id is higher; none
  /// is returned twice. A token is for the list that returned it: a malformed one, or
  /// one from another kind's list or given with another selector (texts that parse to
  /// the same selector share tokens), is `invalid_argument`. Loads as for list.
  template <class... Opts>
  Page<Spec, Status> list_page(const Context& ctx, std::size_t limit,
                               std::string_view continue_token, const Opts&... opts) const {
    auto read = detail::read_settings(opts...);
    detail::check_list_read(read);
    auto page = core_.list_page(ctx, limit, continue_token, detail::load_bits(opts...), read);
    return {decode_all(std::move(page.rows)), std::move(page.continue_token)};
  }

  /// This kind's objects owned by `owner`, decoded, by id (deletion-pending ones
  /// included), in one query; loads as for list.
  template <class... Loads>
  requires(std::same_as<Loads, LoadOption>&&...) std::vector<ObjectType> list_owned_objects(
      const Context& ctx, ObjectID owner, const Loads&... loads)
  const { return decode_all(core_.list_owned_objects(ctx, owner, detail::load_bits(loads...))); }

  // Lazy relation lookups: not kind-scoped (any object's edges), a missing id reads
  // empty. Meant for ids the caller owns.

  std::optional<Ref> get_owner(const Context& ctx, ObjectID id) const {
    auto refs = core_.related(ctx, id, LoadOption::owner);
    return refs.empty() ? std::nullopt : std::optional<Ref>(refs.front());
  }
  std::vector<Ref> list_dependencies(const Context& ctx, ObjectID id) const {
    return core_.related(ctx, id, LoadOption::dependencies);
  }
  std::vector<Ref> list_dependents(const Context& ctx, ObjectID id) const {
    return core_.related(ctx, id, LoadOption::dependents);
  }
  std::vector<Ref> list_owned(const Context& ctx, ObjectID id) const {
    return core_.related(ctx, id, LoadOption::owned);
  }

  /// Requests deletion (a soft delete: deletion_requested_at is set, the object stays
  /// until its finalizers are removed, then the collector removes it). Repeating it while
  /// the object stays is a no-op; once it is removed, `not_found`. Takes
  /// with_resource_version as update does.
  template <class... Opts>
  void remove(const Context& ctx, ObjectID id, Opts&&... opts) const {
    core_.remove(ctx, id, {Option(std::forward<Opts>(opts))...});
  }

  /// Requests deletion of the object holding `slug`; absent or already deleting is a
  /// successful no-op.
  void remove_by_slug(const Context& ctx, std::string_view slug) const {
    core_.remove_by_slug(ctx, slug);
  }

  /// Watches one object: its current state as `Added` (nothing if it does not exist
  /// yet; its creation then arrives as `Added`), then every change committed after
  /// that snapshot — everything committed once `watch` has returned included. A soft
  /// delete is `Modified`; the physical removal `Deleted`, with the final body.
  /// Conflated: a slow reader gets each object's latest state. The stream ends with its
  /// context, on close, or with `errc::stopped` when the beehive stops. With
  /// with_resume_from(rv): no snapshot, the changes above `rv`, then live (`rv` 0, the
  /// position of a stream whose snapshot was not all delivered, is watch_too_old: list
  /// afresh). A change whose
  /// row this build cannot decode (a newer schema version, say) is logged and skipped,
  /// and the stream's resource_version() stays below it, so that a resume (by a build
  /// that reads it) replays it (held at 0, below the store's first row, the resume is
  /// watch_too_old: the listing afresh has it); a removal is delivered all the same, its
  /// metadata alone
  /// (default spec, no status). Options: ReadOptions only (a change carries no
  /// relations: a LoadOption is refused at compile time rather than ignored).
  template <class... Opts>
  requires(std::same_as<Opts, ReadOption>&&...) Stream<Change<Spec, Status>> watch(
      const Context& ctx, ObjectID id, const Opts&... opts)
  const { return typed(core_.watch(ctx, id, detail::read_settings(opts...))); }

  /// Watches the whole kind, as `watch` does one object; with with_selector, the objects
  /// that match (one that starts matching arrives as `Added`, one that stops as
  /// `Deleted`).
  template <class... Opts>
  requires(std::same_as<Opts, ReadOption>&&...) Stream<Change<Spec, Status>> watch_list(
      const Context& ctx, const Opts&... opts)
  const { return typed(core_.watch(ctx, std::nullopt, detail::read_settings(opts...))); }

  /// The object's event runs, newest first (the run begun or extended last comes first,
  /// whatever the clock did to last_at), filtered by
  /// with_event_category / _type / _reason / with_events_since and capped by
  /// with_event_limit. Not kind-scoped: any object's id; a missing one reads empty.
  template <class... Opts>
  std::vector<Event> list_events(const Context& ctx, ObjectID id, const Opts&... opts) const {
    return core_.list_events(ctx, id, query(opts...));
  }

  /// The current run of one category (the one record_event extends: started last,
  /// whatever the clock did to the runs' times), or nullopt before its first event.
  std::optional<Event> get_latest_event(const Context& ctx, ObjectID id,
                                        std::string_view category) const {
    return core_.current_run(ctx, id, category);
  }

  /// The runs list_events would return, oldest first, then every new run and extension
  /// that passes the filters, conflated per run (a slow reader sees a run's latest
  /// count): snapshot and live runs read as one chronological stream. with_event_limit
  /// caps the snapshot to the newest n runs. Same ending rules as watch; besides, once
  /// the object is removed (its runs with it) the stream delivers what is pending and
  /// ends with `not_found`. A missing object's stream stays open, empty (it may be
  /// about to be created).
  template <class... Opts>
  Stream<Event> watch_events(const Context& ctx, ObjectID id, const Opts&... opts) const {
    std::function<std::optional<Event>(event_run &&)> strip = [](event_run&& r) {
      return std::optional<Event>(std::move(r.event));
    };
    return Stream<Event>(core_.watch_events(ctx, id, query(opts...)), std::move(strip));
  }

  /// The object's schedule now, then every reschedule (backoff step, requeue_after,
  /// queued, dispatched, requeue), conflated. `no_controller` for a kind without a
  /// controller; an id nothing schedules streams the epoch.
  Stream<Schedule> watch_schedule(const Context& ctx, ObjectID id) const {
    return Stream<Schedule>(core_.watch_schedule(ctx, id));
  }

  /// Reconciles the object soon: a latency hint, returning once it is queued (its
  /// schedule then reads now, unless a worker took it already). Keeps the retry backoff
  /// unless with_reset_backoff() is given. not_found for a missing or another kind's id;
  /// no_controller for a kind without a controller; cancelled or deadline_exceeded when
  /// `ctx` ends before the object is queued (it is then left as it was). On a standby
  /// (another process leads, see Beehive::is_leader) or a beehive not started, the
  /// requeue is recorded in the store and the controller of whichever process leads
  /// reconciles the object (resetting its backoff only with with_reset_backoff()); the
  /// call returns once that is committed. Inside a `within` block it is sent after the
  /// block's outermost commit (never after a rollback).
  template <class... Opts>
  void requeue(const Context& ctx, ObjectID id, const Opts&... opts) const {
    detail::RequeueSettings s;
    (opts.apply(s), ...);
    core_.requeue(ctx, id, s.reset_backoff);
  }

  /// When the object is next due to reconcile (a pending backoff retry or
  /// requeue_after, or now when queued); the epoch when nothing is scheduled, for an
  /// unknown id, or for a kind without a controller. Never blocks, never throws.
  Schedule get_schedule(const Context& ctx, ObjectID id) const {
    (void)ctx;
    return core_.get_schedule(id);
  }

 private:
  template <class... Opts>
  static detail::EventQuery query(const Opts&... opts) {
    detail::EventQuery q;
    (opts.apply(q), ...);
    return q;
  }

  std::vector<ObjectType> decode_all(std::vector<ObjectRow> rows) const {
    std::vector<ObjectType> out;
    out.reserve(rows.size());
    auto* m = core_.migrator();
    for (auto& row : rows) decode_into(out, std::move(row), m);
    return out;
  }

  /// A row that does not decode is skipped and logged.
  void decode_into(std::vector<ObjectType>& out, ObjectRow&& row, const Migrator* m) const {
    try {
      out.push_back(detail::decode_object<Spec, Status>(std::move(row), m));
    } catch (const Error& e) {
      core_.report_skipped(row, e);
    }
  }

  Stream<Change<Spec, Status>> typed(std::shared_ptr<detail::StreamCore<object_change>> c) const {
    using Out = std::optional<Change<Spec, Status>>;
    std::function<Out(object_change &&)> convert = [core = core_, c](object_change&& ch) -> Out {
      try {
        Change<Spec, Status> out{ch.type,
                                 detail::decode_object<Spec, Status>(ch.row, core.migrator())};
        c->lift_hold(ch.row.meta.id);
        return out;
      } catch (const Error& e) {
        // Skipped, the watch going on; a removal comes with its metadata alone.
        if (!core.undecodable_change(*c, ch, e)) return std::nullopt;
        c->lift_hold(ch.row.meta.id);
        Object<Spec, Status> gone;
        static_cast<ObjectMeta&>(gone) = std::move(ch.row.meta);
        return Change<Spec, Status>{ch.type, std::move(gone)};
      }
    };
    return Stream<Change<Spec, Status>>(std::move(c), std::move(convert));
  }

  // The stored status of a spec write, decoded inside the transaction: a status this
  // build cannot read (a newer schema version, a migrator or from_json that throws) rolls
  // the write back, as the write never happened. The caller then does not decode it again.
  class StoredStatus {
   public:
    detail::RowCheck check(const Migrator* m) {
      return [slot = slot_, m](const ObjectRow& row) {
        if (row.status)
          slot->emplace(std::in_place, detail::from_json_value<Status>(detail::load_blob(
                                           *row.status, row.status_version, m, false)));
        else
          slot->emplace(std::nullopt);
      };
    }
    /// The written object: its metadata from `row`, its spec the caller's.
    ObjectType object(ObjectRow row, Spec spec, const Migrator* m) {
      ObjectType out;
      out.spec = std::move(spec);
      if (*slot_)
        out.status = std::move(**slot_);
      else if (row.status)  // not checked (it always is): decode it here
        out.status = detail::from_json_value<Status>(
            detail::load_blob(*row.status, row.status_version, m, false));
      static_cast<ObjectMeta&>(out) = std::move(row.meta);
      return out;
    }

   private:
    std::shared_ptr<std::optional<std::optional<Status>>> slot_ =
        std::make_shared<std::optional<std::optional<Status>>>();
  };

  detail::ClientCore core_;
};

}  // namespace beehive
