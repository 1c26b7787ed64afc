// The public actor surface's glue: error conversion, the message types an actor system
// must know (derived from the request lists of actor/requests.hpp), and the handles of
// a running beehive's actors. Called by application threads; keeps no state.

#include <caf/actor_cast.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/message.hpp>

#include <beehive/actors.hpp>

#include "beehive_core.hpp"

namespace beehive {

caf::error make_error(errc code, std::string what) {
  if (what.empty()) return {static_cast<std::uint8_t>(code), error_category_atom};
  return {static_cast<std::uint8_t>(code), error_category_atom, caf::make_message(std::move(what))};
}

std::optional<errc> to_errc(const caf::error& err) {
  if (!err) return std::nullopt;
  if (err.category() == error_category_atom) return static_cast<errc>(err.code());
  // A request to a null handle (one taken while the beehive did not run) is CAF's
  // invalid_argument: the beehive's actors are not there.
  if (err == caf::sec::request_receiver_down || err == caf::sec::invalid_argument ||
      err.category() == caf::atom("exit"))
    return errc::stopped;
  if (err == caf::sec::request_timeout) return errc::deadline_exceeded;
  // A message the receiver does not take: the wrong handle for it, not a store failure.
  if (err == caf::sec::unexpected_message) return errc::invalid_argument;
  return errc::store;
}

std::string error_message(const caf::error& err) {
  if (err.context().match_elements<std::string>()) return err.context().get_as<std::string>(0);
  return {};
}

namespace {

/// Registers each request of the list, and its reply type where that is one of ours.
template <class... Rs>
void add_requests(caf::actor_system_config& cfg, type_list<Rs...>) {
  (cfg.add_message_type<Rs>(Rs::type_name), ...);
}

}  // namespace

void add_message_types(caf::actor_system_config& cfg) {
  add_requests(cfg, store_writer_request_types{});
#define BEEHIVE_TYPE(T) cfg.add_message_type<T>("beehive::" #T)
  BEEHIVE_TYPE(GroupKind);
  BEEHIVE_TYPE(Ref);
  BEEHIVE_TYPE(Condition);
  BEEHIVE_TYPE(EventSpec);
  BEEHIVE_TYPE(Event);
  BEEHIVE_TYPE(EventFilter);
  BEEHIVE_TYPE(Schedule);
  BEEHIVE_TYPE(ObjectRow);
  BEEHIVE_TYPE(object_change);
  BEEHIVE_TYPE(event_run);
  BEEHIVE_TYPE(commit_record);
  BEEHIVE_TYPE(get_or_create_reply);
  BEEHIVE_TYPE(transaction_reply);
  BEEHIVE_TYPE(store_writer_state);
  BEEHIVE_TYPE(watch_request);
  BEEHIVE_TYPE(event_watch_request);
  BEEHIVE_TYPE(watch_ended);
  BEEHIVE_TYPE(watch_hub_state);
  BEEHIVE_TYPE(requeue_request);
  BEEHIVE_TYPE(schedule_watch_request);
  BEEHIVE_TYPE(schedule_change);
  BEEHIVE_TYPE(controller_state);
  BEEHIVE_TYPE(gc_state);
  BEEHIVE_TYPE(event_log_state);
  BEEHIVE_TYPE(scheduler_state);
#undef BEEHIVE_TYPE
  // Replies that are lists.
  cfg.add_message_type<std::vector<ObjectRow>>("std::vector<beehive::ObjectRow>");
  cfg.add_message_type<std::vector<Event>>("std::vector<beehive::Event>");
  cfg.add_message_type<std::vector<Ref>>("std::vector<beehive::Ref>");
  cfg.add_message_type<std::vector<object_change>>("std::vector<beehive::object_change>");
  cfg.add_error_category(error_category_atom,
                         [](std::uint8_t code, caf::atom_value, const caf::message& ctx) {
                           std::string out = "beehive: ";
                           out += to_string(static_cast<errc>(code));
                           if (ctx.match_elements<std::string>())
                             out += " (" + ctx.get_as<std::string>(0) + ")";
                           return out;
                         });
}

ActorHandles actor_handles(const Beehive& bh) {
  auto& rt = *bh.core();
  ActorHandles h;
  h.store_writer = rt.store_writer();
  h.watch_hub = caf::actor_cast<watch_hub_actor>(rt.watch_hub());
  h.gc = caf::actor_cast<gc_actor>(rt.gc());
  h.event_log = caf::actor_cast<event_log_actor>(rt.event_log());
  h.scheduler = rt.scheduler();
  h.beehive = bh.core();
  return h;
}

std::optional<controller_actor> ActorHandles::controller(const GroupKind& gk) const {
  auto core = beehive.lock();
  if (!core) return std::nullopt;
  auto c = core->controller(gk);
  if (!c) return std::nullopt;
  return caf::actor_cast<controller_actor>(c);
}

}  // namespace beehive
