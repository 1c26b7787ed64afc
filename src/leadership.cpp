// Leadership as the beehive sees it: whether this process leads the ones on its store
// (the store decides, see Backend::leads), the streams that follow it, and passing its
// changes to the actors that do the leader's work (through the root).
//
// leadership_changed runs on the store's thread; the rest on callers' threads. The
// streams are guarded by leadership_mu_.

#include <optional>
#include <tuple>
#include <utility>

#include <beehive/errors.hpp>

#include "beehive_core.hpp"
#include "metrics/store_metrics.hpp"

namespace beehive::detail {

bool BeehiveCore::is_leader() const { return state_.load() == State::running && backend_->leads(); }

bool BeehiveCore::is_standby() const {
  return state_.load() == State::running && !backend_->leads();
}

Stream<bool> BeehiveCore::watch_leadership(const Context& ctx) {
  if (state_.load() == State::stopped || state_.load() == State::draining)
    throw Error(errc::stopped, "beehive stopped");
  auto core = std::make_shared<StreamCore<bool>>(ctx);
  {
    std::lock_guard g(leadership_mu_);
    // Stop ended the streams between the check above and here.
    if (leadership_streams_ended_) throw Error(errc::stopped, "beehive stopped");
    core->push(0, leads_reported_);
    std::erase_if(leadership_streams_, [](auto& s) { return s->done(); });
    leadership_streams_.push_back(core);
  }
  return Stream<bool>(core);
}

void BeehiveCore::leadership_changed(bool leads) {
  {
    // The passes in flight began under the leadership that ends here.
    std::lock_guard g(term_ctx_mu_);
    cancel_term_();
    std::tie(term_ctx_, cancel_term_) = stop_ctx_.with_cancel();
  }
  log(leads ? LogLevel::info : LogLevel::warning,
      leads ? "this process now leads the store's processes"
            : "this process no longer leads the store's processes",
      {{"store", backend_->describe()}});
  caf::anon_send(root_, leadership_atom::value, leads);
  report_leadership(leads);
}

void BeehiveCore::report_leadership(std::optional<bool> told) {
  // The streams hear each change once: what they were told last is not told again.
  std::lock_guard g(leadership_mu_);
  // Read under the lock when not told: a change reported meanwhile is not undone by a
  // value read before it.
  const bool leads = told ? *told : backend_->leads();
  if (leads == leads_reported_) return;
  leads_reported_ = leads;
  for (auto& s : leadership_streams_) s->push(0, leads);
  if (services_.metrics) report_leader(*services_.metrics, leads);
}

void BeehiveCore::follow_leadership() {
  backend_->on_leadership([this](bool leads) { leadership_changed(leads); });
  // Whatever start found follows what the streams were told before it (not leading).
  report_leadership(std::nullopt);
}

void BeehiveCore::unfollow_leadership() {
  // Returns once no call of leadership_changed runs any more (Backend::on_leadership).
  backend_->on_leadership({});
  end_leadership_streams();
}

void BeehiveCore::end_leadership_streams() {
  std::lock_guard g(leadership_mu_);
  // A stopped process leads nothing, whatever the store would say.
  if (std::exchange(leads_reported_, false) && services_.metrics)
    report_leader(*services_.metrics, false);
  leadership_streams_ended_ = true;
  for (auto& s : leadership_streams_) s->finish(make_error_code(errc::stopped));
  leadership_streams_.clear();
}

}  // namespace beehive::detail
