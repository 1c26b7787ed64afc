#pragma once

// The statements the PostgreSQL store runs, named (Q) so that each is prepared once per
// connection, and their SQL text (pg_queries.cpp).
//
// Plain data and pure functions: safe on any thread.

#include <string>

#include "store/postgres/pg_connection.hpp"

namespace beehive::store::pg {

enum class Q : int {
  get,
  get_with_owner,
  get_by_slug,
  list,
  head,
  lock_counters,
  try_lock_counters,
  schema_version,
  close_transaction,
  raise_counters,
  read_token,
  insert_object,
  update_spec,
  request_deletion,
  owner_of_one,
  owner_of,
  dependencies_of,
  dependents_of,
  owned_by,
  recent_events,
  list_ids,
  list_unsettled_ids,
  update_status,
  upsert_condition,
  delete_condition,
  set_finalizers,
  conditions_changed,
  has_incoming_refs,
  list_owned_objects,
  add_ref,
  remove_ref,
  object_being_deleted,
  cascade_candidates,
  collectible,
  drop_pending_dependencies,
  delete_object,
  list_events,
  current_run,
  event_runs_between,
  insert_event,
  extend_event,
  events_high_water,
  event_page_end,
  event_page_end_by_version,
  kinds_with_runs_in,
  kinds_with_runs_in_versions,
  kinds_with_runs_before,
  trim_event_runs,
  trim_event_runs_in_versions,
  old_events_page_end,
  trim_old_events,
  set_labels,
  delete_labels,
  insert_label,
  log_change,
  change_log_since,
  change_log_horizon,
  change_log_first_young,
  change_log_nth_newest,
  change_log_nth_oldest,
  change_log_newest,
  lower_change_log_times,
  trim_change_log,
  set_change_log_horizon,
  lease_renew,
  lease_take,
  lease_look,
  lease_check,
  lease_release,
  lease_blockers_end,
  count_,  // not a query
};

/// The statement's name and SQL text.
Statement statement(Q q, Params params = {});
/// Runs `q` on `c`.
Result run(Connection& c, Q q, const Params& params = {});
/// An object read of the columns read_row decodes; `where` is the rest of it.
std::string select_objects_sql(const std::string& where);
/// The columns read_object_row decodes, of objects aliased `o`.
std::string object_columns_sql();

}  // namespace beehive::store::pg
