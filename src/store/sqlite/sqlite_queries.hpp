#pragma once

// The statements a SQLite Connection runs, named (Query) so that each is prepared once
// per connection and kept, and their SQL text (sql_for, in sqlite_queries.cpp).
//
// Plain data and a pure function: safe on any thread.

#include <string>

namespace beehive::store {

enum class Query : int {
  get,
  get_by_slug,
  list,
  set_resource_version,
  resource_version,
  last_object_id,
  reserve_object_ids,
  raise_object_id_counter,
  raise_resource_version,
  insert_object,
  update_spec,
  request_deletion,
  owner_of,
  owner_of_one,
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
  current_resource_version,
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
  begin_read,
  end_read,
  data_version,
  schema_version,
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
  pin_resource_version,
  trim_change_log,
  set_change_log_horizon,
  count_,  // not a query
};

/// The SQL text of `q`; the object reads select the columns RowStatement::row decodes.
std::string sql_for(Query q);
/// An object read of the columns RowStatement::row decodes, `where` the rest of it,
/// from `from` (which names the objects `o`).
std::string select_objects_sql(const std::string& where, const char* from = "objects AS o");

}  // namespace beehive::store
