#include <beehive/beehive.hpp>

#include "runtime.hpp"

namespace beehive {

Beehive::Beehive(caf::actor_system* sys, std::shared_ptr<Store> store, std::vector<Option> opts)
    : rt_(std::make_shared<detail::Runtime>(sys, std::move(store), opts)) {}

Beehive::~Beehive() {
  try {
    rt_->stop(Context{});
  } catch (...) {
  }
}

Stop Beehive::start(const Context& ctx) { return rt_->start(ctx); }

}  // namespace beehive
