#pragma once

// The two ways a beehive-ctl command fails, which decide its exit status.

#include <stdexcept>
#include <string>

namespace beehive::ctl {

/// The command line itself is wrong (exit status 2), e.g. a malformed duration.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& what) : std::runtime_error(what) {}
};

/// What the command asked for does not exist (exit status 1, like any runtime error):
/// a separate type so that messages stay specific instead of SQLite's.
class NotFound : public std::runtime_error {
 public:
  explicit NotFound(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace beehive::ctl
