#pragma once

/// `Page<Spec, Status>`: one page of `Client::list_page`. `items` ascend by id;
/// `continue_token` is empty after the last page, else the opaque token that asks for
/// the next one.
///
/// A plain value: copyable, thread-compatible.

#include <string>
#include <vector>

#include <beehive/object.hpp>

namespace beehive {

template <class Spec, class Status>
struct Page {
  std::vector<Object<Spec, Status>> items;
  std::string continue_token;
};

}  // namespace beehive
