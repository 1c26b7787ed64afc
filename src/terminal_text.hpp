#pragma once

// Text made safe to print on a terminal or in a line-based log. Slugs, kinds, condition
// and event messages, exception messages are any text a program wrote: printed raw, an
// escape sequence in one could recolour, retitle or rewrite an operator's terminal, a
// newline forge a table row or a log line, a bidirectional override reorder what is
// read. beehive-ctl's output (its JSON too, after the encoder escaped the C0 controls)
// and the default stderr logger pass such text through here.

#include <string>
#include <string_view>

namespace beehive {

/// `text` with its control characters written as escapes: \n, \r and \t, \xNN for the
/// other C0 controls, DEL and each byte that is not part of well-formed UTF-8, \u00NN for
/// the C1 controls (U+0080-U+009F), and \uNNNN for the bidirectional marks, embeddings,
/// overrides and isolates (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) and the
/// line and paragraph separators (U+2028, U+2029). Everything else, backslashes
/// included, is kept. With
/// `keep_newlines`, a newline and a tab stay as they are (the layout of a database's
/// multi-line error message).
std::string printable(std::string_view text, bool keep_newlines = false);

/// JSON text (an encoder's output, which escapes the C0 controls in strings but may leave
/// DEL, the C1 and the bidirectional controls raw) with those written as JSON escapes
/// (\u007f, \u009b, \u202e): the same JSON value, safe to print. Its newlines (the
/// encoder's indentation) are kept.
std::string printable_json(std::string_view json);

}  // namespace beehive
