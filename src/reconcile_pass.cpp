// One reconcile pass, as a worker runs it (Services::reconcile): read the row on the read
// pool, run the kind's typed reconcile with a context stop can cancel, and turn what
// happened into an Outcome for the controller. Runs on a worker's thread.

#include "beehive_core.hpp"

#include "context_internal.hpp"
#include "pass_faults.hpp"
#include "thread_guards.hpp"

namespace beehive::detail {

thread_local std::vector<RunningReconcile> running_reconciles;

const RunningReconcile* reconcile_on_this_thread(const void* runtime) {
  for (auto it = running_reconciles.rbegin(); it != running_reconciles.rend(); ++it)
    if (it->runtime == runtime) return &*it;
  return nullptr;
}

namespace {

/// Why a controller whose build does not version a column (no migrator, or a version of 0)
/// must not reconcile a row whose column a build that does wrote (a rollback): it would
/// read that blob as its own format, and its status writes over it are refused
/// (schema_version_downgrade), failing every pass. Quarantined instead, as a blob
/// newer than the migrator is.
std::optional<std::string> versioned_beyond_this_build(const ObjectRow& row, const Migrator* m) {
  auto check = [](const char* what, int stored, int current) -> std::optional<std::string> {
    if (current != 0 || stored == 0) return std::nullopt;
    return std::string(what) + " written at schema version " + std::to_string(stored) +
           ", which this build does not version (a build with a newer migrator wrote it)";
  };
  if (auto why = check("spec", row.spec_version, m ? m->schema_version_spec() : 0)) return why;
  if (row.status) return check("status", row.status_version, m ? m->schema_version_status() : 0);
  return std::nullopt;
}

}  // namespace

Outcome BeehiveCore::reconcile_once(const KindEntry& kind, ObjectID id) {
  Outcome out;
  if (faults::reconcile_pass) faults::reconcile_pass(true);
  // Taken before the term is read: a change of leadership after this cancels it.
  Context parent;
  {
    std::lock_guard g(term_ctx_mu_);
    parent = term_ctx_;
  }
  // The term this pass began in: its writes are refused once that term has ended, even
  // should this process lead again by then (what it read may be another leader's past).
  const auto term = backend_->term();
  running_reconciles.push_back({this, term});
  struct Leave {
    ~Leave() {
      running_reconciles.pop_back();
      if (faults::reconcile_pass) faults::reconcile_pass(false);
    }
  } leave;
  // Whether the object is still there after its pass failed; a read that fails too says
  // so (the pass's own error stays the one reported, not the read's).
  auto exists = [&] {
    try {
      auto row = backend_->reader()->get(id);
      return row && row->meta.group == kind.gk.group && row->meta.kind == kind.gk.kind;
    } catch (const std::exception&) {
      return true;
    }
  };
  // Stop cancels the passes in flight before the controllers hear that it stopped
  // dispatching: one handed out in between never reaches the reconcile.
  if (stop_ctx_.done()) return {Outcome::cancelled, {}, "beehive stopping"};
  // Handed out just before this process was deposed: no term its writes could pass the
  // fence in (should it lead again meanwhile, that leadership's own pass reconciles).
  if (term < 0) return {Outcome::cancelled, {}, "this process does not lead"};
  try {
    auto row = backend_->reader()->get(id);
    if (!row || row->meta.group != kind.gk.group || row->meta.kind != kind.gk.kind) {
      out.kind = Outcome::gone;
    } else if (auto why = versioned_beyond_this_build(*row, migrator(kind.gk))) {
      out = {Outcome::quarantined, {}, *why};
    } else {
      ControllerClientCore core(shared_from_this(), kind.gk);
      out = kind.reconcile(ContextAccess::for_reconcile(parent, this, term), core, *row);
      // Stop (or the end of the leadership it began under) cancelled the pass: not a
      // failure (a TerminalError included). Or this process was deposed (its writes
      // failed the fence): the new leader's pass, not a failure of this one. Or the object went
      // meanwhile (the GC collected it once the pass removed the last finalizer): nothing left to
      // do.
      bool failed = out.kind == Outcome::error || out.kind == Outcome::terminal_error;
      if (failed && (parent.done() || !backend_->leads()))
        out = {Outcome::cancelled, {}, out.message};
      else if (out.kind == Outcome::error && !exists())
        out = {Outcome::gone, {}, out.message};
    }
    if (out.kind == Outcome::quarantined)
      log(LogLevel::warning,
          "quarantined " + to_string(kind.gk) + " " + std::to_string(id) +
              ", which does not decode",
          {{"kind", to_string(kind.gk)}, {"id", std::to_string(id)}, {"reason", out.message}});
  } catch (const std::exception& e) {
    out = {Outcome::error, {}, e.what()};  // the store failed to read it: retry later
  } catch (...) {
    out = {Outcome::error, {}, "unknown exception"};
  }
  return out;
}

}  // namespace beehive::detail
