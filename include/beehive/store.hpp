#pragma once

/// `Store`: the durable home of a beehive's objects, conditions, relations and events.
/// Open one with `beehive::sqlite::open` (one file, one process) or
/// `beehive::postgres::open` (one database, any number of processes) and hand it to a
/// `Beehive`. A store is shared by pointer; it closes when the last owner lets go.
///
/// The interface is deliberately opaque: beehive's actors talk to the backend through a
/// private interface, the same for every backend.
/// Thread-safe.

#include <filesystem>
#include <string>

namespace beehive {

class Store {
 public:
  virtual ~Store() = default;
  /// Where the data lives (for messages and tools).
  virtual std::string describe() const = 0;

 protected:
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
};

}  // namespace beehive
