// BeehiveCore's registry of kinds: register_controller records a kind's reconcile and
// settings before start; calls read it at any time (under its own lock, never the
// lifecycle's).

#include "beehive_core.hpp"

namespace beehive::detail {

void BeehiveCore::register_kind(const GroupKind& gk, ReconcileFn fn,
                                const std::vector<Option>& opts) {
  auto refuse_when_stopping = [this] {
    if (state_ == State::stopped || state_ == State::draining)
      throw Error(errc::stopped, "beehive stopped");
  };
  // A stop holds the lock until it ends, but marks the beehive draining as soon as it has
  // it: looked at while waiting, so that a registration is refused then.
  std::unique_lock lk(mu_, std::defer_lock);
  do refuse_when_stopping();
  while (!lk.try_lock_for(std::chrono::milliseconds(10)));
  refuse_when_stopping();
  if (state_ != State::created)
    throw Error(errc::already_started, "register controllers before start");
  if (kind(gk)) throw Error(errc::already_registered, to_string(gk) + " already has a controller");
  {
    // Metrics and logs name a kind "Kind.group": two kinds that read the same there would
    // share their series (each overwriting the other's gauges) and be told apart nowhere.
    std::lock_guard k(kinds_mu_);
    for (auto& [other, e] : kinds_)
      if (to_string(other) == to_string(gk))
        throw Error(errc::invalid_argument, "group \"" + gk.group + "\", kind \"" + gk.kind +
                                                "\" reads as " + to_string(gk) + ", as group \"" +
                                                other.group + "\", kind \"" + other.kind +
                                                "\" does, which has a controller");
  }
  auto kind_opts = OptionSet::from(opts);
  if (auto& m = kind_opts.migrator;
      m && (m->schema_version_spec() < 0 || m->schema_version_status() < 0))
    throw Error(errc::invalid_argument,
                to_string(gk) + ": a migrator's schema versions are 0 (unversioned) or above");
  auto entry = std::make_shared<KindEntry>();
  entry->gk = gk;
  entry->reconcile = std::move(fn);
  auto& s = entry->settings;
  s.concurrency = kind_opts.concurrency.value_or(1);
  if (auto r = kind_opts.resync_interval.has_value() ? kind_opts.resync_interval
                                                     : settings_.resync_interval)
    s.resync = *r;
  entry->event_retention = kind_opts.event_retention;
  entry->migrator = kind_opts.migrator;
  s.apply(settings_, false);
  s.apply(kind_opts, true);
  std::lock_guard k(kinds_mu_);
  auto written_before = [&](const char* what) {
    return Error(errc::invalid_argument,
                 to_string(gk) + " was written before its controller was registered, at " + what +
                     " version 0, which its migrator would read as its version 0: register " +
                     "the controller before the kind's first write");
  };
  if (entry->migrator && entry->migrator->schema_version_spec() > 0 &&
      (written_unregistered_.count(gk) || writing_unregistered_.count(gk)))
    throw written_before("spec");
  if (entry->migrator && entry->migrator->schema_version_status() > 0 &&
      status_written_unregistered_.count(gk))
    throw written_before("status");
  // Declared only for a controller that is registered: a refused one shows no series.
  if (settings_.metrics)
    entry->metrics = std::make_shared<KindMetrics>(settings_.metrics, gk, s.concurrency);
  kinds_.emplace(gk, std::move(entry));
}

const Migrator* BeehiveCore::migrator(const GroupKind& gk) const {
  auto k = kind(gk);
  return k ? k->migrator.get() : nullptr;
}

int BeehiveCore::spec_version(const GroupKind& gk) const {
  auto* m = migrator(gk);
  return m ? m->schema_version_spec() : 0;
}

SpecVersionClaim BeehiveCore::writing_spec_version(const GroupKind& gk) {
  std::lock_guard k(kinds_mu_);
  if (auto it = kinds_.find(gk); it != kinds_.end()) {
    auto* m = it->second->migrator.get();
    return SpecVersionClaim(m ? m->schema_version_spec() : 0);
  }
  if (state_ != State::created) return SpecVersionClaim(0);  // registration is closed
  ++writing_unregistered_[gk];
  return SpecVersionClaim(0, [this, gk](bool kept) {
    std::lock_guard k(kinds_mu_);
    if (kept) written_unregistered_.insert(gk);
    if (--writing_unregistered_[gk] == 0) writing_unregistered_.erase(gk);
  });
}

SchemaVersions BeehiveCore::request_versions(const GroupKind& gk, unsigned defaults) {
  std::lock_guard k(kinds_mu_);
  if (auto it = kinds_.find(gk); it != kinds_.end()) {
    auto* m = it->second->migrator.get();
    return m ? SchemaVersions{m->schema_version_spec(), m->schema_version_status()}
             : SchemaVersions{};
  }
  if (state_ == State::created) {  // registration still open
    if (defaults & store::kDefaultSpec) written_unregistered_.insert(gk);
    if (defaults & store::kDefaultStatus) status_written_unregistered_.insert(gk);
  }
  return {};
}

int BeehiveCore::status_version(const GroupKind& gk) const {
  auto* m = migrator(gk);
  return m ? m->schema_version_status() : 0;
}

std::shared_ptr<KindEntry> BeehiveCore::kind(const GroupKind& gk) const {
  std::lock_guard lk(kinds_mu_);
  auto it = kinds_.find(gk);
  return it == kinds_.end() ? nullptr : it->second;
}

}  // namespace beehive::detail
