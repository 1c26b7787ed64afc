#pragma once

// The untyped half of Client<Spec, Status>: everything that does not depend on the
// application's types, compiled once in the library.
//
// Internal: not part of the API and may change. Thread-safe, like the Client it serves.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <beehive/commit_record.hpp>
#include <beehive/context.hpp>
#include <beehive/detail/stream_core.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/object_row.hpp>
#include <beehive/options.hpp>
#include <beehive/schedule.hpp>

namespace beehive {
class Beehive;
class Migrator;
}  // namespace beehive

namespace beehive::store {
struct ReadOp;
}

namespace beehive::detail {

class BeehiveCore;

/// Runs on the writer inside the write transaction with the written row; throwing
/// rolls the write back.
using RowCheck = std::function<void(const ObjectRow&)>;

class ClientCore {
 public:
  ClientCore(const Beehive& bh, GroupKind gk);

  const GroupKind& group_kind() const { return gk_; }
  /// The kind's migrator, or null (a client-only kind, or none registered).
  const Migrator* migrator() const;

  /// The caller decodes `spec` itself (see Client::create): the writer does not check it.
  ObjectRow create(const Context& ctx, std::string spec, const std::vector<Option>& opts) const;
  /// `opts`: the create options, applied only when it creates.
  ObjectRow create_or_update(const Context& ctx, std::string_view slug, std::string spec,
                             RowCheck check, const std::vector<Option>& opts = {}) const;
  std::pair<ObjectRow, bool> get_or_create(const Context& ctx, std::string_view slug,
                                           std::string spec, const std::vector<Option>& opts,
                                           RowCheck check) const;
  ObjectRow update(const Context& ctx, ObjectID id, std::string spec, RowCheck check,
                   const std::vector<Option>& opts = {}) const;
  ObjectRow set_labels(const Context& ctx, ObjectID id, Labels labels, RowCheck check,
                       const std::vector<Option>& opts) const;
  ObjectRow get(const Context& ctx, ObjectID id, unsigned loads) const;
  ObjectRow get_by_slug(const Context& ctx, std::string_view slug, unsigned loads) const;
  std::vector<ObjectRow> list(const Context& ctx, unsigned loads) const;
  /// The kind's rows, by id, each handed to `each` as it is read, so that a large kind is
  /// never held as rows and decoded objects at once. Only without relations to load and
  /// outside within: false (nothing read) otherwise, and the caller uses list().
  bool list_each(const Context& ctx, unsigned loads,
                 const std::function<void(ObjectRow&&)>& each) const;
  std::vector<ObjectRow> list_owned_objects(const Context& ctx, ObjectID owner,
                                            unsigned loads) const;
  struct RowPage {
    std::vector<ObjectRow> rows;
    std::string continue_token;
  };
  /// A page of the kind's rows (limit 0: all of them), selected by `read.selector`.
  RowPage list_page(const Context& ctx, std::size_t limit, std::string_view continue_token,
                    unsigned loads, const ReadSettings& read) const;
  void remove(const Context& ctx, ObjectID id, const std::vector<Option>& opts = {}) const;
  void remove_by_slug(const Context& ctx, std::string_view slug) const;

  /// One relation (a LoadOption bit) of any object; not kind-scoped, empty when missing.
  std::vector<Ref> related(const Context& ctx, ObjectID id, unsigned relation) const;

  /// A conflating stream of the kind's changes (or one object's), snapshot first (or
  /// from `read.resume_from`), filtered by `read.selector`.
  std::shared_ptr<StreamCore<object_change>> watch(const Context& ctx, std::optional<ObjectID> id,
                                                   const ReadSettings& read = {}) const;

  std::vector<Event> list_events(const Context& ctx, ObjectID id, const EventQuery& q) const;
  /// The current run of a category: the one started last (record_event extends it).
  std::optional<Event> current_run(const Context& ctx, ObjectID id,
                                   std::string_view category) const;
  std::shared_ptr<StreamCore<event_run>> watch_events(const Context& ctx, ObjectID id,
                                                      const EventQuery& q) const;
  std::shared_ptr<StreamCore<Schedule>> watch_schedule(const Context& ctx, ObjectID id) const;

  /// Non-blocking read of the kind's per-object timers; the epoch when nothing is due.
  Schedule get_schedule(ObjectID id) const;
  void requeue(const Context& ctx, ObjectID id, bool reset_backoff) const;

  /// Logs a row that list or a watch skipped because it does not decode.
  void report_skipped(const ObjectRow& row, const std::exception& e) const;
  /// A watched change whose row does not decode: logged, and the stream's position held
  /// below it (see StreamCoreBase::hold_below), unless it is a removal, which needs no
  /// body: true then, to deliver it with the row's metadata alone.
  bool undecodable_change(StreamCoreBase& stream, const object_change& ch,
                          const std::exception& e) const;

 private:
  std::vector<ObjectRow> read_in_transaction(const Context& ctx, store::ReadOp op) const;

  std::shared_ptr<BeehiveCore> rt_;
  GroupKind gk_;
};

constexpr unsigned bits_of(const LoadOption& o) { return o.bits(); }
constexpr unsigned bits_of(const ReadOption&) { return 0; }
inline void apply_read(ReadSettings&, const LoadOption&) {}
inline void apply_read(ReadSettings& s, const ReadOption& o) { o.apply(s); }

/// Throws invalid_argument for what a list cannot take: a resume position (watches').
void check_list_read(const ReadSettings& read);

/// The LoadOption bits among a read's options.
template <class... Opts>
unsigned load_bits(const Opts&... opts) {
  return (0u | ... | bits_of(opts));
}
/// What the ReadOptions among a read's options set.
template <class... Opts>
ReadSettings read_settings(const Opts&... opts) {
  ReadSettings s;
  (apply_read(s, opts), ...);
  return s;
}

}  // namespace beehive::detail
