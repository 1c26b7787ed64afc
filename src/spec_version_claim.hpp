#pragma once

// The spec version a Client write stores (BeehiveCore::writing_spec_version), and the
// note a write of a kind not registered yet leaves: register_controller refuses a
// migrator for a kind with rows stored at version 0 in this build's shape, which the
// migrator would take for its own version 0. Only a write that commits leaves the note
// for good: keep() says it did (inside a within block, that the write was made: a block
// rolled back later leaves the note); a claim dropped unkept (the write failed: not
// found, a slug taken, a context that ended) takes the note back.
//
// Thread-safety: one claim belongs to one call; the note it updates is the core's.

#include <functional>
#include <utility>

namespace beehive::detail {

class SpecVersionClaim {
 public:
  /// `done(kept)` runs once: at keep(), or with false when the claim goes unkept.
  explicit SpecVersionClaim(int version, std::function<void(bool kept)> done = {})
      : version_(version), done_(std::move(done)) {}
  SpecVersionClaim(SpecVersionClaim&& other) noexcept
      : version_(other.version_), done_(std::exchange(other.done_, nullptr)) {}
  SpecVersionClaim& operator=(SpecVersionClaim&&) = delete;
  ~SpecVersionClaim() {
    if (done_) done_(false);
  }

  int version() const { return version_; }
  /// The write committed.
  void keep() {
    if (auto done = std::exchange(done_, nullptr)) done(true);
  }

 private:
  int version_;
  std::function<void(bool)> done_;
};

}  // namespace beehive::detail
