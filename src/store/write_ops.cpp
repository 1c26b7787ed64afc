#include "store/write_ops.hpp"

#include "store/age_cutoff.hpp"
#include "store/label_selector.hpp"
#include "store/object_limits.hpp"

#include <algorithm>
#include <limits>

#include <beehive/detail/codec.hpp>
#include <beehive/errors.hpp>
#include <beehive/options.hpp>

namespace beehive::store {

ObjectRow WriteOps::reread(ObjectID id) {
  auto row = w_.get(id);
  if (!row) throw Error(errc::store, "row vanished inside its own transaction");
  return std::move(*row);
}

ObjectRow WriteOps::changed(ObjectID id, unsigned parts) {
  auto row = reread(id);
  bool created = parts & object_change::created;
  record({created ? ChangeType::Added : ChangeType::Modified, row, parts}, owner_of(id));
  return row;
}

std::optional<Ref> WriteOps::owner_of(ObjectID id) {
  auto refs = w_.related(id, LoadOption::owner);
  if (refs.empty()) return std::nullopt;
  return std::move(refs.front());
}

namespace {
/// conflict unless the row is at the version the caller read (when it gave one).
void require_version(const ObjectRow& row, std::optional<std::int64_t> expected) {
  if (expected && *expected != row.meta.resource_version)
    throw Error(errc::conflict, "object " + std::to_string(row.meta.id) +
                                    " is at resource version " +
                                    std::to_string(row.meta.resource_version) + ", not " +
                                    std::to_string(*expected));
}
}  // namespace

void WriteOps::record(object_change c, std::optional<Ref> owner) {
  w_.log_change(c.row.meta.resource_version, c.row.meta, c.parts, now_,
                c.type == ChangeType::Deleted ? &c.row : nullptr);
  c.owner = std::move(owner);
  rec_.changes.push_back(std::move(c));
}

ObjectRow WriteOps::require_own(const GroupKind& gk, ObjectID id) {
  auto row = w_.get(id);
  if (!row) throw Error(errc::not_found, "no object with id " + std::to_string(id));
  if (row->meta.group != gk.group || row->meta.kind != gk.kind)
    throw Error(errc::wrong_kind, "object " + std::to_string(id) + " is a " +
                                      to_string(row->meta.group_kind()) + ", not a " +
                                      to_string(gk));
  return std::move(*row);
}

ObjectRow WriteOps::require(const GroupKind& gk, ObjectID id) {
  auto row = w_.get(id);
  if (!row || row->meta.group != gk.group || row->meta.kind != gk.kind)
    throw Error(errc::not_found, "no " + to_string(gk) + " with id " + std::to_string(id));
  return std::move(*row);
}

ObjectRow WriteOps::create(const GroupKind& gk, const std::string& spec,
                           const std::optional<std::string>& slug,
                           const std::vector<std::string>& finalizers,
                           std::optional<ObjectID> owner, int spec_version, const Labels& labels) {
  if (!labels.empty()) validate_labels(labels);
  if (slug && !slugs_by_constraint_ && w_.get_by_slug(gk, *slug))
    throw Error(errc::already_exists, to_string(gk) + " slug \"" + *slug + "\" is taken");
  std::optional<bool> owner_leaving;
  if (owner && !(owner_leaving = w_.being_deleted(*owner)))
    throw Error(errc::not_found, "owner " + std::to_string(*owner) + " does not exist");
  // The row as the INSERT will leave it: checked before, never read back.
  ObjectRow row;
  row.meta.id = w_.next_object_id();
  row.meta.group = gk.group;
  row.meta.kind = gk.kind;
  row.meta.slug = slug;
  row.meta.generation = 1;
  row.meta.resource_version = w_.next_resource_version();
  row.meta.finalizers = finalizers;
  row.meta.labels = labels;
  row.meta.created_at = row.meta.updated_at = from_millis(to_millis(now_));  // stored in ms
  row.spec = spec;
  row.spec_version = spec_version;
  if (check_) {
    (*check_)(row);
    checked_ = true;
  }
  w_.insert_object(row, owner);
  record({ChangeType::Added, row, object_change::created},
         owner ? owner_of(row.meta.id) : std::nullopt);
  // The cascade has passed its owner already: the child goes the same way at once.
  if (owner_leaving.value_or(false)) return mark_deleted(row);
  return row;
}

namespace {
void refuse_downgrade(const char* what, int stored, int writing) {
  if (stored > writing)
    throw Error(errc::schema_version_downgrade,
                std::string(what) + " stored at schema version " + std::to_string(stored) +
                    " cannot be overwritten at version " + std::to_string(writing));
}
}  // namespace

ObjectRow WriteOps::update_row(const ObjectRow& row, const std::string& spec, int spec_version) {
  refuse_downgrade("spec", row.spec_version, spec_version);
  // Re-applying the stored bytes is no write at all: no generation, no version, no wake.
  // The same bytes at a newer schema version re-stamp the blob. (A Client outside
  // `within` writes nothing when the older blob converts to the bytes it writes: see
  // already_stored in client_core.cpp.)
  if (row.spec == spec && row.spec_version == spec_version) return row;
  ObjectRow out = row;  // as the UPDATE leaves it: no need to read it back
  out.spec = spec;
  out.spec_version = spec_version;
  out.meta.generation = row.meta.generation + 1;
  out.meta.resource_version = w_.next_resource_version();
  out.meta.updated_at = from_millis(to_millis(now_));  // stored in milliseconds
  w_.update_spec(out.meta.id, spec, spec_version, out.meta.generation, out.meta.resource_version,
                 now_);
  record({ChangeType::Modified, out, object_change::spec}, owner_of(out.meta.id));
  return out;
}

ObjectRow WriteOps::update(const GroupKind& gk, ObjectID id, const std::string& spec,
                           int spec_version, std::optional<std::int64_t> expected) {
  auto row = require(gk, id);
  require_version(row, expected);
  return update_row(row, spec, spec_version);
}

ObjectRow WriteOps::create_or_update(const GroupKind& gk, const std::string& slug,
                                     const std::string& spec, int spec_version,
                                     const std::vector<std::string>& finalizers,
                                     std::optional<ObjectID> owner, const Labels& labels) {
  if (!labels.empty()) validate_labels(labels);  // refused whether it creates or not
  if (auto row = w_.get_by_slug(gk, slug)) return update_row(*row, spec, spec_version);
  return create(gk, spec, slug, finalizers, owner, spec_version, labels);
}

std::pair<ObjectRow, bool> WriteOps::get_or_create(const GroupKind& gk, const std::string& slug,
                                                   const std::string& spec,
                                                   const std::vector<std::string>& finalizers,
                                                   std::optional<ObjectID> owner, int spec_version,
                                                   const Labels& labels) {
  if (!labels.empty()) validate_labels(labels);  // refused whether it creates or not
  if (auto row = w_.get_by_slug(gk, slug)) return {std::move(*row), false};
  return {create(gk, spec, slug, finalizers, owner, spec_version, labels), true};
}

ObjectRow WriteOps::mark_deleted(const ObjectRow& row) {
  if (row.meta.deletion_requested_at) return row;
  w_.request_deletion(row.meta.id, now_, w_.next_resource_version());
  auto out = changed(row.meta.id, object_change::deletion);
  // Its dependents hold it: they hear of it now, not at a resync that skips them once
  // settled, and as requeues, which lift a terminal mark (a dependent that failed for
  // good would otherwise never drop its edge, and hold the object for ever). And a
  // dependent being deleted no longer claims its targets: a deleting one waiting for its
  // last claim to go (has_incoming_refs) hears of it too.
  wake_dependents(row.meta.id, /*lift=*/true);
  released(w_.related(row.meta.id, LoadOption::dependencies));
  return out;
}

ObjectRow WriteOps::remove(const GroupKind& gk, ObjectID id, std::optional<std::int64_t> expected) {
  auto row = require(gk, id);
  require_version(row, expected);
  return mark_deleted(row);
}

ObjectRow WriteOps::set_labels(const GroupKind& gk, ObjectID id, const Labels& labels,
                               std::optional<std::int64_t> expected) {
  validate_labels(labels);
  auto row = require(gk, id);
  require_version(row, expected);
  if (row.meta.labels == labels) return row;
  w_.set_labels(id, labels, w_.next_resource_version(), now_);
  return changed(id, object_change::labels);
}

bool WriteOps::log_requeue(const GroupKind& gk, ObjectID id, bool reset_backoff) {
  auto row = require(gk, id);
  log_without_change(row.meta, kLoggedRequeue | (reset_backoff ? kLoggedBackoffReset : 0u));
  rec_.requeues.push_back({id, gk.group, gk.kind});
  if (reset_backoff) rec_.backoff_resets.push_back({id, gk.group, gk.kind});
  return true;
}

int WriteOps::trim_change_log(const trim_change_log_request& r) {
  if (r.entries <= 0 && r.max_age.count() <= 0) return 0;  // no bound: the whole log kept
  if (clock_steps_)
    for (auto& s : *clock_steps_) w_.lower_change_log_times(s.up_to, s.to);
  auto cut = w_.change_log_cut(r.entries, age_cutoff(now_, r.max_age), trim_at_most_);
  if (!cut) return 0;
  // A page at a time: millions of entries removed in one transaction would hold every
  // other write (on PostgreSQL, every process's) for as long.
  auto page = change_log_trim_page.load(std::memory_order_relaxed);
  if (auto page_end = w_.change_log_nth_oldest(page)) cut = std::min(*cut, *page_end);
  return w_.trim_change_log(*cut);
}

bool WriteOps::remove_by_slug(const GroupKind& gk, const std::string& slug) {
  auto row = w_.get_by_slug(gk, slug);
  if (!row || row->meta.deletion_requested_at) return false;
  mark_deleted(*row);
  return true;
}

ObjectRow WriteOps::update_status(const GroupKind& gk, ObjectID id,
                                  std::int64_t observed_generation, const std::string& status,
                                  int status_version, std::optional<std::int64_t> expected) {
  auto row = require_own(gk, id);
  require_version(row, expected);
  if (observed_generation > row.meta.generation)
    throw Error(errc::observed_generation_future,
                "observed generation " + std::to_string(observed_generation) + " is ahead of " +
                    std::to_string(row.meta.generation));
  refuse_downgrade("status", row.status ? row.status_version : 0, status_version);
  bool same_status = row.status == status && row.status_version == status_version;
  bool same_generation = row.meta.observed_generation == observed_generation;
  // Unchanged bytes write nothing, unless they settle a generation not yet recorded: a
  // stale pass (a generation older than the recorded one) reporting them again must not
  // move observed_generation back. Changed bytes are written as given, whatever the
  // generation (an older one leaves the object unsettled).
  bool stale = row.meta.observed_generation && observed_generation < *row.meta.observed_generation;
  if (same_status && (same_generation || stale)) return row;
  auto observed_at = same_generation ? row.meta.observed_at : std::optional<Time>(now_);
  w_.update_status(id, status, status_version, observed_generation, observed_at,
                   w_.next_resource_version(), now_);
  return changed(id, object_change::status);
}

ObjectRow WriteOps::set_condition(const GroupKind& gk, ObjectID id, const Condition& c) {
  auto row = require_own(gk, id);
  if (c.observed_generation > row.meta.generation)
    throw Error(errc::observed_generation_future, "condition " + c.type + " observed generation " +
                                                      std::to_string(c.observed_generation) +
                                                      ", ahead of the object's " +
                                                      std::to_string(row.meta.generation));
  // As stored: a JSON text's escapes (six bytes for a control character) and each
  // condition's other fields, so that the bound holds whatever their number.
  auto bytes = [](const Condition& x) {
    std::size_t n = condition_overhead_bytes;
    for (const auto* text : {&x.type, &x.reason, &x.message}) {
      n += text->size();
      for (unsigned char c : *text)
        if (c < 0x20) n += 5;
    }
    return n;
  };
  std::size_t total = bytes(c);
  for (const auto& existing : row.meta.conditions) {
    if (same_observation(existing, c)) return row;  // identical and current: nothing to write
    if (existing.type != c.type) total += bytes(existing);
  }
  if (total > max_conditions_bytes)
    throw Error(errc::invalid_argument,
                "the object's conditions would hold " + std::to_string(total) +
                    " bytes as stored, over the limit of " + std::to_string(max_conditions_bytes) +
                    ": remove conditions no longer needed, or shorten their messages");
  w_.upsert_condition(id, c, now_);
  w_.conditions_changed(id, w_.next_resource_version(), now_);
  wake_dependents(id);
  return changed(id, object_change::conditions);
}

ObjectRow WriteOps::remove_condition(const GroupKind& gk, ObjectID id, const std::string& type) {
  auto row = require_own(gk, id);
  if (!w_.delete_condition(id, type)) return row;
  w_.conditions_changed(id, w_.next_resource_version(), now_);
  wake_dependents(id);
  return changed(id, object_change::conditions);
}

ObjectRow WriteOps::remove_finalizer(const GroupKind& gk, ObjectID id,
                                     const std::string& finalizer) {
  auto row = require_own(gk, id);
  auto finalizers = row.meta.finalizers;
  if (std::erase(finalizers, finalizer) == 0) return row;
  w_.set_finalizers(id, finalizers, w_.next_resource_version(), now_);
  return changed(id, object_change::finalizers);
}

ObjectRow WriteOps::add_finalizer(const GroupKind& gk, ObjectID id, const std::string& finalizer) {
  auto row = require_own(gk, id);
  auto finalizers = row.meta.finalizers;
  // Present already: nothing to do, being deleted or not (a reconcile that ensures its
  // finalizer at every pass must reach its teardown).
  if (std::find(finalizers.begin(), finalizers.end(), finalizer) != finalizers.end()) return row;
  if (row.meta.deletion_requested_at)
    throw Error(errc::invalid_argument,
                "object " + std::to_string(id) + " is being deleted: it takes no new finalizer");
  finalizers.push_back(finalizer);
  std::size_t bytes = 0;
  for (const auto& f : finalizers) bytes += f.size();
  if (bytes > max_finalizers_bytes)
    throw Error(errc::invalid_argument, "object " + std::to_string(id) +
                                            "'s finalizers would hold " + std::to_string(bytes) +
                                            " bytes, over the limit of " +
                                            std::to_string(max_finalizers_bytes));
  w_.set_finalizers(id, finalizers, w_.next_resource_version(), now_);
  return changed(id, object_change::finalizers);
}

void WriteOps::wake_dependents(ObjectID id, bool lift) {
  for (auto& ref : w_.related(id, LoadOption::dependents))
    (lift ? rec_.requeues : rec_.wakes).push_back(std::move(ref));
}

bool WriteOps::add_dependency(const GroupKind& gk, ObjectID from, ObjectID to) {
  auto dependent = require_own(gk, from);
  auto deleting = w_.being_deleted(to);
  if (!deleting) throw Error(errc::not_found, "no object with id " + std::to_string(to));
  if (*deleting) {
    // A new claim would hold a target whose teardown may already have begun (its
    // controller found no claim and let it go): refused, as a new finalizer is. An
    // existing edge stays a no-op, so that a pass that ensures its edges still runs.
    for (const auto& ref : w_.related(from, LoadOption::dependencies))
      if (ref.id == to) return false;
    throw Error(errc::invalid_argument,
                "object " + std::to_string(to) + " is being deleted: it takes no new dependent");
  }
  if (!w_.add_ref(from, "depends_on", to)) return false;
  // The pass adding the edge may have read the target before a change that, with no edge
  // yet, woke nobody; settled, the dependent would not be run again (the resync skips
  // it). It runs once more and reads the target afresh, in whichever process runs its
  // controller (the log tells the others).
  rec_.wakes.push_back({from, gk.group, gk.kind});
  log_without_change(dependent.meta, kLoggedWake);
  return true;
}

bool WriteOps::remove_dependency(const GroupKind& gk, ObjectID from, ObjectID to) {
  require_own(gk, from);
  bool removed = w_.remove_ref(from, "depends_on", to);
  if (removed) released({Ref{to}});
  return removed;
}

void WriteOps::released(const std::vector<Ref>& targets, bool all_deleting) {
  rec_.edges_removed = true;
  // A deletion-pending target may be waiting for its last claim to go (a finalizer
  // gated on has_incoming_refs): reconcile it now rather than at the next resync.
  // A cascade releases its owner once per child: one wake is enough.
  for (auto& t : targets) {
    if (!woken_.insert(t.id).second) continue;
    ObjectMeta meta;
    if (all_deleting) {
      meta.id = t.id;
      meta.group = t.group;
      meta.kind = t.kind;
    } else if (auto row = w_.get(t.id); row && row->meta.deletion_requested_at) {
      meta = std::move(row->meta);
    } else {
      continue;
    }
    rec_.wakes.push_back({meta.id, meta.group, meta.kind});
    // Other processes' controllers and collectors learn of it from the log.
    log_without_change(meta, kLoggedRelease);
  }
}

void WriteOps::log_without_change(const ObjectMeta& meta, unsigned parts) {
  auto rv = w_.next_resource_version();
  w_.log_change(rv, meta, parts, now_, nullptr);
  rec_.logged_versions.push_back(rv);
}

Event WriteOps::record_event(const GroupKind& gk, ObjectID id, const EventSpec& e) {
  require_own(gk, id);
  std::optional<std::string> detail;
  if (!e.detail.is_null()) detail = detail::dump_json(e.detail);
  auto rv = w_.next_resource_version();
  auto current = w_.current_run(id, e.category);
  // The run as the write leaves it, built here rather than read back: the current run
  // is known by its id, whatever order the clock gave the runs' times.
  Event run;
  if (current && current->type == e.type && current->reason == e.reason) {
    run = std::move(*current);
    w_.extend_event(run.id, e.message, detail, now_, rv);
    // Saturates, as the stored count does: a run extended every millisecond reaches the
    // largest int in 25 days, and a run that could no longer be extended would fail
    // every event of its category.
    if (run.count < std::numeric_limits<int>::max()) ++run.count;
  } else {
    run.id = w_.insert_event(id, e, detail, now_, rv);
    run.object_id = id;
    run.category = e.category;
    run.type = e.type;
    run.reason = e.reason;
    run.count = 1;
    run.first_at = from_millis(to_millis(now_));  // stored in milliseconds
  }
  run.message = e.message;
  run.detail = detail ? detail::parse_json(*detail) : nlohmann::json();  // as a read gives it
  run.last_at = from_millis(to_millis(now_));
  rec_.events.push_back({run, rv});
  return run;
}

int WriteOps::trim_events(const trim_events_request& policy) {
  if (sweep_) return sweep_page(*sweep_, page_);
  EventSweep whole;
  whole.policy = policy;
  int removed = 0;
  while (!whole.done) removed += sweep_page(whole, std::numeric_limits<int>::max());
  return removed;
}

int WriteOps::sweep_page(EventSweep& s, int page) {
  using By = Writer::EventPaging;
  int removed = 0;
  auto& policy = s.policy;
  if (!policy.fallback && policy.retention.empty()) {  // keep everything
    s.done = true;
    return removed;
  }
  if (!s.high_water) {
    // Read first: a run written after this read is above it, and the next sweep sees it.
    s.high_water = w_.events_high_water();
    s.after = s.since < 0 ? 0 : s.since;
    s.counted = !has_count_bound(policy);
  }
  if (!s.counted) {
    auto by = s.since < 0 ? By::by_object : By::by_version;
    auto end = w_.event_page_end(by, s.after, page);
    bool last = by == By::by_object ? !end : !end || *end >= *s.high_water;
    std::int64_t upto = !last                 ? *end
                        : by == By::by_object ? std::numeric_limits<std::int64_t>::max()
                                              : *s.high_water;
    for (auto& gk : w_.kinds_with_runs_in(by, s.after, upto))
      if (auto r = retention_for(policy, gk); r && r->per_object > 0)
        removed += w_.trim_event_runs(gk, r->per_object, by, s.after, upto);
    s.after = upto;
    s.counted = last;
    if (!last) return removed;  // a page's runs read: the rest in the next one
  }
  if (!s.aging) {
    s.aging.emplace();
    if (auto latest = latest_age_cutoff(policy, now_))
      for (auto& gk : w_.kinds_with_runs_before(*latest))
        if (auto r = retention_for(policy, gk); r && r->max_age.count() > 0) s.aging->push_back(gk);
  }
  for (int left = page; !s.aging->empty() && left > 0;) {
    auto& gk = s.aging->back();
    auto before = age_cutoff(now_, retention_for(policy, gk)->max_age);
    auto end = w_.old_events_page_end(gk, s.aged_after, before, left);
    int n = w_.trim_old_events(gk, s.aged_after, end, before);
    removed += n;
    left -= n;
    if (end) {
      s.aged_after = *end;
    } else {  // none of the kind's left
      s.aging->pop_back();
      s.aged_after = Time::min();
    }
  }
  s.done = s.aging->empty();
  return removed;
}

int WriteOps::collect_garbage(std::int64_t budget, bool cascade) {
  int removed = 0;
  // Collects before it cascades: children marked by the last pass go first, so that the
  // next cascade step does not read past them again (a cascade of n children costs
  // O(n), not O(n^2 / budget)). A cascading pass keeps one of its budget for the
  // cascade: a child it marks is a deletion request, which has the gc ask for the next
  // cascading pass (the removals alone would not).
  std::int64_t bytes = gc_pass_bytes.load();
  auto spend = [&](const ObjectRow& row) {
    bytes -= static_cast<std::int64_t>(row.spec.size() + (row.status ? row.status->size() : 0));
    --budget;
  };
  for (bool progress = true; progress && budget > 0 && bytes > 0;) {
    progress = false;
    for (auto id : w_.collectible(cascade ? budget - 1 : budget)) {
      if (bytes <= 0) break;
      auto final_body = reread(id);
      spend(final_body);
      auto targets = w_.related(id, LoadOption::dependencies);
      auto owner = owner_of(id);
      if (owner) targets.push_back(*owner);
      // Its dependents may wait for it to go: all of them are being deleted (no live one
      // holds a collectible object), so they are woken unread.
      auto dependents = w_.related(id, LoadOption::dependents);
      std::erase_if(dependents, [id](const Ref& d) { return d.id == id; });  // a self-edge
      w_.drop_pending_dependencies(id);  // RESTRICT would refuse the DELETE otherwise
      w_.delete_object(id);
      released(targets);
      released(dependents, true);
      // The removal is a change of its own: it gets a resource version, so that a
      // watch whose snapshot holds the last body still sees it.
      final_body.meta.resource_version = w_.next_resource_version();
      record({ChangeType::Deleted, std::move(final_body), object_change::removed}, owner);
      ++removed;
      progress = true;
    }
    if (!cascade) continue;
    for (auto id : w_.cascade_candidates(budget)) {
      spend(mark_deleted(reread(id)));
      progress = true;
      // One at least, as the budget's last row: the mark has the gc ask for the next
      // cascading pass.
      if (bytes <= 0) break;
    }
  }
  return removed;
}

// -- one overload per request (requests.hpp) ------------------------------------------------

ObjectRow WriteOps::apply(const create_request& r) {
  return create(r.gk, r.spec, r.slug, r.finalizers, r.owner, r.spec_version.value_or(0), r.labels);
}
ObjectRow WriteOps::apply(const update_request& r) {
  return update(r.gk, r.id, r.spec, r.spec_version.value_or(0), r.resource_version);
}
ObjectRow WriteOps::apply(const create_or_update_request& r) {
  return create_or_update(r.gk, r.slug, r.spec, r.spec_version.value_or(0), r.finalizers, r.owner,
                          r.labels);
}
get_or_create_reply WriteOps::apply(const get_or_create_request& r) {
  auto [row, created] = get_or_create(r.gk, r.slug, r.spec, r.finalizers, r.owner,
                                      r.spec_version.value_or(0), r.labels);
  return {std::move(row), created};
}
ObjectRow WriteOps::apply(const remove_request& r) {
  return remove(r.gk, r.id, r.resource_version);
}
ObjectRow WriteOps::apply(const set_labels_request& r) {
  return set_labels(r.gk, r.id, r.labels, r.resource_version);
}
bool WriteOps::apply(const log_requeue_request& r) {
  return log_requeue(r.gk, r.id, r.reset_backoff);
}
int WriteOps::apply(const trim_change_log_request& r) { return trim_change_log(r); }
bool WriteOps::apply(const remove_by_slug_request& r) { return remove_by_slug(r.gk, r.slug); }
ObjectRow WriteOps::apply(const update_status_request& r) {
  return update_status(r.gk, r.id, r.observed_generation, r.status, r.status_version.value_or(0),
                       r.resource_version);
}
ObjectRow WriteOps::apply(const set_condition_request& r) {
  return set_condition(r.gk, r.id, r.condition);
}
ObjectRow WriteOps::apply(const remove_condition_request& r) {
  return remove_condition(r.gk, r.id, r.type);
}
ObjectRow WriteOps::apply(const remove_finalizer_request& r) {
  return remove_finalizer(r.gk, r.id, r.finalizer);
}
ObjectRow WriteOps::apply(const add_finalizer_request& r) {
  return add_finalizer(r.gk, r.id, r.finalizer);
}
bool WriteOps::apply(const add_dependency_request& r) { return add_dependency(r.gk, r.from, r.to); }
bool WriteOps::apply(const remove_dependency_request& r) {
  return remove_dependency(r.gk, r.from, r.to);
}
Event WriteOps::apply(const record_event_request& r) { return record_event(r.gk, r.id, r.event); }
int WriteOps::apply(const collect_request& r) { return collect_garbage(gc_pass_budget, r.cascade); }
int WriteOps::apply(const trim_events_request& r) { return trim_events(r); }

}  // namespace beehive::store
