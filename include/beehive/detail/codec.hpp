#pragma once

// Conversion between the application's Spec/Status types and stored JSON text. Any
// type nlohmann/json converts both ways works; an empty struct is stored as "{}"
// without a converter. Encoding failures throw Error(errc::invalid_argument); decoding
// failures throw Error(errc::decode).
//
// Internal: not part of the API and may change. The functions keep no state: thread-safe
// when the user's converters are.

#include <concepts>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

#include <beehive/migrator.hpp>
#include <beehive/object.hpp>
#include <beehive/object_row.hpp>

namespace beehive::detail {

template <class T>
concept JsonWritable = requires(nlohmann::json& j, const T& v) {
  nlohmann::adl_serializer<T>::to_json(j, v);
};

template <class T>
concept JsonReadable = requires(const nlohmann::json& j, T& v) {
  nlohmann::adl_serializer<T>::from_json(j, v);
};

template <class T>
concept RawJson = std::is_same_v<T, nlohmann::json>;

template <class T>
concept Storable = (JsonWritable<T> && JsonReadable<T>) || std::is_empty_v<T> || RawJson<T>;

/// Spec and Status may also be `nlohmann::json` itself, stored as is.

/// The deepest nesting of arrays and objects beehive writes or reads. nlohmann prints,
/// copies and compares values recursively: a much deeper value (100,000 levels) would
/// overflow the stack, so it is refused before anything recurses over it.
inline constexpr int max_json_depth = 512;

/// Serializes to compact text with object keys sorted, so that equal values give
/// equal bytes. Throws invalid_argument for a value that does not store as itself (a
/// string that is not UTF-8, NaN or infinity, nesting beyond max_json_depth).
std::string dump_json(const nlohmann::json& j);
/// Parses text; throws decode (text nested beyond max_json_depth included).
nlohmann::json parse_json(std::string_view text);
/// Throws invalid_argument naming `what` unless `j` is nested at most max_json_depth
/// deep and its numbers are finite (JSON has no NaN or infinity: they would be stored
/// as null). Walks without recursing.
void require_storable(const nlohmann::json& j, std::string_view what);
/// Whether `j` nests at most max_json_depth deep (a walk without recursion).
bool json_within_depth(const nlohmann::json& j) noexcept;
/// Whether `text` nests at most max_json_depth deep (a scan of its brackets, no parse).
bool json_text_within_depth(std::string_view text) noexcept;
/// Throws invalid_argument naming `what` unless `text` is one JSON value, nested at most
/// max_json_depth deep, with no integer beyond 64 bits (which would be read as a double,
/// losing digits): JSON text a caller hands over as is, e.g. an actor's spec.
void require_json_text(std::string_view text, std::string_view what);
/// A JSON value as actors' messages carry it: its text, "" for null. A value that has
/// no JSON text (nested beyond max_json_depth, a string that is not UTF-8, a discarded
/// value) travels as a marker that does not parse, so that it arrives as a discarded
/// value, which the store refuses (invalid_argument) as it would have refused the value.
/// Never throws a JSON error (the serializer and printer call it).
std::string json_wire_text(const nlohmann::json& j);
/// The value `json_wire_text` sent: null for "", a discarded value for text that is not
/// JSON or nests beyond max_json_depth (checked before anything recurses).
nlohmann::json json_from_wire_text(const std::string& text);
/// Throws Error(errc::invalid_argument) naming `what` unless `text` is valid UTF-8
/// without a NUL character (PostgreSQL's text cannot hold one, so neither backend takes it).
void require_text(std::string_view text, std::string_view what);

template <Storable T>
std::string encode(const T& value) {
  if constexpr (RawJson<T>) {
    return dump_json(value);
  } else if constexpr (JsonWritable<T>) {
    nlohmann::json j;
    try {
      nlohmann::adl_serializer<T>::to_json(j, value);
    } catch (...) {
      rethrow_as(errc::invalid_argument, "cannot encode value");
    }
    return dump_json(j);
  } else {
    return "{}";
  }
}

/// Parses a stored blob and converts it from `stored` up to the migrator's version
/// (`spec` picks the spec or the status converter). A current version of 0 (no
/// migrator, or an unversioned column) takes every blob as it is; otherwise a blob above
/// the current version is schema_version_downgrade; a converter that throws is decode.
nlohmann::json load_blob(std::string_view text, int stored, const Migrator* m, bool spec);

/// The version check of load_blob alone: schema_version_downgrade when the column is
/// versioned (`current` > 0) and `stored` is above it.
void require_readable_version(int stored, int current, bool spec);

template <Storable T>
T from_json_value(nlohmann::json j) {
  if constexpr (RawJson<T>) return j;
  T value{};
  if constexpr (RawJson<T>) {
  } else if constexpr (JsonReadable<T>) {
    try {
      nlohmann::adl_serializer<T>::from_json(j, value);
    } catch (...) {
      rethrow_as(errc::decode, "cannot decode value");
    }
  } else if (!j.is_object()) {
    throw Error(errc::decode, "expected a JSON object for an empty struct");
  }
  return value;
}

template <Storable T>
T decode(std::string_view text) {
  return from_json_value<T>(parse_json(text));
}

/// Decodes a row, converting blobs written at older schema versions through `m` (no
/// migrator: every blob is taken as it is stored).
/// A row passed as an rvalue gives up its metadata instead of copying it.
template <class Spec, class Status, class Row>
requires std::same_as<std::remove_cvref_t<Row>, ObjectRow> Object<Spec, Status> decode_object(
    Row&& row, const Migrator* m = nullptr) {
  Object<Spec, Status> obj;
  obj.spec = from_json_value<Spec>(load_blob(row.spec, row.spec_version, m, true));
  if (row.status)
    obj.status = from_json_value<Status>(load_blob(*row.status, row.status_version, m, false));
  static_cast<ObjectMeta&>(obj) = std::forward<Row>(row).meta;
  return obj;
}

}  // namespace beehive::detail
