#pragma once

/// Errors. Every failing beehive call throws `beehive::Error`, a `std::system_error`
/// whose `code()` compares equal to one `beehive::errc` value:
///
///   try { client.get(ctx, id); }
///   catch (const beehive::Error& e) { if (e.code() == beehive::errc::not_found) ...; }
///
/// The enumerators start at 1 because 0 means "no error" for both `std::error_code`
/// and CAF's `caf::error`, which carries the same codes between actors.
///
/// Values beehive refuses to store (`invalid_argument`, nothing written): text that is not
/// UTF-8 in any call that takes text; a spec, status or event detail holding NaN or
/// infinity (JSON has neither), or arrays and objects nested deeper than 512 levels (the
/// limit keeps every recursive pass over a value, printing, copying, comparing, far from
/// the stack's end); spec or status text from an actor that is not JSON. Stored JSON
/// nested deeper than that (written by another program) reads as `decode`.
///
/// `Error` is an immutable exception value and the error category a singleton: both
/// are safe to share between threads.

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace beehive {

enum class errc : std::uint8_t {
  not_found = 1,               ///< no such object of this kind
  wrong_kind,                  ///< a controller write names another kind's object
  no_controller,               ///< the kind has no registered controller
  not_loaded,                  ///< a relation read that the load options did not ask for
  conflicting_option,          ///< an option contradicts a positional argument
  already_exists,              ///< the slug is held (a deletion-pending row included)
  observed_generation_future,  ///< update_status with a generation above the object's
  schema_version_downgrade,    ///< a blob written by a newer schema version
  decode,                      ///< a value that does not round-trip or cannot be read
  invalid_argument,            ///< a bad option value or a value that cannot be stored
  already_registered,          ///< a second controller for one kind
  already_started,             ///< start twice, or register after start
  stopped,                     ///< the beehive has stopped (or start after stop)
  store_in_use,                ///< another running beehive uses the same database
  cancelled,                   ///< the call's context was cancelled
  deadline_exceeded,           ///< the call's context passed its deadline
  store,                       ///< the database failed; the message carries SQLite's
  conflict,                    ///< with_resource_version named a version the object no longer has
  watch_too_old,               ///< with_resume_from below what the change log still holds, or 0
  watch_too_new,               ///< with_resume_from above the store's resource version
};

/// The category of beehive's error codes; its name is "beehive".
const std::error_category& error_category() noexcept;

/// Short stable name of a code, e.g. "not_found".
const char* to_string(errc e) noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

/// The exception every beehive call throws.
class Error : public std::system_error {
 public:
  explicit Error(errc e);
  Error(errc e, const std::string& what);

  errc value() const noexcept { return static_cast<errc>(code().value()); }
  /// The explanation given at construction, without the code's name that what() adds.
  const std::string& message() const noexcept { return message_; }

 private:
  std::string message_;
};

namespace detail {
/// Rethrows the current exception of a user conversion as an Error with `code` (an
/// Error as it is).
[[noreturn]] void rethrow_as(errc code, std::string_view what);
}  // namespace detail

}  // namespace beehive

template <>
struct std::is_error_code_enum<beehive::errc> : std::true_type {};
