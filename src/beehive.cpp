#include <beehive/actors.hpp>
#include <beehive/beehive.hpp>

#include "beehive_core.hpp"

namespace beehive {

Beehive::Beehive(caf::actor_system* sys, std::shared_ptr<Store> store,
                 const std::vector<Option>& opts)
    : rt_(std::make_shared<detail::BeehiveCore>(sys, std::move(store), opts)) {}

Beehive::~Beehive() {
  // Clients may keep the runtime alive; the actors and their system end here.
  rt_->shutdown_system();
}

Stop Beehive::start(const Context& ctx) { return rt_->start(ctx); }
bool Beehive::is_leader() const { return rt_->is_leader(); }
Stream<bool> Beehive::watch_leadership(const Context& ctx) { return rt_->watch_leadership(ctx); }

caf::actor_system& actor_system_of(const Beehive& bh) { return bh.core()->system(); }

}  // namespace beehive
