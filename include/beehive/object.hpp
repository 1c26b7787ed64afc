#pragma once

/// `Object<Spec, Status>`: one stored object with its spec and status decoded into the
/// application's types. The metadata fields (`id`, `slug`, `generation`, ...) and the
/// relation accessors come from `ObjectMeta`. A plain value: copyable, thread-compatible.

#include <optional>

#include <beehive/object_meta.hpp>

namespace beehive {

template <class Spec, class Status>
struct Object : ObjectMeta {
  Spec spec{};
  std::optional<Status> status;  ///< nullopt until a controller reports one
};

}  // namespace beehive
